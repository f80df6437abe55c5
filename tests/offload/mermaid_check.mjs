// Validate Mermaid files with the real parser (npm `mermaid`), many files in one Node process.
//
//   node tests/offload/mermaid_check.mjs MERMAID_HOME FILE...
//   node tests/offload/mermaid_check.mjs MERMAID_HOME -        (file paths, one a line, on stdin)
//
// MERMAID_HOME is the directory scripts/test-hosts.d/validator-mermaid.sh installed into (it
// holds node_modules/mermaid and node_modules/jsdom). Prints one JSON object a line per file:
//   {"file": path, "ok": bool, "diagramType": string|null, "error": string|null}
// `ok` means mermaid.parse accepted the whole file as written AND it is a flowchart.
// Exit status: 0 if every file is ok, 1 if any is not, 2 if the validator itself cannot run.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [home, ...rest] = process.argv.slice(2);
if (!home) {
  console.error("usage: mermaid_check.mjs MERMAID_HOME FILE... | -");
  process.exit(2);
}

let mermaid;
try {
  // mermaid's DOMPurify hooks need a window at import time; without one, valid input fails
  // with "DOMPurify.addHook is not a function".
  const { JSDOM } = createRequire(join(home, "package.json"))("jsdom");
  const dom = new JSDOM("<!doctype html><html><body></body></html>");
  globalThis.window = dom.window;
  globalThis.document = dom.window.document;
  const entry = join(home, "node_modules", "mermaid", "dist", "mermaid.core.mjs");
  mermaid = (await import(pathToFileURL(entry).href)).default;
  mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
} catch (e) {
  console.error(`mermaid validator unavailable: ${e && e.stack ? e.stack : e}`);
  process.exit(2);
}

let files = rest;
if (rest.length === 1 && rest[0] === "-") {
  files = readFileSync(0, "utf8").split("\n").filter((l) => l.trim() !== "");
}

let bad = 0;
for (const file of files) {
  let out;
  try {
    const text = readFileSync(file, "utf8");
    const res = await mermaid.parse(text);
    const type = res && res.diagramType ? res.diagramType : null;
    const isFlowchart = typeof type === "string" && type.startsWith("flowchart");
    out = {
      file,
      ok: isFlowchart,
      diagramType: type,
      error: isFlowchart ? null : `not a flowchart (diagramType ${type})`,
    };
  } catch (e) {
    out = { file, ok: false, diagramType: null, error: String((e && e.message) || e) };
  }
  if (!out.ok) bad += 1;
  process.stdout.write(JSON.stringify(out) + "\n");
}
process.exit(bad ? 1 : 0);
