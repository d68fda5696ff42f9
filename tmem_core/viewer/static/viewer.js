// The results viewer: one page, routed by the URL's hash. Data comes from the local server's
// JSON API, or from the JSON embedded in a self-contained export (no server, no network).
"use strict";

const PAGE_SIZE = 50;
const EMBEDDED = (() => {
  const el = document.getElementById("viewer-data");
  return el ? JSON.parse(el.textContent) : null;
})();
const enc = encodeURIComponent;

// ---- data -------------------------------------------------------------------------------
async function getJSON(path) {
  const response = await fetch(path);
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status} ${await response.text()}`);
  return response.json();
}

const api = {
  sweep: () => (EMBEDDED ? EMBEDDED.sweep : getJSON("api/sweep")),
  run: (id) => (EMBEDDED ? EMBEDDED.runs[id] ?? null : getJSON(`api/runs/${enc(id)}`)),
  question: (run, qid) => (EMBEDDED ? EMBEDDED.questions[run]?.[qid] ?? null
    : getJSON(`api/runs/${enc(run)}/questions/${enc(qid)}`)),
};

// ---- DOM helpers ------------------------------------------------------------------------
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

const dash = "–";
const fixed = (x, digits) => (x === null || x === undefined ? dash : Number(x).toFixed(digits));
const pct = (x) => (x === null || x === undefined ? dash : `${(100 * x).toFixed(1)}%`);
const int = (x) => (x === null || x === undefined ? dash : Math.round(x).toLocaleString("en"));
const usd = (x) => (x === null || x === undefined ? dash : `$${Number(x).toFixed(4)}`);
const secs = (x) => (x === null || x === undefined ? dash : `${Number(x).toFixed(1)} s`);
const clip = (text, n) => (!text ? "" : text.length > n ? `${text.slice(0, n - 1)}…` : text);
const badge = (text, kind) => h("span", { class: `badge ${kind || text}` }, text);
// A figure and its 95% interval, `0.557 [0.521–0.593]` (the value alone when there is none).
const withCi = (x, ci, show) => (x === null || x === undefined ? dash
  : ci ? `${show(x)} [${show(ci[0])}–${show(ci[1])}]` : show(x));
const signedFixed = (x) => (x === null || x === undefined ? dash
  : `${x >= 0 ? "+" : "−"}${Math.abs(x).toFixed(3)}`);
// Recall: `not measurable` when no context could be traced to messages; `read` when the gold
// was looked for in what the method read, not in what it showed.
function recallText(r) {
  if (r.recall === null) return r.recall_untraceable ? "not measurable" : dash;
  const basis = r.recall_basis && r.recall_basis !== "shown" ? ` (${r.recall_basis})` : "";
  const some = r.recall_untraceable ? ` (${r.recall_untraceable} not measurable)` : "";
  return `${withCi(r.recall, r.recall_ci, pct)}${basis}${some}`;
}

function table(head, rows, attrs) {
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows));
}

function section(title, ...body) {
  return h("section", {}, h("h2", {}, title), body);
}

function crumbs(...items) {
  const links = [h("a", { href: "#/" }, "sweep"), ...items];
  return h("nav", { class: "crumbs" }, links.flatMap((x, i) => (i ? [" › ", x] : [x])));
}

const runHref = (id) => `#/run/${enc(id)}`;
const questionHref = (run, qid) => `#/q/${enc(run)}/${enc(qid)}`;
const compareHref = (a, b, qid) => `#/cmp/${enc(a)}/${enc(b)}${qid ? `/${enc(qid)}` : ""}`;

// ---- routing ----------------------------------------------------------------------------
function route() {
  const [path, query] = location.hash.slice(1).split("?");
  const parts = (path || "").split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(query || "") };
}

const PAGES = [
  [(p) => p[0] === "run" && p.length === 2, (p, q) => runPage(p[1], q)],
  [(p) => p[0] === "q" && p.length === 3, (p) => questionPage(p[1], p[2])],
  [(p) => p[0] === "cmp" && p.length === 3, (p, q) => comparePage(p[1], p[2], q)],
  [(p) => p[0] === "cmp" && p.length === 4, (p) => sideBySidePage(p[1], p[2], p[3])],
  [() => true, () => sweepPage()],
];

let refreshTimer = null;

// Draws the page the URL names; a refresh of the same page keeps the reader's place.
async function render(refresh) {
  clearTimeout(refreshTimer);
  const { parts, params } = route();
  const app = document.getElementById("app");
  try {
    const page = PAGES.find(([matches]) => matches(parts))[1];
    app.replaceChildren(await page(parts, params));
  } catch (error) {
    app.replaceChildren(h("p", { class: "error" }, `error: ${error.message}`));
  }
  if (!refresh) window.scrollTo(0, 0);
}

function setParams(params) {
  const { parts } = route();
  const path = parts.map(enc).join("/");
  history.replaceState(null, "", `#/${path}${params.toString() ? `?${params}` : ""}`);
}

// ---- sweep ------------------------------------------------------------------------------
async function sweepPage() {
  const sweep = await api.sweep();
  document.title = `sweep ${sweep.name}`;
  if (sweep.running && !EMBEDDED) refreshTimer = setTimeout(() => render(true), 5000);
  return h("div", { id: "sweep-page" },
    h("h1", {}, `Sweep ${sweep.name} `, sweep.running ? badge("running") : null),
    h("p", { class: "muted" }, sweep.root, sweep.running
      ? " · still running: showing what has landed (refreshes every 5 s)" : ""),
    section("Runs", runTable(sweep.runs), comparePicker(sweep.runs)),
    section("Figures", sweep.figures.length ? h("div", { class: "figures" },
      sweep.figures.map((f) => h("figure", {}, h("img", { src: f.src, alt: f.name }),
        h("figcaption", {}, f.name))))
      : h("p", { class: "muted" }, "No figures yet: python -m jobs.report draws them.")),
    section("Tables", sweep.tables.map(reportTable)));
}

function runTable(runs) {
  const head = ["run", "backbone", "questions", "judged / failed / stale / pending", "accuracy",
    "F1", "EM", "recall", "context tok", "tokens / q", "USD / q", "calibration tok / q", "wall",
    "errors"];
  return table(head, runs.map((r) => h("tr", {},
    h("td", {}, h("a", { href: runHref(r.run_id), class: "run-link" }, r.label),
      r.running ? [" ", badge("running")] : null, h("div", { class: "muted small" }, r.run_id)),
    h("td", {}, r.backbone),
    h("td", { class: "num" }, int(r.questions)),
    h("td", { class: "num" }, `${r.judged} / ${r.failed} / ${r.stale} / ${r.pending}`),
    h("td", { class: "num accuracy" }, pct(r.accuracy),
      r.accuracy_ci ? h("span", { class: "muted ci" }, ` [${pct(r.accuracy_ci[0])}–${pct(r.accuracy_ci[1])}]`) : null,
      r.unreliable_judges.length
        ? [" ", badge(`unreliable judge: ${r.unreliable_judges.join(", ")}`, "failed")] : null,
      r.uncalibrated.length
        ? [" ", h("span", { class: "muted small", title: r.uncalibrated.join(", ") },
          `${r.uncalibrated.length} judge × control kinds not calibrated`)] : null,
      Object.keys(r.degraded).length
        ? [" ", badge(`degraded: ${Object.entries(r.degraded).map(([k, v]) => `${k} ${v}`)
          .join(", ")}`, "failed")] : null),
    h("td", { class: "num" }, withCi(r.f1, r.f1_ci, (x) => fixed(x, 3))),
    h("td", { class: "num" }, withCi(r.exact_match, r.exact_match_ci, pct)),
    h("td", { class: "num recall" }, recallText(r)),
    h("td", { class: "num" }, int(r.context_tokens)),
    h("td", { class: "num" }, int(r.tokens_per_question)),
    h("td", { class: "num" }, usd(r.cost_per_question)),
    h("td", { class: "num" }, int(r.calibration_tokens_per_question)),
    h("td", { class: "num" }, secs(r.wall_s)),
    h("td", { class: "num" }, r.errors ? badge(`${r.errors}`, "failed") : "0",
      r.failed_attempts > r.errors
        ? h("span", { class: "muted" }, ` (${r.failed_attempts} attempts)`) : null))),
  { class: "runs" });
}

function comparePicker(runs, first) {
  if (runs.length < 2) return null;
  const pick = (name, selected) => h("select", { name },
    runs.map((r) => h("option", { value: r.run_id, selected: r.run_id === selected }, r.label)));
  const a = pick("a", first || runs[0].run_id);
  const b = pick("b", runs.find((r) => r.run_id !== (first || runs[0].run_id)).run_id);
  return h("p", { class: "picker" }, "Side by side: ", a, " vs ", b, " ",
    h("button", { onclick: () => { location.hash = compareHref(a.value, b.value); } },
      "compare"));
}

function reportTable(t) {
  const cell = (v) => (v === null ? dash : typeof v === "number" && !Number.isInteger(v)
    ? fixed(v, 4) : Array.isArray(v) ? v.join("; ") : String(v));
  return h("details", { class: "report-table" },
    h("summary", {}, `${t.name} (${t.rows.length} rows)`),
    table(t.columns, t.rows.map((row) => h("tr", {}, row.map((v) => h("td", {}, cell(v)))))));
}

// ---- run --------------------------------------------------------------------------------
const OUTCOMES = ["correct", "wrong", "failed", "stale", "pending"];
// The failure attribution's causes, in the report's order (results/README.md defines them).
const CAUSES = ["correct", "judging", "degraded", "unknown", "untraceable", "retrieval",
  "synthesis", "error", "stale", "pending"];

function matches(row, filter) {
  if (filter.category && row.category !== filter.category) return false;
  if (filter.outcome && row.outcome !== filter.outcome) return false;
  if (filter.cause && row.cause !== filter.cause) return false;
  if (filter.disagreement && !row.disagreement) return false;
  if (!filter.text) return true;
  const needle = filter.text.toLowerCase();
  return [row.qid, row.question, row.prediction, row.answer]
    .some((s) => s && s.toLowerCase().includes(needle));
}

// Filters of a list of questions, kept in the URL's query; `flags` are [name, label] checkboxes.
function filterControls(params, categories, onChange, flags) {
  const boxes = flags.map(([name, label]) => [name, label, h("input", { type: "checkbox", name,
    checked: params.get(name) === "1", onchange: () => changed() })]);
  const state = () => ({
    category: category.value, outcome: outcome.value, cause: cause.value,
    text: text.value.trim(), page: 0,
    ...Object.fromEntries(boxes.map(([name, , box]) => [name, box.checked])),
  });
  const changed = () => {
    const next = state();
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(next)) if (v && k !== "page") query.set(k, v === true ? "1" : v);
    setParams(query);
    onChange(next);
  };
  const category = h("select", { name: "category", onchange: changed },
    h("option", { value: "" }, "every category"),
    categories.map((c) => h("option", { value: c, selected: params.get("category") === c }, c)));
  const outcome = h("select", { name: "outcome", onchange: changed },
    h("option", { value: "" }, "every outcome"),
    OUTCOMES.map((o) => h("option", { value: o, selected: params.get("outcome") === o }, o)));
  const cause = h("select", { name: "cause", onchange: changed },
    h("option", { value: "" }, "every cause"),
    CAUSES.map((c) => h("option", { value: c, selected: params.get("cause") === c }, c)));
  const text = h("input", { type: "search", name: "text", placeholder: "search text…",
    value: params.get("text") || "", oninput: changed });
  const controls = h("div", { class: "filters" }, category, outcome, cause,
    boxes.map(([, label, box]) => h("label", {}, box, ` ${label}`)), text);
  return { controls, state };
}

function paged(rows, page, draw, onPage) {
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  const at = Math.min(page, pages - 1);
  const shown = rows.slice(at * PAGE_SIZE, (at + 1) * PAGE_SIZE);
  return h("div", {},
    h("p", { class: "pager" }, `${rows.length.toLocaleString("en")} questions · page ${at + 1} of ${pages} `,
      h("button", { disabled: at === 0, onclick: () => onPage(at - 1) }, "‹ prev"), " ",
      h("button", { disabled: at >= pages - 1, onclick: () => onPage(at + 1) }, "next ›")),
    draw(shown));
}

async function runPage(runId, params) {
  const [sweep, view] = await Promise.all([api.sweep(), api.run(runId)]);
  if (!view) return h("p", { class: "error" }, `error: no run ${runId} in this sweep`);
  const r = view.run;
  document.title = r.label;
  const body = h("div", {});
  const update = (filter) => {
    const rows = view.questions.filter((q) => matches(q, filter));
    body.replaceChildren(paged(rows, filter.page, (shown) => questionTable(runId, shown),
      (page) => update({ ...filter, page })));
  };
  const { controls, state } = filterControls(params, view.categories, update,
    [["disagreement", "judges disagree"]]);
  update(state());
  return h("div", { id: "run-page" }, crumbs(h("span", {}, r.label)),
    h("h1", {}, r.label, " ", r.running ? badge("running") : null),
    h("p", { class: "muted" }, `${r.run_id} · ${r.benchmark} · ${r.backbone} · top_k ${r.top_k}`
      + ` · budget ${r.budget} · judges ${r.judges}`),
    h("p", { class: "stats" }, `accuracy ${withCi(r.accuracy, r.accuracy_ci, pct)} · F1 `
      + `${withCi(r.f1, r.f1_ci, (x) => fixed(x, 3))} · EM ${withCi(r.exact_match, r.exact_match_ci, pct)}`
      + ` · recall ${recallText(r)} · ${int(r.context_tokens)} context `
      + `tokens · ${int(r.tokens_per_question)} tokens / question · `
      + `${int(r.calibration_tokens_per_question)} calibration tokens / question · ${r.errors} errors`),
    attributionLine(r), goldContextLine(r),
    comparePicker(sweep.runs, runId), controls, body);
}

// The run's questions per cause; each count filters the list to that cause.
function attributionLine(r) {
  const judged = CAUSES.slice(0, -2).reduce((n, c) => n + (r.causes[c] || 0), 0);
  return h("p", { class: "attribution" }, "causes: ", CAUSES.filter((c) => r.causes[c]).map((c, i) => [
    i ? " · " : "", h("a", { href: `${runHref(r.run_id)}?cause=${c}`, "data-cause": c },
      `${c} ${r.causes[c]}`), c === "error" || c === "pending" || !judged ? ""
      : h("span", { class: "muted" }, ` (${pct(r.causes[c] / judged)})`)]));
}

function goldContextLine(r) {
  if (!r.gold_context.length) return null;
  const part = (g) => `P(correct | gold ${g.in_context ? "" : "not "}${g.basis === "read" ? "read" : "in context"}) `
    + `${withCi(g.p_correct, g.ci, pct)} (${g.correct}/${g.questions})`;
  return h("p", { class: "gold-context muted" }, r.gold_context.map(part).join(" · "));
}

function questionTable(runId, rows) {
  return table(["question", "category", "outcome", "cause", "score", "prediction", "gold answer",
    "context tok", "LLM tok", "calibration tok"], rows.map((q) => h("tr", {},
    h("td", {}, h("a", { href: questionHref(runId, q.qid), class: "question-link" }, q.qid),
      h("div", { class: "small" }, clip(q.question, 140))),
    h("td", {}, q.category),
    h("td", {}, badge(q.outcome), q.disagreement ? [" ", badge("judges disagree", "warn")] : null),
    h("td", { class: "cause" }, q.cause),
    h("td", { class: "num" }, fixed(q.score, 2)),
    h("td", { class: "small" }, q.error ? h("span", { class: "error" }, clip(q.error, 120))
      : clip(q.prediction, 120)),
    h("td", { class: "small" }, clip(q.answer, 80)),
    h("td", { class: "num" }, int(q.context_tokens)),
    h("td", { class: "num" }, int(q.llm_tokens)),
    h("td", { class: "num" }, int(q.calibration_tokens)))), { class: "questions" });
}

// ---- question ---------------------------------------------------------------------------
async function questionPage(runId, qid) {
  const [sweep, q] = await Promise.all([api.sweep(), api.question(runId, qid)]);
  if (!q) return h("p", { class: "error" }, `error: no question ${qid} in run ${runId}`);
  document.title = `${qid} · ${q.run_label}`;
  const others = sweep.runs.filter((r) => r.run_id !== runId);
  const pick = h("select", { name: "other" },
    others.map((r) => h("option", { value: r.run_id }, r.label)));
  return h("div", { id: "question-page" },
    crumbs(h("a", { href: runHref(runId) }, q.run_label), h("span", {}, qid)),
    others.length ? h("p", { class: "picker" }, "Side by side with ", pick, " ",
      h("button", { onclick: () => { location.hash = compareHref(runId, pick.value, qid); } },
        "compare")) : null,
    questionHeader(q), questionBody(q));
}

function questionHeader(q) {
  const r = q.row;
  return h("div", { class: "question-head" },
    h("h1", {}, r.question),
    h("p", { class: "muted" }, `${r.qid} · ${r.category} · asked by ${q.asking_user || "unknown"}`
      + ` at ${q.question_time || "no time given"} · conversation ${q.conv_id}`));
}

function questionBody(q) {
  const r = q.row;
  return h("div", { class: "question-body" },
    section("Answer",
      h("dl", { class: "answer" },
        h("dt", {}, `prediction (${q.method})`), h("dd", { class: "prediction" }, r.prediction ?? dash),
        h("dt", {}, "gold answer (reader only)"), h("dd", { class: "gold-answer" }, r.answer ?? dash),
        h("dt", {}, "outcome"), h("dd", {}, badge(r.outcome),
          r.disagreement ? [" ", badge("judges disagree", "warn")] : null,
          ` F1 ${fixed(r.f1, 3)} · EM ${pct(r.exact_match)} · recall `
          + `${q.evidence_basis === "untraceable" ? "not measurable" : pct(r.recall)}`),
        h("dt", {}, "cause (failure attribution)"), h("dd", { class: "cause" }, r.cause))),
    section("Verdicts", verdicts(q.verdicts)),
    section(`Context (${q.context ? `${q.context.kind}, ${int(q.context.tokens)} tokens` : "none yet"})`,
      q.context?.forest ? forest(q.context.forest) : null,
      q.context?.timeline ? timeline(q.context.timeline) : null,
      q.context ? contextText(q.context.lines) : h("p", { class: "muted" }, "No context recorded.")),
    section("Gold evidence (reader only)", goldEvidence(q.evidence, q.evidence_basis)),
    section("LLM calls", calls(q.calls)),
    q.failures.length ? section("Failures", failures(q.failures)) : null,
    q.stale.length ? section("Stale records (made under superseded dependencies, not scored)",
      staleRecords(q.stale)) : null,
    q.prompt.length ? h("details", { class: "prompt" }, h("summary", {}, "answer prompt"),
      q.prompt.map((m) => h("div", {}, h("div", { class: "role" }, m.role),
        h("pre", {}, m.content)))) : null);
}

function verdicts(rows) {
  if (!rows.length) return h("p", { class: "muted" }, "No verdict yet.");
  return table(["judge", "repeat", "verdict", "scored by", "raw output", "F1", "EM"],
    rows.map((v) => h("tr", {}, h("td", {}, v.judge), h("td", { class: "num" }, v.repeat),
      h("td", {}, badge(v.verdict, `verdict ${v.verdict}`)), h("td", {}, v.scored_by),
      h("td", {}, h("pre", { class: "raw" }, v.raw || dash)), h("td", { class: "num" }, fixed(v.f1, 3)),
      h("td", {}, v.exact_match === null ? dash : String(v.exact_match)))), { class: "verdicts" });
}

function forest(f) {
  const node = (n) => h("li", { class: n.gold ? "node gold" : "node", "data-id": n.id },
    h("div", { class: "node-head" }, badge(n.relation, `rel ${n.relation}`), " ",
      h("code", {}, n.id), " ", h("time", {}, n.at.replace("T", " ").slice(0, 16)), " ",
      h("b", {}, n.author || "unknown"), n.meta ? h("span", { class: "muted" }, ` (${n.meta})`) : null,
      n.label ? [" ", badge(n.label, "label")] : null, n.gold ? [" ", badge("gold", "gold")] : null),
    h("div", { class: "node-text" }, n.spans.map((s) => (s.trimmed
      ? h("del", { class: "trimmed", title: "trimmed by compression" }, s.text)
      : h("span", {}, s.text))).flatMap((x, i) => (i ? [" ", x] : [x]))),
    n.children.length ? h("ul", {}, n.children.map(node)) : null);
  const c = f.compression;
  return h("div", { class: "forest" }, h("h3", {}, "Evidence forest"),
    h("ul", { class: "tree" }, f.roots.map(node)),
    h("p", { class: "muted small" },
      c ? `compression: ${c.dropped} of ${c.spans} spans trimmed, ${c.tokens} tokens` : "no compression",
      f.trimmed.length ? ` · nodes trimmed to fit the budget: ${f.trimmed.join(", ")}` : ""),
    f.repairs.length ? h("details", {}, h("summary", {}, `${f.repairs.length} repaired edges`),
      h("ul", {}, f.repairs.map((r) => h("li", {}, r)))) : null,
    f.failures.length ? h("p", { class: "error" }, `failed LLM batches: ${f.failures.join("; ")}`) : null);
}

function timeline(t) {
  const step = (s) => h("li", { class: "step" },
    h("div", { class: "node-head" }, h("b", {}, `step ${s.step}`), " ", badge(s.action, "action"),
      s.argument ? [" ", h("code", {}, s.argument)] : null,
      h("span", { class: "muted small" }, ` ${s.prompt_tokens}+${s.completion_tokens} tokens · `
        + `${secs(s.latency_s)}${s.cached ? " · cached" : ""}`)),
    s.reasoning ? h("div", { class: "small" }, h("i", {}, s.reasoning)) : null,
    s.read ? h("div", {}, "read: ", s.read) : null,
    s.found.length ? h("div", {}, "found:", h("ul", {}, s.found.map((e) => h("li", { class: "small" }, e)))) : null,
    s.memory ? h("div", { class: "memory-note" }, "wrote: ", s.memory) : null,
    s.repair ? h("div", { class: "warn small" }, `repair: ${s.repair}`) : null,
    s.error ? h("div", { class: "error" }, s.error) : null);
  return h("div", { class: "timeline" }, h("h3", {}, "T2Mem steps"),
    h("details", {}, h("summary", {}, `initial SearchMeta: ${t.initial.length} entries`),
      h("ul", {}, t.initial.map((e) => h("li", { class: "small" }, e)))),
    h("ol", { class: "steps" }, t.steps.map(step)),
    h("p", {}, `stop: ${t.stop}`, t.fallback ? " · memory empty: the answer read the entries shown" : ""));
}

function contextText(lines) {
  return h("div", {}, h("h3", {}, "As the answer model saw it"),
    h("pre", { class: "context" }, lines.map((l) => h("div", { class: l.gold ? "line gold" : "line" },
      l.text || " "))));
}

// Each gold message: in the context (its text shown to the answer model), read (by a method
// whose context is what it wrote after reading), or not measurable (a memory without sources).
function goldEvidence(items, basis) {
  if (!items.length) return h("p", { class: "muted" }, "No gold evidence for this question.");
  const read = basis === "read";
  const label = (e) => (e.in_context === null ? ["not measurable", "warn"]
    : e.in_context ? [read ? "read" : "in context", "correct"] : [read ? "not read" : "missing", "wrong"]);
  return h("ul", { class: "evidence" }, items.map((e) => h("li", {},
    badge(...label(e)), " ", h("span", { class: "small" }, e.text))));
}

function calls(rows) {
  if (!rows.length) return h("p", { class: "muted" }, "No LLM call.");
  const row = (c) => h("tr", {}, h("td", {}, c.stage), h("td", {}, c.backbone),
    h("td", { class: "small" }, c.model), h("td", { class: "num tokens" }, int(c.prompt_tokens)),
    h("td", { class: "num" }, int(c.completion_tokens)), h("td", { class: "num" }, secs(c.latency_s)),
    h("td", { class: "num" }, usd(c.cost_usd)), h("td", {}, c.cached ? badge("cache hit", "cached") : ""));
  // the question's own calls, as its LLM tokens count them; the run's memory (shown here,
  // counted once per run) and the judges' controls (never a question's tokens) apart
  const method = rows.filter((c) => c.stage !== "calibration" && c.stage !== "memory");
  const memory = rows.filter((c) => c.stage === "memory");
  const controls = rows.filter((c) => c.stage === "calibration");
  const total = (label, group) => {
    const sum = (k) => group.reduce((a, c) => a + c[k], 0);
    return h("tr", { class: "total" }, h("td", {}, `${group.length} ${label}`),
      h("td", {}), h("td", {}), h("td", { class: "num" }, int(sum("prompt_tokens"))),
      h("td", { class: "num" }, int(sum("completion_tokens"))), h("td", { class: "num" }, secs(sum("latency_s"))),
      h("td", { class: "num" }, usd(sum("cost_usd"))),
      h("td", {}, `${group.filter((c) => c.cached).length} hits`));
  };
  return table(["stage", "backbone", "model", "prompt tok", "completion tok", "latency", "cost",
    "cache"], [...rows.map(row), total("calls", method),
    memory.length ? total("memory calls (the run's)", memory) : null,
    controls.length ? total("calibration calls", controls) : null], { class: "calls" });
}

function failures(rows) {
  return table(["store", "stage", "error", "when"], rows.map((f) => h("tr", {},
    h("td", {}, f.store), h("td", {}, f.stage), h("td", { class: "error" }, f.error),
    h("td", { class: "small" }, new Date(f.written_at * 1000).toISOString()))));
}

function staleRecords(rows) {
  return table(["store", "key", "when"], rows.map((r) => h("tr", {},
    h("td", {}, r.store), h("td", {}, r.key),
    h("td", { class: "small" }, new Date(r.written_at * 1000).toISOString()))));
}

// ---- two runs side by side --------------------------------------------------------------
const disagree = (a, b) => !a || !b || a.outcome !== b.outcome;

async function comparePage(aId, bId, params) {
  const [sweep, a, b] = await Promise.all([api.sweep(), api.run(aId), api.run(bId)]);
  if (!a || !b) return h("p", { class: "error" }, `error: no run ${!a ? aId : bId} in this sweep`);
  const byQid = new Map(b.questions.map((q) => [q.qid, q]));
  const pairs = a.questions.filter((q) => byQid.has(q.qid)).map((q) => [q, byQid.get(q.qid)]);
  const body = h("div", {});
  const update = (filter) => {
    const rows = pairs.filter(([x, y]) => (matches(x, filter) || matches(y, filter))
      && (!filter.only || disagree(x, y)));
    body.replaceChildren(paged(rows, filter.page, (shown) => pairTable(a, b, shown),
      (page) => update({ ...filter, page })));
  };
  const categories = [...new Set([...a.categories, ...b.categories])].sort();
  const { controls, state } = filterControls(params, categories, update,
    [["disagreement", "judges disagree"], ["only", "only where the runs disagree"]]);
  update(state());
  const count = (f) => pairs.filter(f).length;
  const ok = (q) => q.outcome === "correct";
  return h("div", { id: "compare-page" }, crumbs(h("span", {}, `${a.run.label} vs ${b.run.label}`)),
    h("h1", {}, `${a.run.label} vs ${b.run.label}`),
    h("p", { class: "stats" }, `${pairs.length} shared questions · both correct `
      + `${count(([x, y]) => ok(x) && ok(y))} · only ${a.run.label} ${count(([x, y]) => ok(x) && !ok(y))}`
      + ` · only ${b.run.label} ${count(([x, y]) => !ok(x) && ok(y))} · outcomes differ `
      + `${count(([x, y]) => disagree(x, y))}`),
    pairedTable(sweep, a.run, b.run), controls, body);
}

// The report's paired differences of the two runs (b minus a in the report's run order).
function pairedTable(sweep, a, b) {
  const rows = sweep.pairs.filter((p) => (p.run_a === a.run_id && p.run_b === b.run_id)
    || (p.run_a === b.run_id && p.run_b === a.run_id));
  if (!rows.length) {
    return h("p", { class: "paired muted" }, "Not paired: these runs ask different questions, "
      + "or differ in more than one of method, backbone, top_k and budget.");
  }
  const label = (id) => (id === a.run_id ? a.label : b.label);
  const first = rows[0];
  return h("div", { class: "paired" },
    h("h2", {}, `Paired differences: ${label(first.run_b)} − ${label(first.run_a)} (${first.varied})`),
    table(["metric", "questions", label(first.run_a), label(first.run_b), "Δ [95% interval]", "p", "test"],
      rows.map((p) => h("tr", { "data-metric": p.metric }, h("td", {}, p.metric),
        h("td", { class: "num" }, int(p.questions)), h("td", { class: "num" }, fixed(p.a, 3)),
        h("td", { class: "num" }, fixed(p.b, 3)),
        h("td", { class: "num diff" }, withCi(p.diff, p.ci, signedFixed)),
        h("td", { class: "num p-value" }, p.p_value === null ? dash : Number(p.p_value).toPrecision(3)),
        h("td", {}, p.test || dash))), { class: "paired-table" }));
}

function pairTable(a, b, pairs) {
  return table(["question", "category", a.run.label, b.run.label, `prediction: ${a.run.label}`,
    `prediction: ${b.run.label}`], pairs.map(([x, y]) => h("tr", { class: disagree(x, y) ? "differs" : "" },
    h("td", {}, h("a", { href: compareHref(a.run.run_id, b.run.run_id, x.qid), class: "pair-link" }, x.qid),
      h("div", { class: "small" }, clip(x.question, 120))),
    h("td", {}, x.category), h("td", {}, badge(x.outcome)), h("td", {}, badge(y.outcome)),
    h("td", { class: "small" }, clip(x.prediction, 100)), h("td", { class: "small" }, clip(y.prediction, 100)))),
  { class: "pairs" });
}

async function sideBySidePage(aId, bId, qid) {
  const [x, y] = await Promise.all([api.question(aId, qid), api.question(bId, qid)]);
  if (!x || !y) return h("p", { class: "error" }, `error: question ${qid} is not in both runs`);
  document.title = `${qid}: ${x.run_label} vs ${y.run_label}`;
  const column = (q) => h("div", { class: "column" },
    h("h2", { class: "column-title" }, h("a", { href: questionHref(q.run_id, qid) }, q.run_label),
      " ", badge(q.row.outcome)), questionBody(q));
  return h("div", { id: "side-by-side" },
    crumbs(h("a", { href: compareHref(aId, bId) }, `${x.run_label} vs ${y.run_label}`), h("span", {}, qid)),
    questionHeader(x),
    h("p", { class: x.row.outcome === y.row.outcome ? "stats" : "stats differs" },
      x.row.outcome === y.row.outcome ? `Both ${x.row.outcome}.`
        : `They disagree: ${x.run_label} ${x.row.outcome}, ${y.run_label} ${y.row.outcome}.`),
    h("div", { class: "columns" }, column(x), column(y)));
}

window.addEventListener("hashchange", () => render(false));
render(false);
