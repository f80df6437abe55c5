"""Prompts of the pipeline's LLM tasks. Every task answers with JSON only.

Free text the model writes (memory contents, scene names, scene bodies, the persona) follows the
language of the user's messages; JSON keys, enum values, ids and timestamps stay in English.
"""

from __future__ import annotations

LANGUAGE_RULE = (
    "Write every free-text value (contents, names, summaries, Markdown) in the language the user "
    "mostly writes in. Keep JSON keys, enum values, ids and timestamps exactly as specified."
)

L1_SYSTEM = f"""You maintain the long-term memory of an AI assistant. You read a slice of a \
conversation between a user and the assistant and do two things.

1. Segment the new messages into scenes. A scene is one ongoing activity, named from the \
assistant's point of view, for example "Helping a backend developer choose a database" or \
"陪用户规划周末徒步路线" (about 10-40 words or 15-40 characters, specific enough to be unique). Keep \
the previous scene's name unless the topic, goal or intent clearly changed.

2. Extract durable memories from the NEW messages only (background messages are context and \
must not be extracted again). A memory is one self-contained statement that will still be \
useful in a future conversation, written so it makes sense without the conversation. Types:
- "persona": stable facts about the user: identity, background, preferences, habits, skills, \
relationships. priority 80-100 for core traits, 50-79 for ordinary ones; drop anything below 50.
- "episodic": things that happened or were decided, with when. Work out absolute times from the \
message timestamps and put them in metadata.activity_start_time / activity_end_time (ISO 8601 \
with offset). priority 80-100 for important events, 60-79 for ordinary ones; drop below 60.
- "instruction": standing rules the user gives the assistant or the project (style, language, \
tools, constraints). priority 90-100 for strict rules (-1 for an absolute global rule), 70-89 \
otherwise; drop below 70.
Each rule, preference or fact the user states becomes its own memory, even when several are \
stated in one sentence. Do not extract: small talk, one-off requests, the assistant's own \
actions or suggestions, passing feelings, or anything already in the background. When in \
doubt, leave it out: an empty list is better than noise.

{LANGUAGE_RULE}

Answer with a JSON array only, no prose and no Markdown fence:
[{{"scene_name": "...", "message_ids": ["m3", "m4"], "memories": [{{"content": "...", \
"type": "persona|episodic|instruction", "priority": 80, "source_message_ids": ["m3"], \
"metadata": {{"activity_start_time": "...", "activity_end_time": "..."}}}}]}}]
Emit every scene you see, with "memories": [] when it holds nothing worth keeping."""


L1_DEDUP_SYSTEM = f"""You keep an AI assistant's long-term memory free of duplicates and \
contradictions. For each NEW memory you get the EXISTING memories most related to it. Decide:
- "store": it is new information; keep it as it is.
- "skip": an existing memory already says the same thing; drop the new one.
- "update": it replaces what one or more existing memories say (a changed preference, a new \
decision, a corrected fact). Write the current truth in merged_content.
- "merge": it and one or more existing memories describe the same thing and read better as one \
memory (a state that evolved, one event told in parts). Write the combined memory.
For update and merge, list the replaced existing ids in target_ids; they are kept as history. \
Memories of different types may be merged. merged_timestamps is the union of the timestamps of \
everything merged. Prefer merge for evolving states and for one event told across memories.

{LANGUAGE_RULE}

Answer with a JSON array only, one object per new memory:
[{{"record_id": "n1", "action": "store|skip|update|merge", "target_ids": ["c2"], \
"merged_content": "...", "merged_type": "persona|episodic|instruction", "merged_priority": 80, \
"merged_timestamps": ["..."]}}]"""


def scene_system(max_scenes: int, max_chars: int) -> str:
    return f"""You organise an AI assistant's memories about one user into scene files: \
Markdown documents, each about one area of the user's life or work (a project, a hobby, a \
recurring kind of request). You receive new memories and the current scene files, and answer \
with the changes to make. The engine applies them; you never write files yourself.

Actions:
- {{"action": "update", "file": "existing.md", "summary": "...", "body": "..."}} rewrite a scene \
to absorb new memories (the default choice).
- {{"action": "create", "file": "new-name.md", "summary": "...", "body": "..."}} only when no \
existing scene fits; at most one create per answer.
- {{"action": "merge", "sources": ["a.md", "b.md"], "file": "a.md", "summary": "...", \
"body": "..."}} combine overlapping scenes into one (file may be one of the sources or new).
- {{"action": "delete", "file": "stale.md"}} remove a scene that no longer holds anything true.
There may be at most {max_scenes} scenes: when the count is at the limit, merge before creating. \
File names: lowercase letters, digits, CJK, "-", "_", ending in ".md"; no spaces. Do not set heat \
or dates: the engine keeps them.

Each body (at most {max_chars} characters) follows this outline, with headings in the user's \
language:
## Basics (who, where, what this scene is about)
## Core traits (one short paragraph, at most 100 characters)
## Preferences (a bullet list)
## Signals (implicit patterns worth noticing)
## Story (at most 400 characters: trigger -> action -> result)
## Evolution (dated changes)
## Open questions (contradictions not yet resolved)
Omit empty sections. Keep every fact that is still true; drop what newer memories replaced.

If the new memories change the user's big picture (identity, values, a major life or work \
change), set "persona_update" to a one-line reason; otherwise null.

{LANGUAGE_RULE}

Answer with one JSON object only:
{{"actions": [...], "persona_update": null}}"""


def persona_system(max_chars: int) -> str:
    return f"""You write the profile an AI assistant keeps about its user, from the scene \
files distilled from their conversations. Use only what the scenes say; never guess. At most \
{max_chars} characters of Markdown, following this outline (headings in the user's language):

# User profile
> **In one line**: who this person is, as an archetype.
> **Basics**: name, role, location, languages, whatever is known.
> **Long-term preferences**: the stable ones, briefly.
## 1. Context: life and work situation now
## 2. Texture: interests, habits, tastes
## 3. Working with the assistant
### 3.1 Rules the assistant must follow
### 3.2 How they like answers
## 4. Insights: 3-7 short tags about what drives them

When a previous profile is given, revise it: keep what still holds, change what the scenes \
changed, add what is new.

{LANGUAGE_RULE}

Answer with one JSON object only: {{"persona": "<the Markdown profile>"}}"""
