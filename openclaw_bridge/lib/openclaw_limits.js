// How long a tool result OpenClaw 2026.9.6 lets reach the model, so a read-back page fits.
//
// OpenClaw cuts a tool result ("[... N more characters truncated]") at two limits, both in its
// own budget units (cjk-chars-*.mjs `estimateStringCharsWithMinimumRawWeight`, with a weight
// r for every UTF-16 unit plus extra weight for CJK and astral characters):
//   - the live cap (tool-result-limits-*.mjs `resolveLiveToolResultMaxChars`), r = 1:
//     min(floor(0.3 * window) * 4, 16,000 below a 100k-token window, 32,000 below 200k, else 64,000);
//   - the context guard (builtin-openclaw-*.mjs `installToolResultContextGuard`,
//     `resolveToolResultContextMaxChars`), r = 2: max(1,024, window).
// "window" is the model's context window in tokens (the run's contextTokenBudget). So at a 16k
// window and above a result of 8,000 ASCII characters or 4,000 common CJK characters always
// fits; at 128k, 16,000 and 8,000. These are the figures the cut (9,653 of 11,842
// characters) came from; reading back in pages sized by them keeps every page whole.

// Weighted ranges, as in OpenClaw's cjk-chars-*.mjs (bucket k: its extra weight below).
const RANGES = [
  [[183, 183], [12288, 12703], [19968, 40869], [44032, 55215], [65281, 65376]],
  [[4352, 4607], [11904, 12287], [12704, 19967], [40870, 40959], [40960, 42239], [42752, 42759], [43360, 43391], [55216, 55295], [63744, 64255]],
  [[711, 711], [713, 715], [729, 729], [746, 747], [773, 773], [803, 803], [65040, 65103], [65377, 65500], [65504, 65510]],
  [[119648, 119665]],
  [[94176, 94207], [110576, 110591], [110592, 110959], [127488, 127743], [131072, 195103], [196608, 210047]],
];

function bucketOf(codePoint) {
  for (let k = 0; k < RANGES.length; k += 1) {
    for (const [lo, hi] of RANGES[k]) if (codePoint >= lo && codePoint <= hi) return k + 1;
  }
  return 0;
}

/** OpenClaw's units for one code point at raw weight r (1 or 2). */
export function unitsOf(codePoint, r) {
  const astral = codePoint > 0xffff;
  const base = (astral ? 2 : 1) * r;
  if (codePoint < 128) return base;
  switch (bucketOf(codePoint)) {
    case 1:
      return base + (4 - r);
    case 2:
      return base + (12 - r);
    case 3:
      return base + (8 - r);
    case 4:
      return base + (12 - 2 * r);
    case 5:
      return base + (16 - 2 * r);
    default:
      return base;
  }
}

/** OpenClaw's estimate of a whole text at raw weight r. */
export function unitsOfText(text, r) {
  let total = 0;
  for (const ch of text) total += unitsOf(ch.codePointAt(0), r);
  return total;
}

// Below this window OpenClaw's floor (1,024) and the 0.3 share decide; the bridge does not guess.
export const DEFAULT_WINDOW = 16_000;

/** The two limits for a context window of `window` tokens (DEFAULT_WINDOW when unknown). */
export function toolResultLimits(window) {
  const w = Number.isFinite(window) && window > 0 ? Math.floor(window) : DEFAULT_WINDOW;
  const cap = w >= 200_000 ? 64_000 : w >= 100_000 ? 32_000 : 16_000;
  return { live: Math.min(Math.floor(w * 0.3) * 4, cap), guard: Math.max(1_024, w) };
}

/**
 * The context window of the model a tool runs for, from the tool factory's context
 * (activeModel plus the config's provider entry, capped by agents.defaults.contextTokens);
 * undefined when it cannot be told.
 */
export function windowOf(toolCtx) {
  try {
    const cfg = toolCtx?.runtimeConfig ?? toolCtx?.config;
    const provider = toolCtx?.activeModel?.provider;
    const modelId = toolCtx?.activeModel?.modelId;
    const models = cfg?.models?.providers?.[provider]?.models;
    const model = Array.isArray(models) ? models.find((m) => m?.id === modelId) : undefined;
    const sizes = [model?.contextTokens, model?.contextWindow, cfg?.agents?.defaults?.contextTokens]
      .map(Number)
      .filter((n) => Number.isFinite(n) && n > 0);
    return sizes.length ? Math.min(...sizes) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How many code points of `text` (from its start) fit both limits, less `reserve` units for
 * the page's footer; at least one, so reading always moves on.
 */
export function fittingPrefix(text, limits, reserve) {
  const live = limits.live - reserve;
  const guard = limits.guard - reserve;
  let one = 0;
  let two = 0;
  let count = 0;
  let units16 = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    one += unitsOf(cp, 1);
    two += unitsOf(cp, 2);
    if (count > 0 && (one > live || two > guard)) break;
    count += 1;
    units16 += ch.length;
  }
  return { codePoints: count, utf16: units16 };
}
