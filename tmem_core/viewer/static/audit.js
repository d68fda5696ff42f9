// The audit page: low-confidence evidence units of an annotation, accepted or rejected one by
// one; each decision is posted at once and written into the folder's audit file.
"use strict";

const root = document.getElementById("audit");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

async function decide(unit, decision, row) {
  const reply = await fetch("api/audit/decision", {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({key: unit.key, decision}),
  });
  const state = row.querySelector(".decision");
  if (!reply.ok) { state.textContent = await reply.text(); state.className = "decision error"; return; }
  unit.decision = (await reply.json()).decision;
  state.textContent = unit.decision;
  state.className = `decision badge ${unit.decision === "accept" ? "correct" : "wrong"}`;
  counts();
}

function counts() {
  const rows = [...root.querySelectorAll("tr.unit")];
  const done = rows.filter(r => r.querySelector(".decision").textContent !== "undecided").length;
  root.querySelector(".summary").textContent = `${rows.length} low-confidence units, ${done} decided`;
}

function unitRow(unit) {
  const row = el("tr", {class: "unit", "data-key": unit.key},
    el("td", {class: "qid"}, unit.qid),
    el("td", {}, el("div", {}, unit.question), el("div", {class: "muted small"}, `answer: ${unit.answer}`)),
    el("td", {class: "text"}, el("span", {class: "muted small"}, `[${unit.msg_id}] `), unit.text),
    el("td", {}, el("span", {class: "badge label"}, unit.label),
       el("div", {class: "muted small"}, `rank ${unit.rank + 1}, overlap ${unit.lexical.toFixed(2)}`)),
    el("td", {class: "num confidence"}, unit.confidence.toFixed(2)),
    el("td", {}, el("span", {class: "decision badge"}, unit.decision || "undecided")),
    el("td", {}, el("button", {type: "button", class: "accept"}, "accept"), " ",
       el("button", {type: "button", class: "reject"}, "reject")));
  if (unit.decision) row.querySelector(".decision").classList.add(unit.decision === "accept" ? "correct" : "wrong");
  row.querySelector("button.accept").addEventListener("click", () => decide(unit, "accept", row));
  row.querySelector("button.reject").addEventListener("click", () => decide(unit, "reject", row));
  return row;
}

async function load() {
  const reply = await fetch("api/audit");
  if (!reply.ok) { root.replaceChildren(el("p", {class: "error"}, await reply.text())); return; }
  const data = await reply.json();
  const body = el("tbody", {}, ...data.units.map(unitRow));
  root.replaceChildren(
    el("h1", {}, "Evidence audit"),
    el("p", {class: "muted"}, `${data.folder}: decisions are written to ${data.audit_file}; `
       + "`python -m jobs.annotate --apply FOLDER` writes the prepared variant with them."),
    el("p", {class: "summary stats"}),
    el("table", {class: "units"},
       el("thead", {}, el("tr", {}, ...["question", "", "message", "filter", "confidence",
                                          "decision", ""].map(h => el("th", {}, h)))), body));
  counts();
}

load();
