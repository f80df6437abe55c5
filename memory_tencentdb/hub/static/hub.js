// Memory Hub: plain JavaScript, no build step, nothing loaded from the network.
// Every text from the store is put in the page with textContent (never parsed as HTML); the only
// markup inserted as such is Mermaid's own SVG, rendered with securityLevel "strict".
"use strict";

const S = { csrf: null, scope: null, scopes: [], principal: null, mermaid: null, view: "pyramid" };
const $ = (id) => document.getElementById(id);

// h("div", {class: "x", onclick: f}, child, "text", ...): an element, children as nodes or text.
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}
const put = (el, ...kids) => { el.replaceChildren(); for (const k of kids.flat()) if (k) el.append(k instanceof Node ? k : document.createTextNode(String(k))); return el; };

function toast(text) {
  const t = $("toast"); t.textContent = text; t.classList.add("show");
  clearTimeout(toast.timer); toast.timer = setTimeout(() => t.classList.remove("show"), 3500);
}

class ApiError extends Error { constructor(status, message) { super(message); this.status = status; } }

// Every call: same origin, the session cookie, and on anything but GET the CSRF token.
async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && S.csrf) headers["X-CSRF-Token"] = S.csrf;
  const r = await fetch(path, { method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await r.json(); } catch { data = { error: r.statusText }; }
  if (r.status === 401) showLogin();
  if (!r.ok) throw new ApiError(r.status, (data && data.error) || `HTTP ${r.status}`);
  return data;
}
const q = (params) => "?" + new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "")).toString();
const scopeQ = (extra) => q({ scope: S.scope, ...(extra || {}) });
const fmtTime = (v) => (v ? String(v).replace("T", " ").replace(/\.\d+Z?$|Z$/, "") : "");
const short = (text, n) => (text.length > n ? text.slice(0, n - 1) + "…" : text);

// ------------------------------------------------------------------ login

function showLogin() {
  $("login").hidden = false;
  for (const v of document.querySelectorAll(".view")) v.hidden = true;
  $("logout").hidden = true;
}

async function login(body) {
  const r = await fetch("/hub/api/login", { method: "POST", headers: { "Content-Type": "application/json" }, credentials: "same-origin", body: JSON.stringify(body) });
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
  return data;
}

async function start() {
  const m = /^#login=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (m) {
    history.replaceState(null, "", location.pathname); // the token leaves the address bar at once
    try { S.csrf = (await login({ token: m[1] })).csrf; } catch (e) { showLogin(); put($("login-error"), e.message); return; }
  }
  // Who we are, the scopes, and the last scope's pyramid, asked for at once (at 100k memories
  // each takes a few hundred ms; one after the other they added up).
  const remembered = localStorage.getItem("hub.scope");
  S.prefetch = remembered ? { scope: remembered, answer: api("GET", "/hub/api/pyramid" + q({ scope: remembered })).catch(() => null) } : null;
  let me, scopes;
  try { [me, scopes] = await Promise.all([api("GET", "/hub/api/me"), api("GET", "/scopes")]); } catch (e) { if (e.status !== 401) put($("login-error"), e.message); showLogin(); return; }
  S.csrf = me.csrf || S.csrf;
  S.principal = me.principal;
  put($("who"), `${me.principal}${me.owner ? " (owner)" : ""}`);
  $("login").hidden = true;
  $("logout").hidden = me.auth === "off";
  S.scopes = scopes.scopes;
  const sel = put($("scope"), S.scopes.map((s) => h("option", { value: s.scope }, `${s.scope} (${s.memories}) ${s.access === "read" ? "· read-only" : ""}`)));
  S.scope = S.scopes.some((s) => s.scope === remembered) ? remembered : (S.scopes[0] || {}).scope || "default";
  sel.value = S.scope;
  show(S.view);
}

function writable() { const s = S.scopes.find((x) => x.scope === S.scope); return !s || s.access === "write"; }

function show(view) {
  S.view = view;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("on", b.dataset.view === view);
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== `view-${view}`;
  const load = { pyramid: loadPyramid, search: () => {}, recall: () => {}, offload: loadOffload, health: loadHealth, teams: loadTeams }[view];
  Promise.resolve(load()).catch((e) => toast(e.message));
}

// ------------------------------------------------------------------ pyramid

async function loadPyramid() {
  const early = S.prefetch && S.prefetch.scope === S.scope ? await S.prefetch.answer : null;
  S.prefetch = null;
  const p = early || (await api("GET", "/hub/api/pyramid" + scopeQ()));
  const types = p.memories.by_type.map((t) => `${t.type} ${t.count}`).join(" · ") || "none";
  const box = put($("pyramid"),
    h("button", { class: "l3", "data-layer": "persona", onclick: () => layerPersona(p) }, `L3 persona · ${p.persona.persona ? "1" : "0"}`),
    h("button", { class: "l2", "data-layer": "scenes", onclick: () => layerScenes(p) }, `L2 scenes · ${p.scenes.length}`),
    h("button", { class: "l1", "data-layer": "memories", onclick: () => layerMemories(p) }, `L1 memories · ${p.memories.total} (${types})`),
    h("button", { class: "l0", "data-layer": "conversations", onclick: () => layerConversations(p) }, `L0 conversations · ${p.conversations.sessions} sessions, ${p.conversations.messages} messages`),
  );
  box.dataset.scope = p.scope;
  layerPersona(p);
}

function selectLayer(name) { for (const b of $("pyramid").children) b.classList.toggle("sel", b.dataset.layer === name); }

function layerPersona(p) {
  selectLayer("persona");
  const text = p.persona.persona;
  put($("layer"), h("h3", {}, "Persona (L3)"), text ? h("pre", { id: "persona-text" }, text) : h("p", { class: "mut" }, "No persona yet."),
    p.persona.updated_at ? h("p", { class: "mut" }, `updated ${fmtTime(p.persona.updated_at)}`) : null,
    h("h4", {}, "Built from these scenes"), sceneList(p));
}

function sceneList(p) {
  if (!p.scenes.length) return h("p", { class: "mut" }, "No scenes yet.");
  return h("ul", { class: "items", id: "scene-list" }, p.scenes.map((s) => h("li", { "data-scene": s.filename, onclick: () => openScene(s.filename) },
    h("span", { class: "tag" }, `heat ${s.heat}`), h("span", {}, s.filename.replace(/\.md$/, ""), h("br"), h("span", { class: "mut" }, `${short(s.summary || "", 120)} · updated ${fmtTime(s.updated)}`)))));
}

function layerScenes(p) { selectLayer("scenes"); put($("layer"), h("h3", {}, "Scenes (L2), hottest first"), sceneList(p)); }

async function openScene(filename) {
  const s = await api("GET", "/hub/api/scene" + scopeQ({ filename }));
  const name = filename.replace(/\.md$/, "");
  const list = h("ul", { class: "items memory-list", id: "scene-memories" }, s.memories.map((m) => memoryItem(m, false)));
  put($("detail"), h("h3", {}, `Scene: ${name}`), h("p", { class: "mut" }, `heat ${s.heat} · updated ${fmtTime(s.updated)}`), h("pre", {}, s.content),
    h("h4", {}, `Memories folded into this scene · ${s.memories.length} (click one for its raw messages)`), list);
}

function layerMemories(p) {
  selectLayer("memories");
  const list = h("div");
  const filter = {};
  const levels = [...new Set(p.memories.by_type.flatMap((t) => Object.keys(t.priorities).map(Number)))].sort((a, b) => b - a);
  const prioSel = h("select", { id: "min-priority", "aria-label": "priority at least", onchange: (e) => { filter.min_priority = e.target.value; memoryPages(list, { ...filter }, true); } },
    h("option", { value: "" }, "any priority"), levels.map((v) => h("option", { value: String(v) }, `priority ≥ ${v}`)));
  const chips = p.memories.by_type.map((t) => h("button", { onclick: () => { filter.type = t.type; memoryPages(list, { ...filter }, true); } }, `${t.type} ${t.count}`));
  const prio = p.memories.by_type.map((t) => h("div", { class: "mut" }, `${t.type}: ` + Object.entries(t.priorities).sort((a, b) => b[0] - a[0]).map(([k, v]) => `priority ${k}: ${v}`).join(", ")));
  put($("layer"), h("h3", {}, `Memories (L1) · ${p.memories.total}`), h("div", { class: "filters" }, h("button", { onclick: () => { delete filter.type; memoryPages(list, { ...filter }, true); } }, "all types"), chips, prioSel), prio, list);
  memoryPages(list, {}, true);
}

// One page at a time (50), "more" fetches the next by cursor: never everything at once.
async function memoryPages(box, filter, selectable) {
  put(box);
  const ul = h("ul", { class: "items memory-list" });
  const tools = h("div", { class: "filters" });
  if (selectable && writable()) tools.append(h("button", { class: "danger", id: "forget-selected", onclick: () => forgetIds([...ul.querySelectorAll("input:checked")].map((c) => c.value)) }, "Forget selected…"));
  box.append(tools, ul);
  let cursor = null;
  const more = h("button", { onclick: () => page() }, "more");
  box.append(more);
  async function page() {
    const r = await api("GET", "/hub/api/memories" + scopeQ({ ...filter, cursor }));
    for (const m of r.items) ul.append(memoryItem(m, selectable));
    cursor = r.next_cursor;
    more.hidden = !cursor;
    if (!ul.children.length) ul.append(h("li", { class: "mut" }, "nothing here"));
  }
  await page();
}

function memoryItem(m, selectable) {
  const li = h("li", { "data-id": m.id, onclick: (e) => { if (e.target.tagName !== "INPUT") openMemory(m.id); } },
    selectable && writable() ? h("input", { type: "checkbox", value: m.id, "aria-label": "select" }) : null,
    h("span", { class: "tag" }, m.type), h("span", { class: "tag" }, `p${m.priority}`),
    h("span", {}, short(m.content, 160), h("br"), h("span", { class: "mut" }, `${m.scene_name || ""} ${fmtTime(m.updated_at)}`)));
  return li;
}

async function openMemory(id, target) {
  const box = target || $("detail");
  const m = await api("GET", `/memories/${encodeURIComponent(id)}` + scopeQ());
  const content = h("pre", { id: "memory-content" }, m.content);
  const actions = h("div", { class: "filters" });
  if (writable()) {
    actions.append(
      h("button", { id: "edit", onclick: () => editMemory(m, box) }, "Edit"),
      h("button", { class: "danger", id: "forget", onclick: () => forgetIds([m.id]) }, "Forget…"));
  }
  const sources = m.trace.source_messages;
  const history = m.trace.history || [];
  put(box,
    h("h3", {}, "Memory"), h("div", { class: "kv" },
      h("span", { class: "mut" }, "id"), h("span", {}, m.id), h("span", { class: "mut" }, "type"), h("span", {}, m.type),
      h("span", { class: "mut" }, "priority"), h("span", {}, m.priority), h("span", { class: "mut" }, "scene"), h("span", {}, m.scene_name || "–"),
      h("span", { class: "mut" }, "session"), h("span", {}, m.session_key || "–"), h("span", { class: "mut" }, "updated"), h("span", {}, fmtTime(m.updated_at))),
    content, actions,
    h("h4", {}, `Raw messages it came from (L0) · ${sources.length}`),
    h("div", { id: "trace" }, sources.length ? sources.map((s) => h("div", { class: "msg" }, h("div", { class: "role" }, `${s.role} · ${s.session_key}`), h("div", {}, s.content))) : h("p", { class: "mut" }, "written directly (no source messages)")),
    h("h4", {}, `History · ${history.length}`),
    h("ul", { class: "items", id: "history" }, history.map((v) => h("li", { "data-version": v.id },
      h("span", { class: "tag" }, v.status), h("span", {}, v.content, h("br"), h("span", { class: "mut" }, `${v.id} · ${fmtTime(v.updated_at)}`)),
      writable() && v.content !== m.content ? h("button", { class: "restore", onclick: (e) => { e.stopPropagation(); restore(m, v); } }, "Restore") : null))));
}

function editMemory(m, box) {
  const area = h("textarea", { id: "edit-text" }, m.content);
  const form = h("div", {}, area, h("div", { class: "filters" },
    h("button", { class: "primary", id: "save", onclick: async () => {
      try {
        await api("PATCH", `/memories/${encodeURIComponent(m.id)}`, { content: area.value, scope: S.scope });
        toast("saved; the old text is kept in the history");
        await openMemory(m.id, box);
      } catch (e) { toast(e.message); }
    } }, "Save"), h("button", { onclick: () => openMemory(m.id, box) }, "Cancel")));
  box.querySelector("#memory-content").replaceWith(form);
}

async function restore(m, version) {
  await api("PATCH", `/memories/${encodeURIComponent(m.id)}`, { content: version.content, scope: S.scope });
  toast(`restored the text of ${version.id}`);
  await openMemory(m.id);
}

async function confirmDialog(title, body) {
  put($("confirm-title"), title); put($("confirm-body"), body);
  const d = $("confirm");
  d.showModal();
  return new Promise((resolve) => d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true }));
}

// Forget: what will be removed is shown first (a dry run), then forgotten on confirmation.
async function forgetIds(ids) {
  if (!ids.length) { toast("select memories first"); return; }
  const preview = await api("POST", "/memories/forget", { ids, scope: S.scope, dry_run: true });
  const ok = await confirmDialog(`Forget ${preview.matched.length} memor${preview.matched.length === 1 ? "y" : "ies"}?`,
    h("div", {}, h("p", {}, "These leave recall and search at once, with their older versions:"),
      h("ul", { id: "forget-preview" }, preview.matched.map((m) => h("li", {}, `[${m.type}] ${m.content}`)))));
  if (!ok) return;
  const done = await api("POST", "/memories/forget", { ids, scope: S.scope, dry_run: false });
  toast(`forgot ${done.forgotten.length}`);
  put($("detail"), h("p", { id: "forgotten" }, `Forgotten: ${done.forgotten.join(", ")}`));
  if (S.view === "pyramid") await loadPyramid(); // the counts change
}

async function layerConversations(p, offset = 0) {
  selectLayer("conversations");
  const r = await api("GET", "/hub/api/conversations" + scopeQ({ offset, limit: 50 }));
  const nav = h("div", { class: "filters" },
    offset > 0 ? h("button", { onclick: () => layerConversations(p, Math.max(0, offset - 50)) }, "newer") : null,
    offset + 50 < r.total ? h("button", { onclick: () => layerConversations(p, offset + 50) }, "older") : null);
  put($("layer"), h("h3", {}, `Conversations (L0) · ${r.total} sessions`),
    h("ul", { class: "items", id: "session-list" }, r.sessions.map((s) => h("li", { onclick: () => openSession(s.session_key) },
      h("span", { class: "tag" }, `${s.messages} msgs`), h("span", {}, s.session_key, h("br"), h("span", { class: "mut" }, `${fmtTime(s.first)} – ${fmtTime(s.last)}`))))), nav);
}

async function openSession(key, after, box) {
  const target = box || put($("detail"), h("h3", {}, `Session ${key}`));
  const r = await api("GET", "/hub/api/conversations/messages" + scopeQ({ session_key: key, after }));
  for (const m of r.messages) target.append(h("div", { class: "msg" }, h("div", { class: "role" }, `${m.role}${m.speaker ? " · " + m.speaker : ""} · ${fmtTime(m.recorded_at)}`), h("div", {}, m.content)));
  if (r.next_after) { const b = h("button", { onclick: () => { b.remove(); openSession(key, r.next_after, target); } }, "more"); target.append(b); }
}

// ------------------------------------------------------------------ search

async function runSearch(ev) {
  ev.preventDefault();
  const body = { query: $("search-q").value, scope: S.scope, kind: $("search-kind").value, limit: 20 };
  for (const [k, id] of [["type", "search-type"], ["since", "search-since"], ["until", "search-until"], ["session_key", "search-session"]]) if ($(id).value.trim()) body[k] = $(id).value.trim();
  if (body.kind === "conversations") delete body.type;
  const out = $("search-results");
  try {
    const t0 = performance.now();
    const r = await api("POST", "/hub/api/search", body);
    const ms = Math.round(performance.now() - t0);
    put(out, h("p", { class: "mut", id: "search-meta" }, `${r.items.length} results · ${r.strategy || ""} · ${ms} ms`),
      h("ul", { class: "items", id: "search-list" }, r.items.map((it) => body.kind === "memories"
        ? h("li", { "data-id": it.id, onclick: () => openMemory(it.id, $("search-detail")) }, h("span", { class: "tag" }, it.type), h("span", { class: "tag" }, Number(it.score).toFixed(3)), h("span", {}, it.content, h("br"), h("span", { class: "mut" }, `${it.scope || S.scope} · ${fmtTime(it.updated_at)}`)))
        : h("li", { onclick: () => openSession(it.session_key, undefined, put($("search-detail"), h("h3", {}, `Session ${it.session_key}`))) }, h("span", { class: "tag" }, it.role), h("span", {}, it.content, h("br"), h("span", { class: "mut" }, `${it.session_key} · ${fmtTime(it.recorded_at)}`))))));
    document.body.dataset.searchMs = String(ms);
  } catch (e) { put(out, h("p", { class: "error" }, e.message)); }
}

// ------------------------------------------------------------------ recall explained

async function runRecall(ev) {
  ev.preventDefault();
  const out = put($("recall-out"), h("p", { class: "mut" }, "recalling…"));
  const r = await api("POST", "/hub/api/recall-explain", { query: $("recall-q").value, scope: S.scope });
  const a = r.answer;
  const zone = (title, id, text, tokens, chars) => h("div", { class: "zone panel" }, h("h4", {}, `${title} · ${tokens} tokens, ${chars} characters`),
    text ? h("pre", { id }, text) : h("p", { class: "mut", id }, "(empty)"));
  put(out,
    h("p", { id: "recall-verdict", class: a.memories.length ? "" : "mut" }, a.memories.length
      ? `${a.memories.length} memor${a.memories.length === 1 ? "y" : "ies"} injected (strategy ${a.strategy})`
      : `nothing injected (strategy ${a.strategy})${a.relevance && a.relevance.note ? ": " + a.relevance.note : ""}`),
    h("div", { class: "columns" },
      zone("Per turn: prepend_context (before the user's message)", "recall-prepend", a.prepend_context, r.tokens.prepend_context, r.chars.prepend_context),
      zone("Stable: append_system_context (system prompt)", "recall-system", a.append_system_context, r.tokens.append_system_context, r.chars.append_system_context)),
    h("p", { class: "mut" }, `tokenizer ${r.tokens.tokenizer}; thresholds: relevance ${r.thresholds.floor_z} (world questions: log-odds over ${r.thresholds.world_max}, then ${r.thresholds.world_floor_z} and a shared word), rare-word coverage ${r.thresholds.coverage * 100}% (a fact question about the world: all of them), at most ${r.thresholds.max_results}`),
    r.scopes.map((sc) => h("div", {}, h("h4", {}, `Candidates in ${sc.scope}: ${sc.considered} considered${sc.world_question != null ? ` · world question ${sc.world_question}` : ""}`),
      h("div", { class: "candidates" }, sc.candidates.map((c) => h("div", { class: "cand", "data-verdict": c.verdict, "data-id": c.id },
        h("span", { class: `tag ${c.verdict}` }, c.verdict.replace("_", " ")), " ", h("span", {}, c.content),
        h("div", { class: "mut" }, `${c.why} · rank ${c.rank} (fused ${c.fused_rank}), score ${c.score}, relevance ${c.relevance ?? "n/a"}, best ${c.relevance_best ?? "n/a"}, coverage ${c.coverage ?? 0}, model rank ${c.model_rank ?? "–"}`)))))));
}

// ------------------------------------------------------------------ offload

async function loadMermaid() {
  if (S.mermaid) return S.mermaid;
  await new Promise((resolve, reject) => {
    const s = h("script", { src: "/hub/static/vendor/mermaid.min.js" });
    s.onload = resolve; s.onerror = () => reject(new Error("could not load Mermaid"));
    document.head.append(s);
  });
  window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral", flowchart: { htmlLabels: false } });
  S.mermaid = window.mermaid;
  return S.mermaid;
}

async function loadOffload() {
  const r = await api("GET", "/hub/api/offload/sessions" + scopeQ());
  const box = $("offload-sessions");
  if (!r.sessions.length) { put(box, h("p", { class: "mut" }, "No offload sessions in this scope.")); put($("offload-chart")); return; }
  put(box, h("ul", { class: "items", id: "offload-list" }, r.sessions.map((s) => h("li", {},
    h("span", {}, h("b", {}, s.session_key), h("br"), h("span", { class: "mut" }, `${s.tool_results} tool results, ${s.stubbed} stubbed, ${s.removed} removed`), h("br"),
      s.canvases.map((c) => h("button", { class: "canvas-link", "data-canvas": c, onclick: () => openCanvas(c, s.session_key) }, c)))))));
  put($("offload-chart"), tokenChart(r.sessions), h("p", { class: "mut" }, `tokenizer ${r.tokenizer}`));
}

// Inline SVG: per session, verbatim tokens (grey) behind the tokens sent (blue).
function tokenChart(sessions) {
  const ns = "http://www.w3.org/2000/svg";
  const max = Math.max(1, ...sessions.map((s) => s.tokens_verbatim));
  const rowH = 26, w = 420, label = 150;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w + label + 90} ${sessions.length * rowH + 10}`);
  svg.setAttribute("width", "100%"); svg.setAttribute("id", "token-chart"); svg.setAttribute("role", "img");
  sessions.forEach((s, i) => {
    const y = i * rowH + 4;
    const el = (tag, attrs, text) => { const e = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); if (text) e.textContent = text; svg.append(e); return e; };
    el("text", { x: 0, y: y + 14, "font-size": 11 }, short(s.session_key, 22));
    el("rect", { x: label, y, width: (w * s.tokens_verbatim) / max, height: 9, class: "bar-verb" });
    el("rect", { x: label, y: y + 10, width: (w * s.tokens_sent) / max, height: 9, class: "bar-sent" });
    el("text", { x: label + w + 6, y: y + 14, "font-size": 11 }, `${s.tokens_sent} / ${s.tokens_verbatim}`);
  });
  return svg;
}

async function openCanvas(name, sessionKey) {
  const c = await api("POST", "/offload/read", { canvas: name, session_key: sessionKey, scope: S.scope });
  const mm = await loadMermaid();
  const box = put($("offload-canvas"), h("h3", {}, `Canvas ${c.canvas}`), h("p", { class: "mut" }, c.meta && c.meta.task_goal ? `goal: ${c.meta.task_goal}` : ""));
  const holder = h("div", { id: "canvas-svg" });
  box.append(holder);
  const { svg } = await mm.render(`cv${Date.now()}`, c.text);
  holder.innerHTML = svg; // Mermaid's own output, sanitised by it (securityLevel strict)
  for (const node of holder.querySelectorAll("g.node")) {
    const m = /(\d{3,}-N\d+)/.exec(node.id || "");
    if (!m) continue;
    node.dataset.nodeId = m[1];
    node.addEventListener("click", () => openNode(m[1], sessionKey));
  }
  put($("offload-node"), h("p", { class: "mut" }, "Click a node to see its summary row and the raw tool result."));
}

async function openNode(nodeId, sessionKey) {
  const n = await api("POST", "/offload/read", { node_id: nodeId, session_key: sessionKey, scope: S.scope });
  const box = put($("offload-node"), h("h4", {}, `Node ${nodeId}`));
  for (const row of n.rows) {
    box.append(h("table", { class: "node-row" }, ["tool_name", "tool_call", "summary", "tokens", "offloaded", "timestamp", "result_ref"].map((k) => h("tr", {}, h("th", {}, k), h("td", {}, String(row[k] ?? ""))))));
    const raw = await api("POST", "/offload/read", { tool_call_id: row.tool_call_id, session_key: sessionKey, scope: S.scope });
    box.append(h("h4", {}, "Raw result"), h("pre", { id: "node-raw" }, raw.content));
  }
  if (!n.rows.length) box.append(h("p", { class: "mut" }, "no rows for this node"));
}

// ------------------------------------------------------------------ health and teams

async function loadHealth() {
  const r = await api("GET", "/health");
  const emb = r.embedding || {};
  const backlog = Object.entries(emb.backlog || {}).map(([m, b]) => `${m}: ${b.l1 || 0} memories, ${b.l0 || 0} messages without a vector${b.rate_per_s ? `, ${b.rate_per_s}/s` : ""}`);
  const pipe = r.pipeline || {};
  const kv = (pairs) => h("div", { class: "kv" }, pairs.flatMap(([k, v]) => [h("span", { class: "mut" }, k), h("span", {}, v)]));
  put($("health-out"),
    h("h3", { id: "health-status" }, `Status: ${r.status}${r.draining ? " (draining)" : ""}`),
    r.degraded.length ? h("ul", { id: "degraded" }, r.degraded.map((d) => h("li", { class: "error" }, d))) : h("p", {}, "Nothing degraded."),
    kv([
      ["store", `${(r.store || {}).backend || "?"}${(r.store || {}).server ? " · " + r.store.server : ""}`],
      ["vector index", JSON.stringify(r.vector_index)],
      ["embedding", `${emb.provider || "?"} ${(emb.models || []).join(", ")} [${emb.state}]`],
      ["embedding backlog", backlog.join("; ") || "none"],
      ["LLM", (r.llm || {}).configured ? "configured" : "not configured"],
      ["pipeline queue", JSON.stringify(pipe.backlog ?? {})],
      ["counts", JSON.stringify(r.counts)],
      ["version", `${r.version} · auth ${r.auth} · up ${Math.round(r.uptime || 0)} s`],
    ]));
}

async function loadTeams() {
  const r = await api("GET", "/hub/api/teams");
  put($("teams-out"), h("h3", {}, "Team scopes (read-only, from keys.json)"),
    r.teams.length ? h("table", { id: "teams-table" }, h("tr", {}, h("th", {}, "scope"), h("th", {}, "writers"), h("th", {}, "readers"), h("th", {}, "you")),
      r.teams.map((t) => h("tr", {}, h("td", {}, t.scope), h("td", {}, t.writers.join(", ")), h("td", {}, t.readers.join(", ")), h("td", {}, t.access))))
      : h("p", { class: "mut" }, "No team scopes you may read."),
    h("p", { class: "mut" }, r.source ? `from ${r.source}` : "no keys file"));
}

// ------------------------------------------------------------------ wiring

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => show(b.dataset.view));
  $("scope").addEventListener("change", (e) => { S.scope = e.target.value; localStorage.setItem("hub.scope", S.scope); put($("detail")); show(S.view); });
  $("search-form").addEventListener("submit", runSearch);
  $("recall-form").addEventListener("submit", (e) => runRecall(e).catch((err) => put($("recall-out"), h("p", { class: "error" }, err.message))));
  $("login-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try { S.csrf = (await login({ key: $("login-key").value })).csrf; $("login-key").value = ""; put($("login-error")); await start(); }
    catch (err) { put($("login-error"), err.message); }
  });
  $("logout").addEventListener("click", async () => { await api("POST", "/hub/api/logout", {}).catch(() => {}); S.csrf = null; showLogin(); });
  start().catch((e) => toast(e.message));
});
