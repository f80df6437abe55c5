"""Rule-based L1 extraction: what the product remembers when no LLM is configured.

Only clear first-person statements and standing instructions are taken, in English and Chinese:

- rules for the assistant ("Always answer in English", "以后回答都用中文", "不要用表情符号"),
- constraints and decisions ("The project database must be PostgreSQL", "项目数据库必须用 PostgreSQL"),
- preferences and habits ("I prefer dark mode", "I go running every morning", "我每天早上喝咖啡"),
- stated facts ("My name is Ana", "I work at Acme", "我住在杭州"),
- switches ("Let's switch to MySQL", "改用 MySQL"), which update an earlier constraint.

Questions, one-off requests and small talk are ignored: a missed memory costs less than a false
one. Each statement keeps the user's own words, so recall can quote it back faithfully.
A statement with a subject and a value (a *slot*: "project database" = "PostgreSQL") lets the
conflict policy replace the old value when the user changes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


# Someone else as the subject: "我女儿", "我的老公", "我们家猫". What follows in the sentence
# is about them, not the user.
_ZH_KIN = (
    r"(?:女儿|儿子|孩子|小孩|闺女|宝宝|老婆|老公|妻子|丈夫|爱人|太太|媳妇|妈妈|妈|爸爸|爸|母亲|"
    r"父亲|父母|爸妈|哥哥|哥|姐姐|姐|弟弟|弟|妹妹|妹|爷爷|奶奶|外公|外婆|姥姥|姥爷|男朋友|"
    r"女朋友|男友|女友|对象|朋友|同事|老板|领导|上司|室友|邻居|家人|猫|狗|宠物)"
)
_ZH_OTHER_SUBJECT = re.compile(r"^(?:我们|我)(?:的|家的?)?" + _ZH_KIN)


@dataclass
class RuleMemory:
    content: str
    type: str  # persona | episodic | instruction
    priority: int
    kind: str  # rule | constraint | preference | habit | fact | event | switch
    scene_name: str
    slot: tuple[str, str] | None = None  # (subject, value)
    switch_to: str | None = None  # the new value of a switch
    switch_from: str | None = None  # the old value, when the user named it


SCENES = {
    "rule": ("Rules for the assistant", "对助手的要求"),
    "constraint": ("Project decisions", "项目约定"),
    "convention": ("Project decisions", "项目约定"),
    "switch": ("Project decisions", "项目约定"),
    "preference": ("Preferences and habits", "偏好与习惯"),
    "habit": ("Preferences and habits", "偏好与习惯"),
    "fact": ("About the user", "个人信息"),
    "event": ("Events", "经历与事件"),
}
KIND_TYPE = {
    "rule": "instruction",
    "constraint": "instruction",
    "convention": "instruction",
    "switch": "instruction",
    "preference": "persona",
    "habit": "persona",
    "fact": "persona",
    "event": "episodic",
}
KIND_PRIORITY = {
    "rule": 90,
    "constraint": 85,
    "convention": 80,
    "switch": 85,
    "preference": 70,
    "habit": 70,
    "fact": 65,
    "event": 60,
}

# ----------------------------------------------------------------------------- splitting

# A list number ("1.", "②", "(3)") starts an item only when text follows it: "My new phone is a
# Pixel 9." ends with a number, not with an empty list item.
_ENUM = re.compile(
    r"(?:(?<=^)|(?<=[\s：:;；，,。]))(?:\d{1,2}[.)、．](?!\d)|[①-⑩]|[（(]\d{1,2}[)）])\s*(?=\S)"
)
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,2}[.)、．](?!\d))\s+")
_SENTENCE_EN = re.compile(r"(?<=[.!?;])\s+")
_SENTENCE_ZH = re.compile(r"(?<=[。！？；!?;])")
_FILLERS_EN = re.compile(
    r"^(?:(?:ok(?:ay)?|oh|ah|also|and|so|well|hey|hi|btw|by the way|fyi|actually|"
    r"just so you know|please note(?: that)?|note(?: that)?|one more thing|another thing|"
    r"and also|plus|first|second|third|finally|lastly|next)\b[\s,:;-]*)+",
    re.IGNORECASE,
)
_FILLERS_ZH = re.compile(
    r"^(?:好的|好吧|对了|另外|还有|顺便说一下|顺便说|顺便|嗯+|哦+|那个|其实|然后|而且|并且|首先|其次|最后|第[一二三四五六七八九十]条?|规则[一二三四五六七八九十\d]*)[，,：:\s]*"
)


# "Remember: ...", "Just so you know, ...", "记住：...": the user flags a statement as worth
# keeping. The prefix is not a rule for the assistant; what follows is classified on its own
# ("Remember to always ..." stays a rule because of what follows).
_EN_REMEMBER = re.compile(
    r"^(?:please\s+)?(?:(?:do\s+)?remember|note|keep in mind|bear in mind|for the record|"
    r"just so you know|just fyi|fyi|for your information|heads up|don'?t forget|"
    r"for future reference|make a note|take note|note to self|memo|update|quick update|"
    r"correction|small correction|scratch that|change of plans?|one correction)"
    r"(?:\s+(?:this|that))?(?:\s*[:：,，-]\s*|\s+(?=that\b|i\b|i'|my\b|we\b|our\b|to\b))"
    r"(?:that\s+)?",
    re.IGNORECASE,
)
_ZH_REMEMBER = re.compile(
    r"^(?:请你?|帮我)?(?:记住|记一下|记下来|记下|记着|记好|备注一下|备注|补充一下|告诉你(?:一下)?|"
    r"提醒你(?:一下)?|说明一下|注意[：:]|顺便说一?下|跟你说(?:一下)?|"
    r"你要知道|你记一下|给你说一下|说一下|更正一下|更正|更新一下|纠正一下|纠正|说错了|改一下)"
    r"(?:一下)?[：:，,\s]*"
)


_CORRECTION = re.compile(
    r"^(?:update|quick update|correction|small correction|one correction|scratch that|"
    r"change of plans?|更正|更新|纠正|说错了|改一下)",
    re.IGNORECASE,
)


def strip_remember(sentence: str) -> tuple[str, bool]:
    """``sentence`` without a "remember:" style prefix, and whether there was one."""
    for pattern in (_EN_REMEMBER, _ZH_REMEMBER):
        m = pattern.match(sentence)
        if m and m.end() < len(sentence):
            rest = sentence[m.end() :].strip()
            if rest.lower().startswith("to "):
                rest = rest[3:].strip()  # "Remember to always ..." -> "always ..."
            return rest, True
    return sentence, False


def sentences(text: str) -> list[str]:
    """Split a message into candidate statements (lines, list items, sentences)."""
    out: list[str] = []
    if "```" in text:
        text = re.sub(r"```.*?(```|\Z)", "\n", text, flags=re.DOTALL)
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        line = _ENUM.sub("\n", line)
        for piece in line.split("\n"):
            for s in _SENTENCE_ZH.split(piece):
                for t in _SENTENCE_EN.split(s):
                    t = t.strip()
                    if t:
                        out.append(t)
    return out


def _clean(sentence: str) -> str:
    s = sentence.strip().strip("\"'“”‘’「」")
    for _ in range(3):
        s2 = _FILLERS_EN.sub("", s)
        s2 = _FILLERS_ZH.sub("", s2).strip()
        if s2 == s:
            break
        s = s2
    s = re.sub(r"^[\s,，:：;；、-]+", "", s)
    return s.strip()


def _trim_end(s: str) -> str:
    return re.sub(r"[\s,，;；:：.。!！~～]+$", "", s).strip()


# ----------------------------------------------------------------------------- English

_EN_QUESTION = re.compile(
    r"^(?:what|how|why|when|where|who|whom|which|whose|can|could|would|will|do|does|did|is|"
    r"are|was|were|should|shall|may|might|have|has|am)\b",
    re.IGNORECASE,
)
_EN_PERSIST = re.compile(
    r"\b(?:always|never|from now on|going forward|in (?:the )?future|every ?time|each time|"
    r"whenever|by default|at all times|any ?time|all (?:of )?(?:your|the) (?:answers|replies|"
    r"responses|code|commits|messages|output)|in every|consistently|from here on|no matter what)\b",
    re.IGNORECASE,
)
_EN_RULE_START = re.compile(
    r"^(?:please\s+)?(?:always|never|don'?t ever|do not ever|from now on|going forward|"
    r"in (?:the )?future|whenever|every ?time|each time|by default|remember (?:to|that)|"
    r"make sure (?:to |that |you )?always|you (?:must|should|shall|have to|need to)|"
    r"i (?:want|need|would like|'d like) you to|call me|address me as|refer to me as|rule:)\b",
    re.IGNORECASE,
)
_EN_IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?:don'?t|do not|avoid|stop|keep|use|write|answer|reply|respond|speak|"
    r"talk|format|put|add|include|explain|give|show|prefer|only|be|make sure|remember|"
    r"let me know|ask|send|mention|sign|end|start|begin|stick to|default to)\b",
    re.IGNORECASE,
)
_EN_ONE_OFF = re.compile(r"\b(?:this|that|these|those|here|now|today|tonight|yet|it)\b", re.I)
_EN_PREFERENCE = re.compile(
    r"^i(?:'m| am)? (?:really |strongly |much |definitely |do |also |absolutely |totally |"
    r"generally )?(?:like|love|prefer|enjoy|hate|dislike|adore|loathe|can'?t stand|cannot stand|"
    r"don'?t like|do not like|am not a fan of|'m not a fan of|am a (?:big |huge )?fan of|"
    r"'m a (?:big |huge )?fan of|allergic to|am allergic to|'m allergic to|would rather|"
    r"'d rather)\b",
    re.IGNORECASE,
)
_EN_FAVOURITE = re.compile(r"^my (?:all[- ]time )?favou?rite\b", re.IGNORECASE)
_EN_HABIT_ADVERB = re.compile(
    r"^i (?:usually|always|often|normally|typically|generally|never|rarely|seldom|regularly|"
    r"tend to|like to|habitually|routinely|mostly|sometimes)\b",
    re.IGNORECASE,
)
_EN_TIME_PHRASE = re.compile(
    r"\b(?:every|each) (?:single )?(?:day|morning|evening|night|week|weekend|weekday|month|year|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|afternoon|lunch|hour)\b|"
    r"\b(?:daily|weekly|nightly|on weekends|on weekdays|every other day)\b",
    re.IGNORECASE,
)
_STABLE_NOUNS = (
    r"(?:name|full name|nickname|email|e-mail|phone(?: number)?|birthday|age|job|role|title|"
    r"position|profession|occupation|company|employer|team|department|manager|boss|"
    r"wife|husband|partner|girlfriend|boyfriend|son|daughter|kids?|children|brother|sister|"
    r"mother|father|mom|dad|dog|cat|pet|hometown|city|country|address|time ?zone|timezone|"
    r"native language|mother tongue|first language|major|degree|university|school|"
    r"editor|ide|os|operating system|shell|laptop|phone model|stack|tech stack|"
    r"main language|programming language|github(?: handle| username)?|username|handle|"
    r"blood type|diet|allergy|allergies|height|weight|salary|budget)"
)
_EN_FACT = re.compile(
    r"^(?:my name is|i'?m called|i am called|i work(?:ed)? (?:as|at|for|on|in)|"
    r"i(?:'m| am) (?:a|an) (?!bit\b|little\b|lot\b|fan\b)\w+|"
    r"i live(?:d)? in|i(?:'m| am) from|i come from|i was born|i(?:'m| am) \d+|"
    r"i have (?:a|an|one|two|three|four|\d+) (?:\w+ )?(?:dogs?|cats?|pets?|kids?|children|sons?|"
    r"daughters?|brothers?|sisters?|cars?|years? of)\b|i speak|i(?:'m| am) (?:vegetarian|vegan|"
    r"left-handed|right-handed|married|single|retired|based in|located in|studying|learning|"
    r"working on)|i study|i own|i use\b|we use\b|"
    r"my (?:\w+ ){0,2}" + _STABLE_NOUNS + r" (?:is|are|was)\b|"
    r"our (?:project|team|company|app|product|stack|codebase|repo|repository|database|backend|"
    r"frontend|service|api|product|startup|office) (?:is|are|uses|runs|has|lives)\b|"
    r"(?:the|our) [\w-]+(?: [\w-]+)? (?:runs on|run on|uses|is hosted on|is deployed on|"
    r"lives in|is built with|is written in|is on)\b)",
    re.IGNORECASE,
)
_EN_NOT_RULES = re.compile(
    r"^(?:never ?mind|no worries|don'?t worry|do not worry|don'?t bother|don'?t mind|"
    r"never heard|always happy|always a pleasure)\b",
    re.IGNORECASE,
)
_EN_EVENT = re.compile(
    r"^i (?:just |recently )?(?:went|visited|moved|started|finished|bought|met|travel(?:l)?ed|"
    r"graduated|joined|left|quit|got|had|completed|launched|shipped|released)\b.*\b(?:yesterday|"
    r"last (?:week|month|year|night|weekend)|ago|in (?:19|20)\d\d|this (?:week|month|year)|"
    r"recently|today)\b",
    re.IGNORECASE,
)
_EN_CONSTRAINT = re.compile(
    r"^(?:the |our |my |this |all |every |each )?(?P<subject>[a-z0-9][\w/ .+#-]{1,60}?)\s+"
    r"(?:must|should|has to|have to|needs to|need to|shall|is required to|are required to)"
    r"(?: always| never| not| only)?(?: be| use| run on| run| stay| remain| go)?\s+"
    r"(?P<value>.+)$",
    re.IGNORECASE,
)
_EN_MY_SLOT = re.compile(
    r"^(?:my|our) (?P<subject>[\w -]{1,40}?) (?:is|are) (?:now )?(?P<value>.+)$", re.IGNORECASE
)
_EN_WE_USE = re.compile(
    r"^(?:we|i) (?:use|are using|'re using|am using|'m using) (?P<value>[\w.+# -]{1,40}?) "
    r"(?:for|as) (?:the |our |my )?(?P<subject>[\w -]{2,40})$",
    re.IGNORECASE,
)
_EN_SWITCH = re.compile(
    r"^(?:(?:let'?s|let us|we'?ll|we will|i'?ll|i will|we should|we need to|i want to|"
    r"i'd like to|i would like to|we'?re going to|we are going to|please|now|so|ok|okay|"
    r"instead,?|actually,?|change of plan,?|on second thought,?)\s+)*"
    r"(?:switch|change|move|migrate|swap|go|port|convert|transition)"
    r"(?: (?:the |our |my |this )?(?P<subject>[\w -]{2,40}?))?(?: over| back)? (?:to|into) "
    r"(?P<value>[\w.+# -]{1,40}?)(?: instead| now| from now on| going forward| please|"
    r" for (?:the|this|our) \w+)*$",
    re.IGNORECASE,
)
_EN_INSTEAD = re.compile(
    r"^(?:(?:let'?s|we'?ll|we will|i'?ll|please|actually,?|now)\s+)*use (?P<value>[\w.+# -]{1,40}?)"
    r" instead(?: of (?P<old>[\w.+# -]{1,40}))?$",
    re.IGNORECASE,
)
_EN_REPLACE = re.compile(
    r"^(?:(?:let'?s|we'?ll|we will|please)\s+)*replace (?P<old>[\w.+# -]{1,40}?) with "
    r"(?P<value>[\w.+# -]{1,40})$",
    re.IGNORECASE,
)
_PRONOUN_SUBJECT = re.compile(r"^(?:i|you|we|he|she|they|it|this|that|there)$", re.IGNORECASE)
_EN_FIRST_PERSON = re.compile(r"^(?:i|i'm|i’m|i've|i'd|my|we|we're|we've|our|me and|mine)\b", re.I)
# First-person openings that are conversation, not something about the user to keep.
_EN_CHITCHAT = re.compile(
    r"^(?:i (?:think|guess|believe|suppose|hope|wonder|mean|see|agree|disagree|understand|know|"
    r"feel like|bet|doubt|wish|was wondering|was just|just wanted|want to know|need help|"
    r"need you|would love to know|'?d love to know|can'?t believe|have a question|have no idea|"
    r"appreciate|forgot|remember when|totally|really appreciate|got it|get it|will|'?ll|"
    r"have a (?:quick |small |short |silly |dumb )?(?:question|problem|issue|idea)|"
    r"would|could|might|may|should|can see|can tell|have to go|gotta|must say)|"
    r"i(?:'m| am) (?:sure|not sure|glad|happy to hear|sorry|afraid|curious|wondering|fine|good|"
    r"okay|ok|excited|so excited|tired|back|here|done|ready|going to|gonna|about to|thinking|"
    r"just|kidding|joking|impressed|confused|lost)|"
    r"my (?:bad|pleasure|apologies|question|point|guess)|me too|me neither|we'?ll|we will|"
    r"we should|we could|we can)\b",
    re.IGNORECASE,
)
# A passing state, not something lasting about the user: "I'm a bit tired today".
_EN_TRANSIENT = re.compile(
    r"\b(?:today|tonight|right now|at the moment|again|this morning|this afternoon|"
    r"this evening|just now|for now|so far)\b",
    re.IGNORECASE,
)
_EN_NEGATED_HABIT = re.compile(
    r"^i (?:don'?t|do not|never|no longer|can'?t|cannot|won'?t|only|rarely|hardly ever|avoid|"
    r"stay away from|gave up|quit|stopped)\b",
    re.IGNORECASE,
)
_EN_STANDING_IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?:use|answer|reply|respond|format|wrap|indent|name|keep|prefer|"
    r"stick to|default to|sign|address|call me|refer to me|spell|quote|cite|comment|"
    r"document|commit|capitalise|capitalize|abbreviate)\b",
    re.IGNORECASE,
)
_EN_ONE_OFF_REQUEST = re.compile(
    r"\b(?:this|that|these|those|here|now|today|tonight|yet|it|me a|me an|me some|"
    r"the following|above|below|again|for me)\b",
    re.IGNORECASE,
)


# A sentence that opens with a place/time/topic phrase before its first-person subject ("On
# weekends I usually hike", "Coffee-wise, I only take it black"): classified on what follows
# the phrase, kept whole. Not for a passing moment ("This morning I ...", "Right now I ...").
_EN_FRONTED = re.compile(
    r"^(?:(?:on|in|at|during|after|before|every|each|most|for|around|over)\b[^,.;!?]{2,40}?|"
    r"[\w-]+-wise|as for [^,.;!?]{2,30}?|when it comes to [^,.;!?]{2,40}?|"
    r"as far as [^,.;!?]{2,30}? (?:goes|go|is concerned))\s*,?\s+"
    r"(?=(?:i|i'm|i've|i'd|my|we|we're|we've|our)\b)",
    re.IGNORECASE,
)
_EN_PASSING = re.compile(
    r"\b(?:today|tonight|now|moment|this|last|yesterday|just|meantime|meanwhile|end)\b", re.I
)
# "When you write code for me, use type hints": a condition on the assistant's work makes the
# imperative that follows a standing rule.
_EN_CONDITIONAL_RULE = re.compile(
    r"^(?:when(?:ever)?|if|each time|every time|any ?time)\b(?=[^,]*\b(?:you|me|i|my)\b)"
    r"(?![^,]*\b(?:was|were|did|had|get a chance|have time|can|could)\b)"
    r"(?=[^,]*\b(?:writ\w*|answer\w*|repl\w*|respond\w*|explain\w*|cod(?:e|ing)|summar\w*|"
    r"translat\w*|review\w*|suggest\w*|recommend\w*|format\w*|draft\w*|generat\w*|ask\w*|"
    r"show\w*|giv\w*|talk\w*|email\w*|messag\w*|commit\w*|help\w*)\b)"
    r"[^,]{3,80},\s*(?P<rest>.+)$",
    re.IGNORECASE,
)
_EN_POLITE_RULE = re.compile(
    r"^i(?:'d| would) (?:prefer|rather|appreciate it|like it|love it)(?: it)?(?: if| that)? you\b|"
    r"^no [\w -]{2,30}? (?:in|on|for) (?:your|the|any|my) (?:replies|reply|answers?|responses?|"
    r"code|messages?|output|emails?|commits?|docs|documentation|summaries|explanations?)\b",
    re.IGNORECASE,
)
_EN_MY_GO_TO = re.compile(
    r"^[\w' -]{2,30}? (?:is|are) (?:always )?my (?:all[- ]time )?(?:favou?rite|go-to|preferred|"
    r"usual|default|top choice|choice)\b",
    re.IGNORECASE,
)


_EN_YOU_CHAT = re.compile(
    r"^you(?:'re| are| must| should| have to| need to| might| could| would| will|'ll)?"
    r"(?: (?:totally|definitely|really|so|probably|just|absolutely|surely))?"
    r" (?:have|had|be|been|try|come|see|go|visit|check|get some|take care|rest|love|like|enjoy|"
    r"feel|deserve|look|sound|seem|know|remember when|did|were|was|made|got)\b",
    re.IGNORECASE,
)


def _classify_en(s: str) -> RuleMemory | None:
    m = _EN_CONDITIONAL_RULE.match(_trim_end(s))
    if m and not s.endswith("?"):
        rest = m.group("rest")
        if _EN_IMPERATIVE.match(rest) or _EN_STANDING_IMPERATIVE.match(rest):
            return _make(s, "rule")
    if s.endswith("?") or _EN_QUESTION.match(s) or _EN_NOT_RULES.match(s) or _EN_YOU_CHAT.match(s):
        return None
    if len(s.split()) < 3 and not _EN_SWITCH.match(s):
        if len(s.split()) == 2 and re.match(r"^i(?:'m|’m)\s+\w{3,}", s, re.I):
            return _make(s, "fact")  # "I'm vegan", "I'm colorblind"
        return None
    body = _trim_end(s)
    for pattern in (_EN_SWITCH, _EN_INSTEAD, _EN_REPLACE):
        m = pattern.match(body)
        if m:
            value = _trim_end(m.group("value"))
            subject = (m.groupdict().get("subject") or "").strip() or None
            if subject and _PRONOUN_SUBJECT.match(subject):
                subject = None
            old = (m.groupdict().get("old") or "").strip() or None
            if value:
                return _make(
                    s,
                    "switch",
                    slot=(subject, value) if subject else None,
                    switch_to=value,
                    switch_from=old,
                )
    if _EN_PREFERENCE.match(s) or _EN_FAVOURITE.match(s):
        return _make(s, "preference", slot=_en_slot(body))
    if (
        _EN_HABIT_ADVERB.match(s)
        or (re.match(r"^(?:i|my)\b", s, re.I) and _EN_TIME_PHRASE.search(s))
        or re.match(r"^(?:every|each) (?:day|morning|evening|night|week|weekend)\b.*\bi\b", s, re.I)
    ):
        return _make(s, "habit")
    if _EN_RULE_START.match(s) or (_EN_IMPERATIVE.match(s) and _EN_PERSIST.search(s)):
        return _make(s, "rule")
    if re.match(
        r"^(?:please\s+)?(?:don'?t|do not|avoid|never)\b", s, re.I
    ) and not _EN_ONE_OFF.search(s):
        return _make(s, "rule")
    m = _EN_CONSTRAINT.match(body)
    if m and not _PRONOUN_SUBJECT.match(m.group("subject").split()[0]):
        return _make(s, "constraint", slot=(m.group("subject"), _trim_end(m.group("value"))))
    if _EN_EVENT.match(s):
        return _make(s, "event")
    if _EN_FACT.match(s):
        return _make(s, "fact", slot=_en_slot(body))
    if _EN_CHITCHAT.match(s):
        return None
    if _EN_NEGATED_HABIT.match(s):
        return _make(s, "preference")
    if (
        _EN_FIRST_PERSON.match(s)
        and not re.search(r"\byou(?:r|'re|’re)?\b", s, re.I)
        and not _EN_TRANSIENT.search(s)
    ):
        return _make(s, "fact", slot=_en_slot(body))
    if _EN_STANDING_IMPERATIVE.match(s) and not _EN_ONE_OFF_REQUEST.search(s):
        return _make(s, "rule")
    if _EN_POLITE_RULE.match(s):
        return _make(s, "rule")
    if _EN_MY_GO_TO.match(s):
        return _make(s, "preference")
    m = _EN_FRONTED.match(s)
    if m and not _EN_PASSING.search(m.group(0)):
        inner = _classify_en(s[m.end() :])
        if inner is not None and inner.type != "instruction":
            return _make(s, inner.kind, slot=inner.slot)
    return None


def _en_slot(body: str) -> tuple[str, str] | None:
    for pattern in (_EN_WE_USE, _EN_MY_SLOT):
        m = pattern.match(body)
        if m:
            return (m.group("subject").strip(), _trim_end(m.group("value")))
    return None


# ----------------------------------------------------------------------------- Chinese

_ZH_QUESTION = re.compile(
    r"(?:[?？]|[吗呢么嘛]$|什么|怎么|为什么|为何|如何|哪里|哪个|哪些|是否|能不能|可不可以|要不要|有没有|是不是|多少)"
)
_ZH_PERSIST = re.compile(
    r"以后|今后|之后都|从现在开始|从现在起|往后|始终|总是|永远|一律|每次|一直|所有|任何时候|默认|都要|都用|都不要|都别"
)
_ZH_RULE_START = re.compile(
    r"^(?:请你?|你)?(?:以后|今后|从现在开始|从现在起|从今往后|往后|每次|始终|永远|一律|务必|一定要|"
    r"必须|不要|别再?|不许|不准|禁止|记住|请记住|记得|称呼我|叫我|回答时|回复时|回答问题时)"
)
_ZH_REQUEST = re.compile(r"^(?:请你?|你|回答|回复|写|用|说)")
_ZH_PREFERENCE = re.compile(
    r"^我(?:很|非常|特别|比较|最|超|挺|也|还|一直|真的|不太|更|超级)*"
    r"(?:喜欢|爱|偏好|偏爱|讨厌|不喜欢|不爱|受不了|热爱|钟爱|倾向于|宁愿|对.{1,12}过敏|过敏)"
)
_ZH_FAVOURITE = re.compile(r"^我(?:最)?喜欢的(?P<subject>.{1,10}?)是(?P<value>.+)$")
_ZH_HABIT = re.compile(
    r"^(?:我(?:每天|每晚|每周|每个?(?:早上|早晨|晚上|周末|月|星期)|平时|通常|一般|经常|总是|"
    r"常常|往往|习惯|一直|基本上|每逢|天天)|(?:每天|每晚|每周|平时|通常|一般)(?:早上|早晨|晚上|中午)?我)"
)
_ZH_FACT = re.compile(
    r"^(?:我(?:是(?!说|想|问|指|不是|觉得)|叫|名叫|住在|住|在.{1,20}(?:工作|上班|上学|读书|生活)|来自|"
    r"的.{1,10}(?:是|叫)|有(?!.{0,3}(?:问题|疑问|想法|事|点|个想|些想|些问))|今年|养了|负责|从事|"
    r"会说|正在学|在学|用的是)|我们(?:的)?(?:项目|团队|公司|产品|系统|数据库|后端|前端|服务)|"
    r"我的.{1,8}是)"
)
_ZH_EVENT = re.compile(r"^我(?:昨天|前天|上周|上个?月|去年|今天|刚刚|刚|最近|前几天).{2,}")
_ZH_CONSTRAINT = re.compile(
    r"^(?P<subject>[^，,。：:]{2,20}?)(?:必须|一定要|务必|只能|应该|需要|统一|要)"
    r"(?:是|用|使用|采用|选用|改用|基于|跑在|部署在)?(?P<value>.+)$"
)
_ZH_MY_SLOT = re.compile(r"^(?:我|我们)的(?P<subject>.{1,10}?)(?:是|叫|用的是|用)(?P<value>.+)$")
_ZH_SWITCH = re.compile(
    r"^(?:那|那就|那我们|我们|咱们|还是|就|干脆|以后|现在|请|要|决定|已经|打算|准备)*"
    r"(?:把?(?P<subject>[^，,。我你]{1,20}?)(?:从(?P<old>[^，,。]{1,20}?))?)?"
    r"(?:换成|改成|改用|切换到|切换成|换到|改为|迁移到|换用|改回|转到|转用|迁到|换了|改到|调到|"
    r"挪到|推到|提前到|推迟到)"
    r"(?P<value>.{1,40})$"
)
_ZH_NOT_ANYMORE = re.compile(
    r"^(?:我们|咱们)?(?:不用|不再用|不要用|别用)(?P<old>.{1,20}?)了?[，,]?(?:改用|换成|改成|用)(?P<value>.{1,40})$"
)
_ZH_PARTICLES = re.compile(r"[吧了啊呀哦呢嘛啦吖]+$")
_ZH_FIRST_PERSON = re.compile(r"^(?:我|咱们|本人)")
_ZH_CHITCHAT = re.compile(
    r"^(?:算了|不用了|没关系|好吧|行吧|好的|没事|无所谓|"
    r"我(?:觉得|认为|想问|想知道|想请教|猜|看看|希望你|不知道|不确定|明白|知道了|懂了|同意|"
    r"也这么|以为|怀疑|感觉|好像|是说|要去|先|马上|一会|待会|有个问题|有一个问题|想让你|需要你|"
    r"请你|就是|只是想|随便|开玩笑|太|好|挺好|没事|还好|在想|刚才|去看看|试试|来|问一下|问你)|"
    r"我们(?:一起|去|来|先|可以|应该|要不|待会|下次|明天|今天))"
)
# "代码注释用中文", "提交记录以中文动词开头": a convention about a thing, no rule word needed.
_ZH_CONVENTION = re.compile(
    r"^(?P<subject>[^，,。！？；我你他她它这那请]{2,12}?)(?:统一|一律|都|全部|全都)?"
    r"(?:用|使用|采用|以|选用|走|放在|放到|遵循|按照|按)(?P<value>[^，,。！？；]{1,40})$"
)


# "咖啡我只喝美式", "周末我一般带孩子去公园": a topic or time phrase before 我. Classified on what
# follows, kept whole; not after interjections, conjunctions or a passing moment (今天/刚才...).
_ZH_FRONTED = re.compile(
    r"^(?P<topic>[^，,。！？；我你]{2,10}?)(?<![帮给让叫请替为跟和对教诉问带陪送找像比把被使令说得])[，,]?(?=我)"
)
_ZH_NOT_TOPIC = re.compile(
    r"^(?:谢谢|哈哈|呵呵|嘿|嗯|哦|噢|好|行|那|所以|但|不过|因为|如果|要是|可是|然后|其实|感觉|反正|"
    r"说实话|老实说|是的|对|没错|不是|真|太|这|那)|今天|今晚|刚才|刚刚|这会儿|此刻|暂时|待会|一会|马上|现在|"
    r"昨天|前天|上周|上次|这次|这周|明天"
)
# "给我写邮件的时候用正式的语气", "回答问题请先给结论": an instruction bound to the assistant's
# recurring work (a when-clause about answering / writing for the user) is a standing rule.
_ZH_WHEN_RULE = re.compile(
    r"^(?=[^，,。]{0,14}?(?:给我|帮我|跟我|和我|为我|你|回答|回复|答复|输出|生成|翻译|总结|解释))"
    r"[^，,。]{1,14}?(?:的时候|时)[，,]?(?:请|要|都|一律|务必|尽量|必须|记得|别|不要)?"
    r"(?:用|先|写|加|带|附|保持|使用|采用|以|别|不要|不用|控制|分点|列出|附上)"
    r"|^(?:回答|回复|答复|解释|输出)[^，,。]{0,8}?请"
)


def _classify_zh(s: str) -> RuleMemory | None:
    body = _trim_end(s)
    if _ZH_QUESTION.search(body):
        return None
    short = len(_CJK.findall(body)) + len(re.findall(r"[A-Za-z0-9]+", body)) < 4
    for pattern in (_ZH_NOT_ANYMORE, _ZH_SWITCH):
        m = pattern.match(body)
        if m:
            value = _trim_end(_ZH_PARTICLES.sub("", m.group("value")))
            subject = (m.groupdict().get("subject") or "").strip() or None
            old = (m.groupdict().get("old") or "").strip() or None
            if value:
                return _make(
                    s,
                    "switch",
                    slot=(subject, value) if subject else None,
                    switch_to=value,
                    switch_from=old,
                )
    if short and not re.match(r"^我[\u3400-\u9fff]{2}$", body):
        return None
    m = _ZH_FAVOURITE.match(body)
    if m:
        return _make(s, "preference", slot=("喜欢的" + m.group("subject"), m.group("value")))
    if _ZH_PREFERENCE.match(body):
        return _make(s, "preference")
    if _ZH_HABIT.match(body):
        return _make(s, "habit")
    stripped = re.sub(r"^(?:以后|今后|从现在开始|从现在起|往后)[，,]?", "", body)
    answer_style = re.match(
        r"^(?:回答|回复|答复|输出|解释)(?:时|的时候)?(?:请|要|都|务必|尽量|一律|必须)", body
    )
    if (
        _ZH_RULE_START.match(body)
        or answer_style
        or (_ZH_REQUEST.match(body) and _ZH_PERSIST.search(body))
    ):
        m = _ZH_CONSTRAINT.match(stripped)
        if m and not re.match(r"^(?:我|你|请|回答|回复)", m.group("subject")):
            return _make(s, "constraint", slot=(m.group("subject"), _trim_end(m.group("value"))))
        return _make(s, "rule")
    m = _ZH_CONSTRAINT.match(stripped)
    if (
        m
        and re.search(r"必须|一定要|务必|只能|统一", body)
        and not re.match(r"^(?:我|你|他|她|它|这|那)", m.group("subject"))
    ):
        return _make(s, "constraint", slot=(m.group("subject"), _trim_end(m.group("value"))))
    if _ZH_EVENT.match(body):
        return _make(s, "event")
    if _ZH_FACT.match(body):
        m = _ZH_MY_SLOT.match(body)
        slot = (m.group("subject"), _trim_end(m.group("value"))) if m else None
        return _make(s, "fact", slot=slot)
    if _ZH_CHITCHAT.match(body) or re.search(r"你|又|今天|刚才|刚刚|这会儿|此刻|暂时", body):
        return None
    if _ZH_FIRST_PERSON.match(body):
        kind = (
            "preference"
            if re.match(r"^我(?:只|不|从不|从来不|不再|很少|绝不|一点也不)", body)
            else "fact"
        )
        return _make(s, kind)
    m = _ZH_CONVENTION.match(body)
    if m:
        return _make(s, "convention", slot=(m.group("subject"), _trim_end(m.group("value"))))
    if _ZH_WHEN_RULE.match(body):
        return _make(s, "rule")
    m = _ZH_FRONTED.match(body)
    # ...and not a plan or wish for that time ("晚上我想吃火锅").
    if (
        m
        and not _ZH_NOT_TOPIC.search(m.group("topic"))
        and not re.match(r"我(?:们)?(?:想|要|打算|准备|得|会|先|去|来)", body[m.end() :])
    ):
        inner = _classify_zh(body[m.end() :])
        if inner is not None and inner.type != "instruction":
            return _make(s, inner.kind, slot=inner.slot)
    return None


# ----------------------------------------------------------------------------- third person

# Memories are written about the user, in the third person: inside a system prompt "我对花生过敏"
# or "I am allergic to peanuts" reads as the assistant speaking. The user's own words stay in L0
# (and in the trace). Linear-time substitutions over one short sentence.
_ZH_PRONOUNS = (
    (re.compile(r"(?<!自)(?:我们|咱们)家"), "用户家"),
    (re.compile(r"(?<!自)(?:我们|咱们)(?:的)?(?=团队|公司|项目|小组|组|部门|产品)"), "用户的"),
    (re.compile(r"(?<!自)(?:我们|咱们)"), "用户这边"),
    (re.compile(r"(?<!自)我(?:的|家的?)?(?=" + _ZH_KIN + r")"), "用户的"),
    (re.compile(r"(?<!自)我的"), "用户的"),
    (re.compile(r"本人|(?<!自)我"), "用户"),
)
_EN_MODALS = frozenset(
    "can could will would should must might may shall used ought need dare".split()
)
_EN_ADVERBS = (
    r"(?:(?:usually|always|often|never|really|also|only|mostly|generally|normally|typically|"
    r"sometimes|rarely|seldom|still|just|absolutely|strongly|definitely|totally|much|actually|"
    r"even|hardly ever|regularly|currently|now|no longer|mainly)\s+)*"
)
_EN_IRREGULAR_PAST = frozenset(
    "went got had was were made took left met bought began brought came did drove ate fell felt "
    "found flew gave grew heard held kept knew led lost meant paid put ran read said saw sold "
    "sent set sat slept spent spoke stood swam taught thought told understood woke won wore "
    "wrote quit moved".split()
)
_EN_SUBJECT_VERB = re.compile(
    r"\b(?P<subj>I|we)\s+(?P<adv>" + _EN_ADVERBS + r")(?P<verb>[A-Za-z]+(?:'t|’t)?)\b",
    re.IGNORECASE,
)
_EN_FIXED = (
    (re.compile(r"\bI(?:'m|’m| am)\b", re.I), "the user is"),
    (re.compile(r"\bI(?:'ve|’ve)\b", re.I), "the user has"),
    (re.compile(r"\bI(?:'d|’d)\b", re.I), "the user would"),
    (re.compile(r"\bI(?:'ll|’ll)\b", re.I), "the user will"),
    (re.compile(r"\bwe(?:'re|’re)\b", re.I), "the user's team is"),
    (re.compile(r"\bwe(?:'ve|’ve)\b", re.I), "the user's team has"),
    (re.compile(r"\bwe(?:'ll|’ll)\b", re.I), "the user's team will"),
    (re.compile(r"\bmyself\b", re.I), "themselves"),
    (re.compile(r"\b(?:my|mine)\b", re.I), "the user's"),
    (re.compile(r"\bour(?:s)?\b", re.I), "the user's"),
    (re.compile(r"\bme\b", re.I), "the user"),
    (re.compile(r"\bus\b"), "the user's team"),
)
_FIRST_AGAIN_ZH = re.compile(r"^用户(?:的)?(?=的)|^用户(?!的)")
_FIRST_AGAIN_EN = re.compile(r"^the user's\s+", re.I)


def _third_person_verb(verb: str) -> str:
    low = verb.lower()
    if low in ("don't", "don’t"):
        return "does not"
    if low == "do":
        return "does"
    if low in ("am", "'m"):
        return "is"
    if low == "have":
        return "has"
    if low in ("haven't", "haven’t"):
        return "has not"
    if low in _EN_MODALS or low.endswith(("'t", "’t", "ed")) or low in _EN_IRREGULAR_PAST:
        return verb
    if re.search(r"(?:s|sh|ch|x|z|o)$", low):
        return verb + "es"
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(text: str) -> str:
    """``text`` about the user in the third person ("我对花生过敏" -> "用户对花生过敏", "I'm allergic
    to peanuts" -> "The user is allergic to peanuts"); others stay who they are ("我女儿学钢琴" ->
    "用户的女儿学钢琴")."""
    if has_cjk(text):
        for pattern, repl in _ZH_PRONOUNS:
            text = pattern.sub(repl, text)
        return text
    for pattern, repl in _EN_FIXED[:7]:
        text = pattern.sub(repl, text)

    def subject_verb(m: re.Match[str]) -> str:
        who = "the user" if m.group("subj").lower() == "i" else "the user's team"
        return f"{who} {m.group('adv')}{_third_person_verb(m.group('verb'))}"

    text = _EN_SUBJECT_VERB.sub(subject_verb, text)
    text = re.sub(r"\bI\b", "the user", text)
    text = re.sub(r"\bwe\b", "the user's team", text, flags=re.I)
    for pattern, repl in _EN_FIXED[7:]:
        text = pattern.sub(repl, text)
    return text[:1].upper() + text[1:]


# ----------------------------------------------------------------------------- entry points


def _make(
    sentence: str,
    kind: str,
    slot: tuple[str | None, str] | None = None,
    switch_to: str | None = None,
    switch_from: str | None = None,
) -> RuleMemory:
    zh = has_cjk(sentence)
    content = third_person(_trim_end(sentence))
    if not zh and content[:1].islower():
        content = content[0].upper() + content[1:]
    if not re.search(r"[.!。！)）\]]$", content):
        content += "。" if zh else "."
    clean_slot = None
    if slot and slot[0]:
        clean_slot = (slot[0].strip(), slot[1].strip())
    priority = KIND_PRIORITY[kind]
    if kind == "rule" and re.search(
        r"\bnever\b|\bmust\b|必须|禁止|务必|绝不|不许|不准", content, re.I
    ):
        priority = 95
    return RuleMemory(
        content=content,
        type=KIND_TYPE[kind],
        priority=priority,
        kind=kind,
        scene_name=SCENES[kind][1 if zh else 0],
        slot=clean_slot,
        switch_to=switch_to,
        switch_from=switch_from,
    )


_SPLIT_EN = re.compile(
    r",\s*(?:and\s+|but\s+|or\s+)?|\s+and\s+(?=(?:i\b|i'm\b|my\b|always|never|don'?t|do not|please|keep|use|avoid|make|write|answer|reply|respond)\b)",
    re.I,
)
_SPLIT_ZH = re.compile(r"[，,、]|并且|而且|同时")


_FRAME_ONLY = re.compile(
    r"^(?:from now on|going forward|from here on|in (?:the )?future|by default|always|"
    r"whenever possible|if possible|please|also|以后|今后|从现在开始|从现在起|往后|默认|另外|还有|请|"
    r"记住|以后的话)$",
    re.IGNORECASE,
)


# A zh clause that drops the subject of the clause before it ("我对花生过敏，平时喜欢吃川菜"):
# frequency words, "also", negation and verbs of liking that can only describe the speaker.
# Not "叫豆豆" (in "我养了一只猫，叫豆豆" it is the cat's name) nor "想早点睡" / "不想说话" (moods).
_ZH_CARRY = re.compile(
    r"^(?:平时|平常|平日|日常|每天|每周|每晚|每个?月|每个?周末|周末|经常|常常|总是|一般|通常|也|还|"
    r"不(?:吃|喝|抽|碰|喜欢|爱|用)|从不|从来不|很少|只|最|特别|喜欢|爱|讨厌|偏爱|习惯|"
    r"对[^，,。]{1,10}过敏)"
)


def _carry_subject(parts: list[str]) -> list[str]:
    """Later clauses without a subject of their own get the first clause's 我/我们, so each
    memory says whose it is ("平时喜欢吃川菜" -> "我平时喜欢吃川菜"). Only the speaker's own
    我/我们: in "我女儿在读三年级，每周三学钢琴" the subject is the daughter (see _split_compound)."""
    m = re.match(r"^(我们|我)", parts[0])
    if not m or _ZH_OTHER_SUBJECT.match(parts[0]):
        return parts
    return [parts[0]] + [
        p if re.match(r"^(?:我|你|他|她|它)", p) or not _ZH_CARRY.match(p) else m.group(1) + p
        for p in parts[1:]
    ]


def _split_compound(sentence: str) -> list[str]:
    """ "Always answer in English, never use emojis, and keep answers short" -> three rules."""
    zh = has_cjk(sentence)
    parts = [p.strip() for p in (_SPLIT_ZH if zh else _SPLIT_EN).split(sentence) if p and p.strip()]
    # "From now on, keep answers short": a leading time frame belongs to what follows.
    merged: list[str] = []
    for p in parts:
        if merged and _FRAME_ONLY.match(merged[-1]):
            merged[-1] = f"{merged[-1]}{'，' if zh else ', '}{p}"
        else:
            merged.append(p)
    parts = merged
    if len(parts) < 2:
        return [sentence]
    classified = [classify(p, inherit_rule=False) for p in parts]
    first = classify(sentence, inherit_rule=False)
    if first is None:
        return [sentence]
    if first.kind not in ("rule", "constraint"):
        # "我女儿在读三年级，每周三学钢琴": the later clauses are about the daughter; split,
        # each would lose its subject (or be put on the user), so the sentence stays whole.
        if zh and _ZH_OTHER_SUBJECT.match(parts[0]):
            return [sentence]
        # "My name is Ana and I work at Acme": split only if every piece is a statement.
        if zh:
            parts = _carry_subject(parts)
            classified = [classify(p, inherit_rule=False) for p in parts]
        return parts if all(c is not None for c in classified) else [sentence]

    # Each piece must stand alone as a rule (or be long enough to be one after a rule opener).
    def long_enough(p: str) -> bool:
        return len(_CJK.findall(p)) >= 4 if zh else len(p.split()) >= 3

    if all(c is not None or long_enough(p) for c, p in zip(classified, parts, strict=True)) and (
        sum(c is not None for c in classified) >= 2
    ):
        return parts
    return [sentence]


def _stated_change(s: str) -> bool:
    """A statement (not a question, not addressed to the assistant, not chatter) that says
    something changed: kept even when no other pattern knows its phrasing."""
    if s.endswith(("?", "？")) or not is_change(s):
        return False
    if has_cjk(s):
        return (
            len(_CJK.findall(s)) >= 6
            and not _ZH_QUESTION.search(s)
            and not re.search(r"你", s)
            and not _ZH_CHITCHAT.match(s)
        )
    return (
        len(s.split()) >= 3
        and not _EN_QUESTION.match(s)
        and not re.search(r"\byou(?:r|'re)?\b", s, re.I)
        and not _EN_CHITCHAT.match(s)
        and not _EN_NOT_RULES.match(s)
    )


def classify(sentence: str, inherit_rule: bool = False) -> RuleMemory | None:
    s = _clean(sentence)
    if not s or len(s) > 300:
        return None
    original = s
    s, flagged = strip_remember(s)
    s = _clean(s)
    if not s:
        return None
    correction = flagged and bool(_CORRECTION.match(original))
    found = _classify_zh(s) if has_cjk(s) else _classify_en(s)
    if found is None and flagged and not s.endswith(("?", "？")):
        found = _make(s, "fact")  # "Remember: the wifi password is hunter2"
    if found is None and _stated_change(s):
        found = _make(s, "fact")  # "These days I cycle to work", "站会改到十点了"
    if found is not None and correction:
        # "Correction: I'm 34, not 33": the word says this replaces something; keep it.
        found.content = _make(original, found.kind).content
    if found is None and inherit_rule:
        zh = has_cjk(s)
        if (len(_CJK.findall(s)) >= 4 if zh else len(s.split()) >= 3) and not (
            s.endswith(("?", "？"))
        ):
            return _make(s, "rule")
    return found


_RULE_HEADER = re.compile(
    r"(?:rules?|instructions?|requirements?|guidelines?|conventions?|constraints?|规则|要求|约定|"
    r"规定|规范|注意事项|几点|几条)\s*[:：]$",
    re.IGNORECASE,
)


def extract(text: str) -> list[RuleMemory]:
    """Memories stated in one user message, in order, without duplicates."""
    found: list[tuple[str, RuleMemory | None]] = []
    in_rule_list = False
    subject = ""  # 我/我们 of the previous zh sentence ("我住在杭州；每周三晚上打羽毛球")
    for sentence in sentences(text):
        cleaned = _clean(sentence)
        if has_cjk(cleaned):
            if subject and _ZH_CARRY.match(cleaned):
                cleaned = subject + cleaned
            m = re.match(r"^(我们|我)", cleaned)
            other = _ZH_OTHER_SUBJECT.match(cleaned)
            # The next sentence's dropped subject is this one's: 我, or "我女儿" whole.
            subject = other.group(0) if other else (m.group(1) if m else "")
        if cleaned.endswith((":", "：")):
            # "Three rules:" / "请记住三条规则：" introduces a list whose items are rules.
            in_rule_list = bool(_RULE_HEADER.search(cleaned))
            continue
        m = re.match(r"^(.{2,60}?[:：])\s*(.+)$", cleaned)
        if m and _RULE_HEADER.search(m.group(1)):
            # "Remember three rules: always X, never Y, and Z" on one line.
            in_rule_list = True
            cleaned = _clean(m.group(2))
        pieces = _split_compound(cleaned)
        inherit = len(pieces) > 1 or in_rule_list
        for piece in pieces:
            found.append((piece, classify(piece, inherit_rule=inherit)))
    # In a message that lists two or more rules, its other imperative lines are rules too
    # ("- Always use type hints / - Never commit to main / - Prefer pytest").
    if sum(1 for _, f in found if f is not None and f.kind == "rule") >= 2:
        found = [
            (p, f if f is not None or not _imperative(p) else classify(p, inherit_rule=True))
            for p, f in found
        ]
    # "我们团队用飞书沟通，文档放在语雀": beside a statement about the user, "X 用 Y" describes
    # how they work, not a rule for the assistant.
    if any(f is not None and f.type == "persona" for _, f in found):
        found = [
            (p, _as_fact(f) if f is not None and f.kind == "convention" else f) for p, f in found
        ]
    out: list[RuleMemory] = []
    seen: set[str] = set()
    for _, f in found:
        if f is None:
            continue
        key = normalise(f.content)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _as_fact(m: RuleMemory) -> RuleMemory:
    zh = has_cjk(m.content)
    return RuleMemory(
        content=m.content,
        type="persona",
        priority=KIND_PRIORITY["fact"],
        kind="fact",
        scene_name=SCENES["fact"][1 if zh else 0],
        slot=m.slot,
    )


def _imperative(sentence: str) -> bool:
    s = _clean(sentence)
    if has_cjk(s):
        return bool(_ZH_REQUEST.match(s)) and not _ZH_QUESTION.search(s)
    return bool(_EN_IMPERATIVE.match(s)) and not s.endswith("?")


def normalise(text: str) -> str:
    """Comparison key: lower case, no punctuation or spaces."""
    return re.sub(r"[\W_]+", "", text.lower())


_SUBJECT_STOP = {"the", "our", "my", "this", "a", "an", "of", "for", "project's", "的"}


def subject_tokens(subject: str) -> set[str]:
    s = subject.lower().replace("的", " ")
    if has_cjk(s):
        return {s.replace(" ", "")}
    return {t for t in re.findall(r"[\w+#.-]+", s) if t not in _SUBJECT_STOP}


def same_subject(a: str, b: str) -> bool:
    """ "project database" ~ "database" ~ "the project's database"; 项目数据库 ~ 数据库."""
    ta, tb = subject_tokens(a), subject_tokens(b)
    if not ta or not tb:
        return False
    if has_cjk(a) or has_cjk(b):
        x, y = next(iter(ta)), next(iter(tb))
        return x in y or y in x
    return ta <= tb or tb <= ta


def slot_of(content: str) -> tuple[str, str] | None:
    """Re-derive a slot from a stored memory's text (for memories written before or by an LLM)."""
    found = classify(_FIRST_AGAIN_ZH.sub("我", _FIRST_AGAIN_EN.sub("my ", content), count=1))
    if found is None:
        return None
    return found.slot if found.kind != "switch" else None


def value_kind(value: str) -> str:
    """Coarse kind of a value, so a switch never replaces an unrelated slot."""
    v = value.strip()
    if has_cjk(v) and not re.search(r"[A-Za-z]", v):
        return "cjk"
    if re.search(r"[A-Za-z]", v):
        return "name"
    return "other"


# ----------------------------------------------------------------------------- changes

_CHANGE_EN = re.compile(
    r"(?<!from )\b(?:now|switched|switching|switch|moved|moving|changed|change|replaced|replace|no longer|"
    r"anymore|any more|stopped|quit|left|instead|migrated|migrating|ditched|dropped|gave up|"
    r"these days|rather than|used to|not .{1,30} but|started|new|in favou?r of|"
    r"update|updated|correction|not any ?more|went back to|going with|not \d+|not [A-Z]\w*)\b",
    re.IGNORECASE,
)
_CHANGE_ZH = re.compile(
    r"现在|改|换|不再|不用|不.{1,8}了|离职|搬到|搬去|迁|转|卖了|已经不|以后|开始|调到|挪到|推到|更正|纠正|"
    r"更新|其实是|不是.{1,10}而是|"
    r"从.{1,15}(?:到|成)"
)
_OLD_EN = re.compile(
    r"\b(?:off|from|instead of|replaced|replace|left|quit|ditched|dropped|stopped(?: using)?|"
    r"no longer (?:use|uses|using|on|at|in|with|drink|eat|run|deploy on|work at|work for|live in)|"
    r"moved away from|gave up|not)\s+(?P<old>[\w.+#-]+(?: [A-Z0-9][\w.+#-]*)?)",
    re.IGNORECASE,
)
_OLD_ZH = re.compile(
    r"(?:不用|不再用|不再|不)(?P<a>[^，,。；了]{1,12}?)了|从(?P<b>[^，,。；]{1,12}?)(?:改|换|转|离职|搬|迁)|"
    r"把(?P<c>[^，,。；]{1,12}?)(?:卖|换|改|扔|退)|(?P<d>[^，,。；]{1,12}?)(?:不用了|卖了|退了)"
)
_SUBJECT_FAMILIES = (
    ("residence", r"\blive[sd]?\b|\bliving\b|\bmoved? (?:to|into)\b|\bbased in\b|住|搬"),
    (
        "employer",
        r"\bwork(?:s|ed|ing)? (?:at|for)\b|\bjoined\b|\bleft\b|\bjob\b|工作|上班|入职|离职|跳槽",
    ),
    ("phone", r"\bphone\b|iphone|android|pixel|手机|安卓|苹果"),
    ("car", r"\bcar\b|\bdrive\b|\bdriving\b|车"),
    ("contact", r"e-?mail|phone number|\bnumber\b|邮箱|手机号|电话|微信号"),
    ("age", r"\byears? old\b|\bi'?m \d{1,2}\b|\bage\b|\d+\s*岁|[一二三四五六七八九十]+岁|今年"),
    ("diet", r"vegetarian|vegan|\bmeat\b|\bfish\b|吃素|素食|吃肉"),
    ("commute", r"to work\b|commute|上班|通勤"),
    ("schedule", r"standup|stand-up|meeting|\bsync\b|站会|例会|周会|开会"),
    (
        "messaging",
        r"slack|\bteams\b|discord|telegram|whatsapp|\bchat\b|钉钉|企业微信|飞书|沟通|聊天",
    ),
)
_GENERIC_WORDS = frozenset(
    "now use uses using used switched switch moved changed change replaced replace instead "
    "longer anymore stopped left actually really also new old 现在 改 换 改成 换成 改用 已经 了 "
    "决定 我们 项目 不用 不再 更".split()
)


def is_change(text: str) -> bool:
    """Whether a statement says something changed ("now", "switched", "改用", "不用…了")."""
    return bool((_CHANGE_ZH if has_cjk(text) else _CHANGE_EN).search(text))


def named_old_values(text: str) -> list[str]:
    """Values the statement says are no longer so: "moved off MongoDB", "不用 Jira 了"."""
    out: list[str] = []
    if has_cjk(text):
        for m in _OLD_ZH.finditer(text):
            v = next((g for g in m.groups() if g), "")
            v = v.strip()
            short = re.sub(r"^(?:再|用|喝|吃|在|是|做)", "", v)
            out.append(short if len(short) >= 2 else v)
    for m in _OLD_EN.finditer(text):
        v = m.group("old").strip()
        if len(v) >= 2 and v.lower() not in STOP_TOKENS:
            out.append(v)
    return out


STOP_TOKENS = frozenset("the a an my our to in at on it this that there here".split())


def families(text: str) -> set[str]:
    low = text.lower()
    return {name for name, pattern in _SUBJECT_FAMILIES if re.search(pattern, low)}


def change_affinity(new: str, old: str, terms: Any) -> int:
    """How strongly ``new`` (a change) points at the earlier memory ``old``: 2 when it names a
    value ``old`` holds, plus shared subject words (``terms`` tokenises) and a shared family."""
    score = 0
    low_old = old.lower()
    if any(v.lower() in low_old for v in named_old_values(new)):
        score += 2
    shared = (set(terms(new)) & set(terms(old))) - _GENERIC_WORDS
    score += min(len(shared), 2)
    if families(new) & families(old):
        score += 1
    return score


_SWITCH_VERB = re.compile(
    r"改用|换成|改成|换用|切换|迁移到|迁到|转用|改到|调到|\b(?:switched|moved|migrated|changed|"
    r"replaced|went|going with|now use|now on|use .{1,30} now|ditched|dropped)\b",
    re.IGNORECASE,
)


def switch_verb(text: str) -> bool:
    """Whether the statement replaces something with something else (not only "now")."""
    return bool(_SWITCH_VERB.search(text))
