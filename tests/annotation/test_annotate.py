"""Exp-2's evidence annotation: units and their confidence, reverse retrieval and the filter
through real MiniLM + BM25 indexes on the LoCoMo file (a scripted filter, then the embedded
SmolLM2 on one conversation), the new prepared variant beside an unchanged base, and no
method that could read it."""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import jobs.annotate as annotate_job
from tmem_core import DataError
from tmem_core.annotation import (
    LOW_CONFIDENCE_FILE,
    PREPARED_DIR,
    SETTINGS_FILE,
    AnnotateConfig,
    annotatable,
    annotate,
    annotated_variant,
    read_audit,
    read_units,
    record_decision,
    write_units,
)
from tmem_core.annotation._annotate import reverse_retrieval
from tmem_core.annotation._units import Unit, final_status, judged
from tmem_core.benchmarks import (
    LoadRequest,
    PreparedBenchmark,
    build,
    read_prepared,
    write_prepared,
)
from tmem_core.evaluation._recall import evidence_groups
from tmem_core.llm import ChatRequest, ChatResponse, Usage
from tmem_core.retrieval import IndexStore, conversations_from_table
from tmem_core.schema import Gold, gold_from_table, questions_from_table

PACKAGE = Path(__file__).resolve().parents[2] / "tmem_core"
CONVERSATION = "conv-30"


@pytest.fixture(scope="module")
def locomo(locomo_path: Path) -> PreparedBenchmark:
    return build("locomo", LoadRequest(source=locomo_path))


@pytest.mark.parametrize(("label", "rank", "lexical", "status"), [
    ("ANSWER", 0, 0.8, "accepted"), ("ANSWER", 3, 0.0, "accepted"),
    ("ANSWER", 15, 0.0, "audit"),  # the filter alone says evidence
    ("BRIDGE", 15, 0.6, "accepted"), ("NONE", 2, 0.9, "audit"),  # retrieval and text disagree
    ("NONE", 2, 0.1, "rejected"), ("NONE", 15, 0.9, "rejected"),
    ("FAILED", 0, 1.0, "audit"), ("FAILED", 15, 0.0, "audit"),
])
def test_confidence_and_status(label: str, rank: int, lexical: float, status: str) -> None:
    unit = judged("q", "c", "?", "a", "m1", "text", rank, label, lexical)  # type: ignore[arg-type]
    assert unit.status == status
    votes = [{"ANSWER": 1, "BRIDGE": 1, "NONE": 0, "FAILED": 0.5}[label], rank < 10,
             lexical >= 0.5]
    assert unit.confidence == pytest.approx(sum(votes) / 3, abs=1e-4)
    assert unit.kind == {"ANSWER": "answer", "BRIDGE": "anchor"}.get(label)


class _Scripted:
    """A filter that calls ANSWER every message holding a word of the answer, BRIDGE every
    message naming the question's first capitalised word, NONE the rest; junk for `junk`."""

    def __init__(self, junk: Sequence[str] = ()) -> None:
        self.junk = set(junk)
        self.requests: list[ChatRequest] = []

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.requests += requests
        return [self._one(r) for r in requests]

    def _one(self, request: ChatRequest) -> ChatResponse:
        if request.qid in self.junk:
            return ChatResponse("{", None, Usage(30, 2), error="invalid_output: junk")
        prompt = request.messages[-1].content
        answer = prompt.split("Correct answer: ")[1].split("\n")[0].lower().split()
        lines = [line for line in prompt.splitlines() if line.startswith("[m")]
        labels = {}
        for line in lines:
            local, text = line[1:].split("]", 1)
            labels[local] = ("ANSWER" if any(w in text.lower() for w in answer if len(w) > 3)
                             else "NONE")
        parsed = {"labels": labels}
        return ChatResponse(json.dumps(parsed), parsed, Usage(100, 20))


def test_reverse_retrieval_and_a_scripted_filter_through_real_indexes(
        locomo: PreparedBenchmark, tmp_path: Path) -> None:
    gold = gold_from_table(locomo.questions)
    questions = [q for q in annotatable(questions_from_table(locomo.questions), gold)
                 if q.conv_id == CONVERSATION][:6]
    assert all(gold[q.qid].answer_kind != "abstention" for q in questions)
    store = IndexStore(conversations_from_table(locomo.messages))
    llm = _Scripted(junk=[questions[0].qid])
    done = annotate(store, questions, gold, llm, AnnotateConfig(depth=20, batch=10))
    assert len(done.units) == 20 * len(questions) and len(llm.requests) == 2 * len(questions)
    assert done.stats["calls"] == len(llm.requests) and done.stats["failed_calls"] == 2
    assert done.stats["prompt_tokens"] == 100 * (len(llm.requests) - 2) + 30 * 2
    for q in questions:  # the candidates are the reverse retrieval's, best first
        ranked = [m.msg_id for m in reverse_retrieval(store, q, gold[q.qid].answer or "", 20)]
        assert [u.msg_id for u in done.units if u.qid == q.qid] == ranked
    assert all(u.label == "FAILED" and u.status == "audit" for u in done.units
               if u.qid == questions[0].qid)
    texts = {u.key: u.text for u in done.units}
    for request in llm.requests:  # each request shows its ten candidates, best first
        shown = [line.split(": ", 1)[1] for line in request.messages[-1].content.splitlines()
                 if line.startswith("[m")]
        batch = [u for u in done.units if u.qid == request.qid]
        first = 0 if request is llm.requests[2 * questions.index(
            next(q for q in questions if q.qid == request.qid))] else 10
        assert shown == [texts[u.key] for u in batch[first:first + 10]]
    write_units(tmp_path, done.units)
    low = read_units(tmp_path, LOW_CONFIDENCE_FILE)
    assert low == [u for u in done.units if u.status == "audit"] and low
    record_decision(tmp_path, low[0].key, "accept")
    with pytest.raises(DataError, match="no low-confidence unit"):
        record_decision(tmp_path, "q|m0", "accept")
    _check_variant(locomo, done.units, tmp_path, gold)


def _check_variant(base: PreparedBenchmark, units: Sequence[Unit], folder: Path,
                   gold: dict[str, Gold]) -> None:
    decisions = read_audit(folder)
    variant = annotated_variant(base, units, decisions, {"depth": 20})
    assert variant.messages.equals(base.messages)
    new = gold_from_table(variant.questions)
    annotated = {u.qid for u in units}
    for qid, g in gold.items():
        if qid not in annotated:
            assert new[qid] == g
            continue
        accepted = [u.msg_id for u in units
                    if u.qid == qid and final_status(u, decisions) == "accepted"]
        meta = json.loads(new[qid].gold_meta or "{}")
        groups, capped = meta["annotation"]["groups"], meta["annotation"]["capped"]
        assert len(groups) <= 4 and (not capped or len(groups) == 4)
        assert [gr["members"] for gr in groups] == [list(m) for m in evidence_groups(new[qid])]
        assert sorted(new[qid].evidence_ids) == sorted(m for gr in groups for m in gr["members"])
        assert sorted(m for gr in groups + capped for m in gr["members"]) == sorted(accepted)
        assert meta["base_evidence_ids"] == list(g.evidence_ids)
        assert sorted(meta["annotation"]["answer"] + meta["annotation"]["anchor"]) == sorted(
            new[qid].evidence_ids)
    facts = variant.manifest["annotation"]
    assert facts["base"]["benchmark"] == base.name and len(facts["base"]["sha256"]) == 64
    assert facts["audit"]["decided"] == len(decisions) and facts["depth"] == 20


def test_the_smollm2_filter_on_one_conversation(locomo_path: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`jobs.annotate` with the embedded model: every call counted, the files and the
    variant written, the reference figures printed; the base folder never touched."""
    base_dir = tmp_path / "base"
    write_prepared(build("locomo", LoadRequest(source=locomo_path)), base_dir)
    before = {p.name: p.read_bytes() for p in base_dir.iterdir()}
    out = tmp_path / "annotation"
    monkeypatch.setattr(sys, "argv", [
        "annotate", "--prepared", str(base_dir), "--out", str(out), "--backbone", "smollm2",
        "--conversations", CONVERSATION, "--limit", "3", "--depth", "10"])
    assert annotate_job.main() == 0
    printed = capsys.readouterr().out
    settings = json.loads((out / SETTINGS_FILE).read_text())
    assert settings["calls"] == 3 and settings["questions"] == 3  # one batch of 10 each
    assert settings["prompt_tokens"] > 0 and settings["backbone"] == "smollm2"
    assert set(settings["reference"]["coverage"]) == {"10", "20", "50", "100"}
    assert 0 <= settings["reference"]["accepted"]["precision"] <= 1
    units = read_units(out)
    assert len(units) == 30 and {u.label for u in units} <= {"ANSWER", "BRIDGE", "NONE",
                                                             "FAILED"}
    assert "reverse-retrieval coverage @10" in printed and "precision" in printed
    variant = read_prepared(out / PREPARED_DIR)
    assert variant.manifest["annotation"]["backbone"] == "smollm2"
    assert {p.name: p.read_bytes() for p in base_dir.iterdir()} == before
    monkeypatch.setattr(sys, "argv", ["annotate", "--prepared", str(base_dir), "--out",
                                      str(base_dir), "--backbone", "smollm2"])
    with pytest.raises(DataError, match="base is never changed"):
        annotate_job.main()


def test_no_method_or_pipeline_module_imports_the_annotation() -> None:
    for package in ("methods", "pipeline", "retrieval"):
        for path in (PACKAGE / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                         else [a.name for a in node.names] if isinstance(node, ast.Import)
                         else [])
                assert not any(n.startswith("tmem_core.annotation") for n in names), path


def test_coverage_alone_calls_no_backbone(locomo_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    def no_backbone(_: str) -> None:
        raise AssertionError("--coverage opened a backbone")

    monkeypatch.setattr(annotate_job, "open_client", no_backbone)
    monkeypatch.setattr(sys, "argv", ["annotate", "--benchmark", "locomo", "--source",
                                      str(locomo_path), "--coverage", "--conversations",
                                      CONVERSATION])
    assert annotate_job.main() == 0
    lines = capsys.readouterr().out.splitlines()
    shares = [float(x) for x in lines[-1].split()[4::2]]
    assert lines[1].split()[0] == CONVERSATION and len(shares) == 4
    assert shares == sorted(shares) and shares[1] >= 0.8  # the default depth, 20
