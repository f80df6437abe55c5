// Read-back under OpenClaw's limits (issue 21, item 3): the read tool is always in the model's
// tool list (Tool Search on), registered with offload off too, and answers a long original in
// pages that OpenClaw passes uncut, which join to the original byte for byte. The limits are
// OpenClaw 2026.9.6's own: checked against its functions when the install is there
// (MEMORY_TENCENTDB_OPENCLAW_DIST, set by test_node_suites.py), else against figures taken
// from them. The forget tool refuses another tool's arguments.

import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";

import { fittingPrefix, toolResultLimits, unitsOfText, windowOf } from "../../openclaw_bridge/lib/openclaw_limits.js";
import { PAGE_MARK } from "../../openclaw_bridge/lib/offload_read.js";
import { bridgeWith, configFor, startStub, tempDir } from "./helpers.mjs";

const READ_TOOL = "memory_tencentdb_offload_read";

// [text, units at raw weight 1, at raw weight 2], from OpenClaw 2026.9.6's
// estimateStringCharsWithMinimumRawWeight (cjk-chars-*.mjs).
const UNITS = [
  ["plain ascii line\n", 17, 34],
  ["第一行：订单处理完成，耗时毫秒", 60, 60],
  ["😀𝒜 emoji and math", 19, 38],
  ["é ü ß ñ Ж ж", 11, 22],
  ["한국어 텍스트", 25, 26],
  ["ㄅㄆ ｱｲ ﹏ ㆍ", 39, 42],
  ["𠀀𠀁 rare ext-B", 43, 54],
  ["\u{1D4C0}\u{17000}", 4, 8],
];
// [window, resolveLiveToolResultMaxChars, resolveToolResultContextMaxChars] from OpenClaw
// 2026.9.6 (tool-result-limits-*.mjs). 19,306 is the window of the cut (9,653 = 19,306 / 2).
const LIMITS = [
  [8000, 9600, 8000],
  [16000, 16000, 16000],
  [19306, 16000, 19306],
  [40000, 16000, 40000],
  [100000, 32000, 100000],
  [128000, 32000, 128000],
  [200000, 64000, 200000],
];

async function openclawOwn() {
  const dist = process.env.MEMORY_TENCENTDB_OPENCLAW_DIST;
  if (!dist) return undefined;
  const find = (prefix) => readdirSync(dist).find((f) => f.startsWith(prefix) && f.endsWith(".mjs"));
  const cjk = await import(pathToFileURL(join(dist, find("cjk-chars-"))).href);
  const limits = await import(pathToFileURL(join(dist, find("tool-result-limits-"))).href);
  return {
    units: (text, r) => cjk.r(text, { minimumRawWeight: r }),
    live: (w) => limits.i({ contextWindowTokens: w }),
    guard: (w) => limits.o(w),
  };
}

test("OpenClaw's units and limits, as OpenClaw 2026.9.6 computes them", async () => {
  for (const [text, one, two] of UNITS) {
    assert.equal(unitsOfText(text, 1), one, text);
    assert.equal(unitsOfText(text, 2), two, text);
  }
  for (const [w, live, guard] of LIMITS) assert.deepEqual(toolResultLimits(w), { live, guard }, String(w));
  assert.deepEqual(toolResultLimits(undefined), { live: 16000, guard: 16000 }, "unknown window: 16k");
  const own = await openclawOwn();
  if (own) {
    const texts = [...UNITS.map((u) => u[0]), ZH_TEXT.slice(0, 3000), MIXED.slice(0, 3000)];
    for (const text of texts) for (const r of [1, 2]) assert.equal(unitsOfText(text, r), own.units(text, r));
    for (const w of [1000, 9999, 13334, 16000, 33333, 99999, 100000, 150000, 199999, 200000, 500000]) {
      assert.deepEqual(toolResultLimits(w), { live: own.live(w), guard: own.guard(w) }, String(w));
    }
  }
});

test("the model's window comes from the tool context: activeModel, its provider entry, contextTokens caps", () => {
  const config = { models: { providers: { fake: { models: [{ id: "fake-1", contextWindow: 128000 }] } } } };
  assert.equal(windowOf({ config, activeModel: { provider: "fake", modelId: "fake-1" } }), 128000);
  const capped = { ...config, agents: { defaults: { contextTokens: 40000 } } };
  assert.equal(windowOf({ runtimeConfig: capped, activeModel: { provider: "fake", modelId: "fake-1" } }), 40000);
  assert.equal(windowOf({ config, activeModel: { provider: "other", modelId: "x" } }), undefined);
  assert.equal(windowOf(undefined), undefined);
  assert.deepEqual(fittingPrefix("abc", { live: 1, guard: 1 }, 600), { codePoints: 1, utf16: 1 }, "always moves on");
});

// --- paging through a stand-in gateway that pages as the real one does (code points) ---------

const EN_TEXT = Array.from({ length: 900 }, (_, i) => `line ${i}: PASSED tests/test_mod_${i % 17}.py::test_${i}`).join("\n");
const ZH_TEXT = Array.from({ length: 700 }, (_, i) => `第${i}行：订单处理完成，耗时${i % 9}毫秒；数据库连接正常`).join("\n");
const MIXED = Array.from({ length: 3000 }, (_, i) => `${i}😀𝒜中é-`).join("");
const ORIGINALS = { call_en: EN_TEXT, call_zh: ZH_TEXT, call_mixed: MIXED, call_small: "short and whole\r\n" };

let stub;
before(async () => {
  stub = await startStub((req, body) => {
    if (req.url !== "/offload/read") return { body: {} };
    const id = body.tool_call_id;
    const whole = ORIGINALS[id];
    if (whole === undefined) return { status: 404, body: { error: "not found" } };
    const points = [...whole];
    const offset = body.offset ?? 0;
    const end = body.length === undefined ? points.length : Math.min(points.length, offset + body.length);
    return {
      body: {
        kind: "tool_result",
        tool_call_id: id,
        content: points.slice(offset, end).join(""),
        encoding: "text",
        offset,
        end,
        total_chars: points.length,
        next_offset: end < points.length ? end : null,
      },
    };
  });
});
after(async () => {
  await stub.close();
});

const CONFIG = { models: { providers: { fake: { models: [{ id: "fake-1", contextWindow: 128000 }] } } } };

async function readTool({ offload = { enabled: true }, ctx = {} } = {}) {
  const api = await bridgeWith(configFor(stub.url, { offload: { readTimeoutMs: 5000, ...offload }, recall: { enabled: false }, capture: { enabled: false } }));
  return api.tool(READ_TOOL, { agentId: "main", sessionKey: "agent:main:rb", ...ctx });
}

/** Follow each page's last line, as a model would, and join the pages. */
async function readAll(tool, id) {
  const pages = [];
  let args = { tool_call_id: id };
  for (let n = 0; n < 200; n += 1) {
    const answer = await tool.execute(`r${n}`, args);
    const text = answer.content[0].text;
    const at = text.lastIndexOf(PAGE_MARK);
    if (at < 0) {
      pages.push(text);
      return pages;
    }
    pages.push(text.slice(0, at));
    const footer = text.slice(at);
    const next = footer.match(/next page: memory_tencentdb_offload_read (\{.*\})\]$/);
    if (!next) {
      assert.match(footer, /; last page\]$/);
      return pages;
    }
    args = JSON.parse(next[1]);
    assert.equal(args.tool_call_id, id);
  }
  throw new Error("no last page");
}

for (const [label, ctx, window] of [
  ["unknown window (16k)", {}, 16000],
  ["128k window", { config: CONFIG, activeModel: { provider: "fake", modelId: "fake-1" } }, 128000],
]) {
  test(`pages join to the original byte for byte and each fits OpenClaw's limits: ${label}`, async () => {
    const own = await openclawOwn();
    const limits = toolResultLimits(window);
    const tool = await readTool({ ctx });
    assert.equal(tool.catalogMode, "direct-only", "outside Tool Search's catalog: in the model's tool list");
    for (const [id, original] of Object.entries(ORIGINALS)) {
      const pages = await readAll(tool, id);
      assert.equal(Buffer.from(pages.join(""), "utf8").compare(Buffer.from(original, "utf8")), 0, id);
      if (id === "call_small") assert.equal(pages.length, 1);
      for (let k = 0; k < pages.length; k += 1) {
        // The whole answer (page and footer) is what OpenClaw measures.
        const answer = (await tool.execute("m", { tool_call_id: id, offset: [...pages.slice(0, k).join("")].length })).content[0].text;
        const units = (text, r) => (own ? own.units(text, r) : unitsOfText(text, r));
        assert.ok(units(answer, 1) <= limits.live, `${id} page ${k}: ${units(answer, 1)} > ${limits.live}`);
        assert.ok(units(answer, 2) <= limits.guard, `${id} page ${k}: ${units(answer, 2)} > ${limits.guard}`);
      }
    }
  });
}

test("once a state dir offloaded, the read tool stays registered with offload off, and reads what it offloaded", async () => {
  const stateDir = tempDir("oc-marker-");
  const plain = { recall: { enabled: false }, capture: { enabled: false } };
  const never = await bridgeWith(configFor(stub.url, plain), { stateDir });
  assert.ok(!never.tools.has(READ_TOOL), "a state dir that never offloaded: tools as before");
  await bridgeWith(configFor(stub.url, { ...plain, offload: { enabled: true } }), { stateDir });
  const later = await bridgeWith(configFor(stub.url, { ...plain, offload: { enabled: false } }), { stateDir });
  const tool = later.tool(READ_TOOL, { agentId: "main", sessionKey: "agent:main:rb" });
  assert.equal(tool.name, READ_TOOL);
  assert.equal(tool.catalogMode, "direct-only");
  const pages = await readAll(tool, "call_zh");
  assert.equal(pages.join(""), ZH_TEXT);
  assert.match((await tool.execute("x", { tool_call_id: "nope" })).content[0].text, /Nothing stored under tool_call_id "nope"/);
  assert.match((await tool.execute("x", { tool_call_id: "call_en", offset: -3 })).content[0].text, /offset must be a whole number/);
});

test("forget refuses another tool's arguments, removes nothing, and points at the read tool", async () => {
  const seen = [];
  const gw = await startStub((req, body) => {
    seen.push(req.url);
    return { body: { forgotten: [], matched: [], candidates: [] } };
  });
  try {
    const api = await bridgeWith(configFor(gw.url, { recall: { enabled: false }, capture: { enabled: false } }));
    const forget = api.tool("memory_tencentdb_forget", { agentId: "main", sessionKey: "agent:main:rb" });
    const got = await forget.execute("f1", { tool_call_id: "call_1" });
    assert.match(got.content[0].text, /takes only query or ids, not tool_call_id; nothing was removed/);
    assert.match(got.content[0].text, /memory_tencentdb_offload_read/);
    const mixed = await forget.execute("f2", { query: "teal", tool_call_id: "call_1" });
    assert.match(mixed.content[0].text, /nothing was removed/);
    assert.ok(!seen.includes("/memories/forget"), "no forget call was made");
    await forget.execute("f3", { query: "teal" });
    assert.ok(seen.includes("/memories/forget"), "its own shape still works");
  } finally {
    await gw.close();
  }
});
