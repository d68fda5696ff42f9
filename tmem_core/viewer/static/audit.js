// The audit page: low-confidence evidence units of an annotation, each in its evidence group
// (units that establish the same claim), accepted or rejected one by one or a group at once;
// each decision is posted at once and written into the folder's audit file.
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

const groups = {};

async function post(key, decision) {
  const reply = await fetch("api/audit/decision", {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({key, decision}),
  });
  return reply.ok ? {decision: (await reply.json()).decision} : {error: await reply.text()};
}

function show(row, decision, inherited) {
  const state = row.querySelector(".decision");
  state.textContent = decision ? (inherited ? `${decision} (group)` : decision) : "undecided";
  state.className = `decision badge${decision ? (decision === "accept" ? " correct" : " wrong") : ""}`;
}

async function decide(unit, decision, row) {
  const done = await post(unit.key, decision);
  if (done.error) { const s = row.querySelector(".decision"); s.textContent = done.error; s.className = "decision error"; return; }
  unit.decision = done.decision;
  show(row, unit.decision, false);
  counts();
}

async function decideGroup(group, decision) {
  const done = await post(group.key, decision);
  if (done.error) { alert(done.error); return; }
  group.decision = done.decision;
  for (const row of root.querySelectorAll(`tr.unit[data-group="${CSS.escape(group.key)}"]`)) {
    const unit = row.unit;
    if (!unit.decision) show(row, group.decision, true);
  }
  counts();
}

function counts() {
  const rows = [...root.querySelectorAll("tr.unit")];
  const done = rows.filter(r => r.querySelector(".decision").textContent !== "undecided").length;
  root.querySelector(".summary").textContent = `${rows.length} low-confidence units, ${done} decided`;
}

function groupCell(unit) {
  const group = groups[unit.group];
  const others = group.members.filter(m => m.key !== unit.key);
  const cell = el("td", {class: "group"},
    el("div", {}, `${unit.group.split("|").pop()} (${group.kind})`),
    el("div", {class: "muted small"}, others.length
      ? `same claim as ${others.map(m => `${m.msg_id} (${m.status})`).join(", ")}` : "alone"),
    el("div", {class: "muted small"}, group.claim.length ? `claim: ${group.claim.join(" ")}` : ""),
    el("button", {type: "button", class: "accept-group"}, "accept group"), " ",
    el("button", {type: "button", class: "reject-group"}, "reject group"));
  cell.querySelector("button.accept-group").addEventListener("click", () => decideGroup(group, "accept"));
  cell.querySelector("button.reject-group").addEventListener("click", () => decideGroup(group, "reject"));
  return cell;
}

function unitRow(unit) {
  const row = el("tr", {class: "unit", "data-key": unit.key, "data-group": unit.group},
    el("td", {class: "qid"}, unit.qid),
    el("td", {}, el("div", {}, unit.question), el("div", {class: "muted small"}, `answer: ${unit.answer}`)),
    el("td", {class: "text"}, el("span", {class: "muted small"}, `[${unit.msg_id}] `), unit.text),
    el("td", {}, el("span", {class: "badge label"}, unit.label),
       el("div", {class: "muted small"}, `rank ${unit.rank + 1}, overlap ${unit.lexical.toFixed(2)}`)),
    el("td", {class: "num confidence"}, unit.confidence.toFixed(2)),
    groupCell(unit),
    el("td", {}, el("span", {class: "decision badge"}, "undecided")),
    el("td", {}, el("button", {type: "button", class: "accept"}, "accept"), " ",
       el("button", {type: "button", class: "reject"}, "reject")));
  row.unit = unit;
  const inherited = groups[unit.group].decision;
  show(row, unit.decision || inherited, !unit.decision && !!inherited);
  row.querySelector("button.accept").addEventListener("click", () => decide(unit, "accept", row));
  row.querySelector("button.reject").addEventListener("click", () => decide(unit, "reject", row));
  return row;
}

async function load() {
  const reply = await fetch("api/audit");
  if (!reply.ok) { root.replaceChildren(el("p", {class: "error"}, await reply.text())); return; }
  const data = await reply.json();
  for (const group of data.groups) groups[group.key] = group;
  const body = el("tbody", {}, ...data.units.map(unitRow));
  root.replaceChildren(
    el("h1", {}, "Evidence audit"),
    el("p", {class: "muted"}, `${data.folder}: decisions are written to ${data.audit_file}; `
       + "`python -m jobs.annotate --apply FOLDER` writes the prepared variant with them."),
    el("p", {class: "summary stats"}),
    el("table", {class: "units"},
       el("thead", {}, el("tr", {}, ...["question", "", "message", "filter", "confidence",
                                          "evidence group", "decision", ""].map(h => el("th", {}, h)))), body));
  counts();
}

load();
