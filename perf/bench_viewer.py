"""Results viewer on a large sweep: server load, API sizes and times, page loads in Chromium.

    python perf/bench_viewer.py [--questions 5000] [--runs 2] [--repeats 5]

Builds a synthetic results tree with the pipeline's own stores (no LLM): `--runs` runs of
`--questions` questions each, one a flat BM25-like run, the others T-MEM-like with a
12-node forest per question (built and linearised by T-MEM's code), with contexts, prompts
and traces of real size, in parts of 100 questions as the pipeline writes them. Then it
times reading the sweep (what the server does on start and whenever a part lands), each
JSON page, and each page of the viewer in headless Debian Chromium (/usr/bin/chromium),
from navigation start to the page drawn (the page's own clock; with the driver's round
trips beside it): medians of --repeats loads, beside a static file's load (the browser's
own overhead).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote
from urllib.request import urlopen

from tmem_core.benchmarks import PreparedBenchmark, write_prepared
from tmem_core.methods import Record, record_columns, render_message
from tmem_core.methods.tmem import Built, Proposal, build_forest, linearise
from tmem_core.pipeline import BenchmarkConfig, Contract, RunSpec
from tmem_core.results import RECORD_STAGES, calls_store, stage_store
from tmem_core.schema import Gold, Message, Question, messages_to_table, questions_to_table
from tmem_core.viewer import Background, viewer_app

CHROMIUM = "/usr/bin/chromium"
MESSAGES, EVIDENCE, PART = 2000, 12, 100
CATEGORIES = ("multi_hop", "knowledge_update", "temporal", "user_implicit", "abstention")
T0 = datetime(2025, 1, 1, tzinfo=UTC)
WORDS = ("the", "retry", "limit", "for", "login", "is", "now", "five", "attempts", "after",
         "review", "rollout", "moves", "to", "second", "phase", "of", "launch", "plan", "EU")


@dataclass(frozen=True)
class Tree:
    root: Path
    runs: list[str]
    qids: list[str]


def _message(i: int, rng: random.Random) -> Message:
    text = ". ".join(" ".join(rng.choices(WORDS, k=12)) for _ in range(3)) + "."
    return Message("c1", f"c1:m{i:05d}", i, T0 + timedelta(minutes=7 * i), text,
                   author=f"User_{i % 7}", role="engineer", channel="#eng",
                   topic=f"topic {i % 20}", phase="design")


def _question_item(k: int, evidence: Message, rng: random.Random) -> tuple[Question, Gold]:
    qid = f"c1:q{k:05d}"
    text = f"What did we decide about {' '.join(rng.choices(WORDS, k=6))}?"
    return (Question("c1", qid, text, CATEGORIES[k % len(CATEGORIES)],
                     question_time=T0 + timedelta(days=200)),
            Gold(qid, "five attempts", (evidence.msg_id,)))


def build_tree(root: Path, questions: int, runs: int, judge_repeats: int = 1) -> Tree:
    """The results tree: `judge_repeats` verdicts per question, each right with p 0.6."""
    rng = random.Random(0)
    messages = [_message(i, rng) for i in range(MESSAGES)]
    items = [_question_item(k, messages[k % MESSAGES], rng) for k in range(questions)]
    data = root / "data" / "bench"
    write_prepared(PreparedBenchmark("synthetic", messages_to_table(messages),
                                     questions_to_table(items), {"benchmark": "synthetic"}),
                   data)
    specs = [RunSpec("bench", BenchmarkConfig("synthetic", limit=questions),
                     "bm25" if r == 0 else "tmem", {"run": r}, "smollm2", ("smollm2",), 12,
                     1024, judge_repeats) for r in range(runs)]
    for spec in specs:
        _write_run(root / spec.run_id, spec, data, messages, [q.qid for q, _ in items], rng)
    return Tree(root, [s.run_id for s in specs], [q.qid for q, _ in items])


def _write_run(run_dir: Path, spec: RunSpec, data: Path, messages: list[Message],
               qids: list[str], rng: random.Random) -> None:
    Contract(spec.run_id, spec.identity(), "0" * 64, data={"dir": str(data)},
             started_at=time.time() - 3600, ended_at=time.time()).write(run_dir)
    stores = {s: stage_store(run_dir, s) for s in RECORD_STAGES}
    calls = calls_store(run_dir)
    for start in range(0, len(qids), PART):
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in stores}
        call_rows: list[dict[str, Any]] = []
        for qid in qids[start:start + PART]:
            _question(spec, qid, rng.sample(messages, EVIDENCE), rng, rows, call_rows)
        for name, store in stores.items():
            store.append(rows[name])
        calls.append(call_rows)


def _question(spec: RunSpec, qid: str, chosen: list[Message], rng: random.Random,
              rows: dict[str, list[dict[str, Any]]], calls: list[dict[str, Any]]) -> None:
    ids = [m.msg_id for m in chosen]
    base = {"run_id": spec.run_id, "qid": qid, "conv_id": "c1", "ok": True}
    if spec.method == "tmem":
        ordered = sorted(chosen, key=lambda m: m.seq)
        proposals = {m.msg_id: Proposal(ordered[max(0, k - 1)].msg_id if k else None,
                                        rng.choice(("UPDATE", "EXPAND")) if k else "ROOT")
                     for k, m in enumerate(ordered)}
        forest, _ = build_forest(ordered, proposals)
        by_id = {m.msg_id: m for m in chosen}
        context = linearise(forest, by_id, {m.msg_id: m.text for m in chosen}).text
        record: Record = Built(forest=tuple(forest.nodes.values()),
                               labels=dict.fromkeys(ids, "KEY"), trimmed=(), repairs=(),
                               failures=(), compression=None)
        kind = "forest"
    else:
        context, record, kind = "\n".join(render_message(m) for m in chosen), Record(), "flat"
    prompt = json.dumps([{"role": "system", "content": "Answer from the evidence."},
                         {"role": "user", "content": f"{context}\nQuestion: {qid}?"}])
    rows["retrieve"].append({**base, "key": qid, "evidence_ids": ids,
                             "latency_s": 0.01})
    rows["construct"].append({**base, "key": qid, "kind": kind, "context": context,
                              "context_ids": ids, "tokens": len(context) // 4,
                              **record_columns(record), "latency_s": 0.5})
    rows["answer"].append({**base, "key": qid, "prompt_name": "answer", "prompt_sha256": "0",
                           "prompt": prompt, "prediction": "five attempts", "latency_s": 1.0})
    matched = rng.random() < 0.6
    for repeat in range(spec.judge_repeats):
        score = float(matched if repeat == 0 else rng.random() < 0.6)
        rows["judge"].append({**base, "key": f"{qid}|smollm2|{repeat}", "judge": "smollm2",
                              "repeat": repeat, "category": "multi_hop", "answer_kind": "text",
                              "scored_by": "llm", "score": score, "f1": None,
                              "exact_match": matched, "raw": '{"verdict": "CORRECT"}',
                              "prompt_name": "judge", "prompt_sha256": "0"})
    for stage, tokens in (("construct", 1200), ("answer", len(prompt) // 4), ("judge", 150)):
        calls.append({**base, "conv_id": None, "key": f"{stage}|{qid}|h", "backbone": "smollm2",
                      "model": "SmolLM2", "stage": stage, "request_hash": "h",
                      "prompt_tokens": tokens, "completion_tokens": 20, "latency_s": 0.5,
                      "cached": False, "cost_usd": 0.0, "finished_at": time.time()})


def median_s(repeats: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def api_figures(url: str, tree: Tree, repeats: int) -> None:
    run, qid = tree.runs[-1], tree.qids[len(tree.qids) // 2]
    for name, path in (("sweep", "api/sweep"), ("run (every question, light rows)",
                                                 f"api/runs/{run}"),
                       ("one question (large columns)",
                        f"api/runs/{run}/questions/{quote(qid, safe='')}")):
        size = len(urlopen(url + path).read())
        seconds = median_s(repeats, lambda p=path: urlopen(url + p).read())
        print(f"  GET {name}: {seconds * 1000:.0f} ms, {size / 1024:.0f} KiB")


def page_figures(url: str, tree: Tree, repeats: int) -> None:
    from playwright.sync_api import sync_playwright

    run, other, qid = tree.runs[-1], tree.runs[0], tree.qids[len(tree.qids) // 2]
    pages = [("baseline: a static file, nothing drawn", "static/viewer.css", "body"),
             ("sweep page", "#/", "#sweep-page table.runs"),
             (f"run page ({len(tree.qids):,} questions, first 50 drawn)",
              f"#/run/{quote(run, safe='')}", "#run-page table.questions"),
             ("question page (forest)", f"#/q/{quote(run, safe='')}/{quote(qid, safe='')}",
              "#question-page .forest"),
             ("two runs compared (every shared question)",
              f"#/cmp/{quote(run, safe='')}/{quote(other, safe='')}", "#compare-page table"),
             ("side by side (one question)",
              f"#/cmp/{quote(run, safe='')}/{quote(other, safe='')}/{quote(qid, safe='')}",
              "#side-by-side .columns")]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                             args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        for name, fragment, drawn in pages:
            loads = [_load(page, url + fragment, drawn) for _ in range(repeats)]
            in_page, wall = (statistics.median(x) * 1000 for x in zip(*loads, strict=True))
            print(f"  {name}: {in_page:.0f} ms in the page "
                  f"({wall:.0f} ms with the driver's round trips)")
        browser.close()


def _load(page: Any, url: str, drawn: str) -> tuple[float, float]:
    """Seconds from navigation start to `drawn` on the page's clock, and on ours."""
    page.goto("about:blank")
    started = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_selector(drawn)
    return page.evaluate("performance.now()") / 1000, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.questions < 1 or args.runs < 2 or args.repeats < 1:
        parser.error("--questions and --repeats must be at least 1, --runs at least 2")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        tree = build_tree(Path(tmp), args.questions, args.runs)
        size = sum(p.stat().st_size for p in Path(tmp).rglob("*.parquet")) / 1024**2
        print(f"results tree: {args.runs} runs x {args.questions:,} questions, {size:.0f} MiB "
              f"of Parquet, built in {time.perf_counter() - started:.1f} s")
        load = median_s(args.repeats, lambda: viewer_app(tree.root))
        print(f"reading the sweep (server start, and again whenever a part lands): "
              f"{load:.2f} s")
        with Background(tree.root) as url:
            print("JSON pages, server warm (medians):")
            api_figures(url, tree, args.repeats)
            print("pages in headless Chromium, navigation start to page drawn (medians):")
            page_figures(url, tree, args.repeats)


if __name__ == "__main__":
    main()
