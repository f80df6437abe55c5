// The blocks the gateway's recall injects into a prompt. They are context for one model call and
// must not end up in the transcript or be captured back into memory as if the user wrote them.

// relevant-memories is the per-turn block; the others are the stable part, which an old gateway's
// single `context` field mixes into the same prepended text.
// current_task_context / history_task_context are the offload's canvas blocks (a per-turn
// prependContext without the context-engine slot).
export const INJECTED_TAGS = [
  "relevant-memories",
  "user-persona",
  "scene-navigation",
  "memory-tools-guide",
  "current_task_context",
  "history_task_context",
];

const BLOCKS = INJECTED_TAGS.map((tag) => new RegExp(`<${tag}(?:\\s[^>]*)?>[\\s\\S]*?</${tag}>\\s*`, "g"));

export function hasInjected(text) {
  return typeof text === "string" && INJECTED_TAGS.some((tag) => text.includes(`<${tag}`));
}

export function stripInjected(text) {
  if (!hasInjected(text)) return text;
  let out = text;
  for (const block of BLOCKS) out = out.replace(block, "");
  return out.trim();
}

/** A copy of an OpenClaw message with injected blocks removed, or null when there are none. */
export function stripMessage(message) {
  if (!message || typeof message !== "object") return null;
  const { content } = message;
  if (typeof content === "string") {
    return hasInjected(content) ? { ...message, content: stripInjected(content) } : null;
  }
  if (!Array.isArray(content)) return null;
  let changed = false;
  const parts = content.map((part) => {
    if (part?.type === "text" && hasInjected(part.text)) {
      changed = true;
      return { ...part, text: stripInjected(part.text) };
    }
    return part;
  });
  return changed ? { ...message, content: parts } : null;
}
