"""EverMemBench's adapter on synthetic fixtures in both upstream shapes: the eval code's
`dataset/<batch>/` and the EverMemBench-Dynamic release's topic folders."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobs.prepare import main as prepare_main
from tests.conftest import source_named
from tmem_core import DataError
from tmem_core.benchmarks import LoadRequest, PreparedBenchmark, build, read_prepared
from tmem_core.benchmarks._evermembench_qa import CATEGORIES
from tmem_core.benchmarks._evidence import parse_index_ranges
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table


@pytest.fixture(scope="module")
def eval_root(fixtures: Path) -> Path:
    return fixtures / "evermembench" / "eval"


@pytest.fixture(scope="module")
def dynamic_root(fixtures: Path) -> Path:
    return fixtures / "evermembench" / "dynamic"


@pytest.fixture(scope="module")
def dynamic(dynamic_root: Path) -> PreparedBenchmark:
    return source_named(build("evermembench", LoadRequest(source=dynamic_root)))


def _rows(path: Path) -> Any:
    text = path.read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _held(folder: Path) -> tuple[int, int]:
    """Messages and questions in a fixture folder, counted from its files."""
    raw = _rows(folder / "dialogue.json")
    days = raw["dialogues"].values() if isinstance(raw, dict) else [r["dialogues"] for r in raw]
    messages = sum(len(msgs or []) for groups in days for msgs in groups.values())
    (qa,) = folder.glob("qa_*.json")
    questions = _rows(qa)
    items = next(iter(questions.values())) if isinstance(questions, dict) else questions
    return messages, len(items)  # {"qars": [...]}, {"questions": [...]} or rows


def _every_question_resolved(prepared: PreparedBenchmark) -> None:
    ids = {m.msg_id for m in messages_from_table(prepared.messages)}
    gold = gold_from_table(prepared.questions)
    assert all(g.evidence_ids and set(g.evidence_ids) <= ids for g in gold.values())
    assert prepared.manifest["unresolved_references"] == 0


@pytest.mark.parametrize("where", ["", "dataset", "dataset/004"])
def test_eval_code_layout_from_the_root_the_dataset_folder_or_a_batch(eval_root: Path,
                                                                      where: str) -> None:
    prepared = source_named(build("evermembench", LoadRequest(source=eval_root / where)))
    assert prepared.manifest["conversations"] == {
        "004": dict(zip(("messages", "questions"), _held(eval_root / "dataset" / "004"),
                        strict=True))}
    assert (prepared.manifest["messages"], prepared.manifest["questions"]) == (5, 3)
    assert prepared.manifest["shapes"] == {"004": "eval"}
    assert prepared.manifest["question_formats"] == {"004": "qars"}
    # upstream's qars carry no R: every question is kept, none with evidence, none a warning
    assert prepared.manifest["questions_without_evidence"] == 3
    assert all(not g.evidence_ids for g in gold_from_table(prepared.questions).values())
    assert prepared.manifest["warnings"] == ["004: no profile for Tomas Ruiz"]


def test_eval_code_timestamps_ranges_choices_and_profiles(eval_root: Path) -> None:
    prepared = source_named(build("evermembench", LoadRequest(source=eval_root)))
    msgs = messages_from_table(prepared.messages)
    assert [m.timestamp for m in msgs[1:3]] == [
        datetime(2025, 1, 9, 9, 40, 2, tzinfo=UTC),  # T form
        datetime(2025, 1, 9, 10, 5, 0, 250_000, tzinfo=UTC)]  # fractional seconds
    assert (msgs[0].msg_id, msgs[0].channel, msgs[0].session_id) == (
        "004:2025-01-09:Group1:1", "Group 1", "004:2025-01-09")
    assert (msgs[0].author, msgs[0].role, json.loads(msgs[0].meta or "")) == (
        "Weihua Zhang", "Product Director", {"Dept": "Product"})  # from {"members": [...]}
    assert msgs[2].role is None and "004: no profile for Tomas Ruiz" in \
        prepared.manifest["warnings"]
    assert prepared.manifest["withheld_message_fields"] == {"task_ids": 5}
    assert all("T00" not in (m.meta or "") + m.text for m in msgs)  # task ids stay gold-only
    gold = gold_from_table(prepared.questions)
    choice = gold["004:F_TP_Top004_002"]
    assert (choice.answer_kind, choice.answer) == ("choice", "C")
    assert [(o.label, o.text) for o in choice.options or ()][2] == ("C", "Wednesday 15 January")
    assert gold["004:F_SH_Top004_001"].answer_kind == "text"


def test_task_ids_are_coarse_task_evidence_apart_from_evidence(eval_root: Path) -> None:
    prepared = source_named(build("evermembench", LoadRequest(source=eval_root)))
    gold = gold_from_table(prepared.questions)
    tasks = {qid: json.loads(g.gold_meta or "") for qid, g in gold.items()}
    assert tasks["004:F_TP_Top004_002"]["task_id"] == "T002"
    assert tasks["004:F_TP_Top004_002"]["task_evidence_ids"] == [
        "004:2025-01-09:Group1:1", "004:2025-01-10:Group1:1"]
    assert tasks["004:MA_U_Top004_003"]["task_evidence_ids"] == [  # a list, and a string
        "004:2025-01-09:Group1:2", "004:2025-01-10:Group1:1", "004:2025-01-10:Group1:2"]
    assert tasks["004:F_SH_Top004_001"]["task_evidence_ids"] == ["004:2025-01-09:Group2:1"]
    assert all(g.evidence_ids == () for g in gold.values())  # never mixed with R evidence
    assert prepared.manifest["questions_with_task_evidence"] == 3


@pytest.fixture(scope="module")
def legacy_root(fixtures: Path) -> Path:
    return fixtures / "evermembench" / "legacy"


def _bare_list(legacy_root: Path, tmp: Path) -> Path:
    """The legacy batch with its questions as a bare list (upstream reads both)."""
    copy = _copy(legacy_root, tmp)
    qa = copy / "dataset" / "005" / "qa_005.json"
    qa.write_text(json.dumps(json.loads(qa.read_text())["questions"]))
    return copy


@pytest.mark.parametrize(("layout", "batch", "found"), [
    ("eval", "004", "qars"), ("legacy", "005", "legacy"), ("bare list", "005", "legacy")])
def test_jobs_prepare_reads_every_message_and_question_of_either_format(
        fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys:
        pytest.CaptureFixture[str], layout: str, batch: str, found: str) -> None:
    root = fixtures / "evermembench" / layout.replace("bare list", "legacy")
    source = _bare_list(root, tmp_path) if layout == "bare list" else root
    monkeypatch.setattr(sys, "argv", ["jobs.prepare", "--benchmark", "evermembench",
                                      "--source", str(source), "--out", str(tmp_path / "out")])
    assert prepare_main() == 0
    held = _held(root / "dataset" / batch)
    assert f"evermembench: {held[0]} messages, {held[1]} questions" in capsys.readouterr().out
    manifest = read_prepared(tmp_path / "out" / "evermembench").manifest
    assert manifest["conversations"] == {batch: {"messages": held[0], "questions": held[1]}}
    assert manifest["question_formats"] == {batch: found}
    assert manifest["questions_without_evidence"] == held[1]  # no R in either format


def test_legacy_questions_keep_upstreams_choices_and_types(legacy_root: Path) -> None:
    prepared = build("evermembench", LoadRequest(source=legacy_root))
    gold = gold_from_table(prepared.questions)
    demo, lars, budget = (gold[f"005:{q}"] for q in ("005_mc_001", "005_mc_002", "005_oe_003"))
    assert (demo.answer_kind, demo.answer) == ("choice", "B")  # correct_option
    assert [(o.label, o.text) for o in demo.options or ()][1] == ("B", "Thursday at 14")
    assert lars.answer == "C"  # no correct_option: inferred from the answer, as upstream does
    assert json.loads(lars.gold_meta or "")["answer_text"] == "The security questionnaire"
    assert (budget.answer_kind, budget.answer) == ("text", "40k")
    assert json.loads(budget.gold_meta or "")["difficulty"] == "easy"
    assert all(not g.evidence_ids for g in gold.values())
    categories = {q.qid: q.category for q in questions_from_table(prepared.questions)}
    assert categories == {"005:005_mc_001": "multiple_choice", "005:005_mc_002":
                          "multiple_choice", "005:005_oe_003": "open_ended"}
    assert prepared.manifest["warnings"] == []


def test_dynamic_release_every_message_question_and_reference(
        dynamic_root: Path, dynamic: PreparedBenchmark) -> None:
    manifest = dynamic.manifest
    for topic in ("01", "02"):
        messages, questions = _held(dynamic_root / topic)
        assert manifest["conversations"][topic] == {"messages": messages,
                                                    "questions": questions}
    assert (manifest["messages"], manifest["questions"]) == (13, 10)
    assert manifest["shapes"] == {"01": "dynamic", "02": "dynamic"}  # 02 is JSON Lines
    assert manifest["null_groups"] == 5
    assert manifest["warnings"] == []
    _every_question_resolved(dynamic)
    gold = gold_from_table(dynamic.questions)
    assert gold["01:F_TP_Top001_003"].evidence_ids == (  # "1, 4-5", then the next day's "1"
        "01:2025-03-03:Group1:1", "01:2025-03-03:Group1:4", "01:2025-03-03:Group1:5",
        "01:2025-03-04:Group1:1")
    assert gold["02:P_Skill_Top002_004"].evidence_ids == ("02:2025-04-01:Group1:2",)  # "group 1"
    assert gold["02:P_Style_Top002_003"].answer == "B"  # given as "b"


def test_message_index_restarts_every_date_without_colliding(dynamic: PreparedBenchmark) -> None:
    firsts = [m.msg_id for m in messages_from_table(dynamic.messages)
              if m.conv_id == "01" and m.msg_id.endswith(":1")]
    assert firsts == ["01:2025-03-03:Group1:1", "01:2025-03-03:Group2:1",
                      "01:2025-03-04:Group1:1", "01:2025-03-04:Group3:1"]


def test_categories_are_the_benchmarks_tasks_under_its_three_capabilities(
        dynamic: PreparedBenchmark) -> None:
    questions = questions_from_table(dynamic.questions)
    assert sorted(q.category for q in questions) == sorted(CATEGORIES)
    assert dynamic.manifest["capabilities"] == {"Fine-grained Recall": 4,
                                                "Memory Awareness": 3,
                                                "Profile Understanding": 3}


def test_profiles_joined_by_name_in_any_key_case_and_scoped_by_topic(
        dynamic: PreparedBenchmark) -> None:
    roles = {(m.conv_id, m.author): (m.role, m.meta) for m in
             messages_from_table(dynamic.messages)}
    assert roles[("01", "Alice Chen")] == ("Engineering Manager", '{"Dept": "Platform"}')
    assert roles[("02", "Chidi Okafor")] == ("Security Lead", '{"Dept": "Security"}')  # TITLE
    assert roles[("02", "Dana Kim")] == ("QA Engineer", '{"dept": "Quality"}')  # "dana kim"
    assert dynamic.manifest["withheld_profile_fields"] == {"Style": 2}  # persona, not shown


def test_a_named_shape_must_match_the_files(dynamic_root: Path) -> None:
    forced = source_named(build("evermembench",
                                LoadRequest(source=dynamic_root, variant="dynamic")))
    assert forced.manifest["questions"] == 10
    with pytest.raises(DataError, match=re.escape("expected the eval shape")):
        build("evermembench", LoadRequest(source=dynamic_root, variant="eval"))
    with pytest.raises(DataError, match="unknown evermembench variant 'v2'"):
        build("evermembench", LoadRequest(source=dynamic_root, variant="v2"))


def test_qars_with_references_resolve_them_and_warn_of_the_rest(eval_root: Path,
                                                                tmp_path: Path) -> None:
    root = _copy(eval_root, tmp_path)
    qa = root / "dataset" / "004" / "qa_004.json"
    data = json.loads(qa.read_text())
    data["qars"][0]["R"] = [{"date": "2025-01-09", "group": "Group 2", "message_index": "1, 9"}]
    data["qars"][1]["R"] = [{"date": "2025-01-09", "group": "Group 1", "message_index": "1"},
                            {"date": "2025-01-10", "group": "Group 1", "message_index": "1-2"}]
    qa.write_text(json.dumps(data))
    prepared = source_named(build("evermembench", LoadRequest(source=root)))
    gold = gold_from_table(prepared.questions)
    assert gold["004:F_SH_Top004_001"].evidence_ids == ("004:2025-01-09:Group2:1",)
    assert gold["004:F_TP_Top004_002"].evidence_ids == (
        "004:2025-01-09:Group1:1", "004:2025-01-10:Group1:1", "004:2025-01-10:Group1:2")
    assert gold["004:MA_U_Top004_003"].evidence_ids == ()  # no R: without evidence
    assert prepared.manifest["questions_without_evidence"] == 1
    assert "004:F_SH_Top004_001: no message 9 in Group 2 on 2025-01-09" in \
        prepared.manifest["warnings"]


def test_index_ranges() -> None:
    assert parse_index_ranges("1, 4-5") == ([1, 4, 5], [])
    assert parse_index_ranges(["2", 7, "3 \u2013 4"]) == ([2, 7, 3, 4], [])
    assert parse_index_ranges("5-3; x 6") == ([6], ["5-3", "x"])
    assert parse_index_ranges(None) == ([], [])


BATCH = "dataset/004"


def _copy(root: Path, tmp: Path) -> Path:
    shutil.copytree(root, tmp / root.name)
    return tmp / root.name


def _edit(path: str, change: Callable[[Any], Any]) -> Callable[[Path, Path], Path]:
    """A layout: the eval fixture with one file's JSON changed (a string: its new text)."""
    def layout(root: Path, tmp: Path) -> Path:
        copy = _copy(root, tmp)
        target = copy / path
        new = change(json.loads(target.read_text()))
        target.write_text(new if isinstance(new, str) else json.dumps(new))
        return copy
    return layout


def _strip_message_index(root: Path, tmp: Path) -> Path:
    """References on the questions, none of which can resolve: no message_index."""
    copy = _edit(f"{BATCH}/qa_004.json", _with_references)(root, tmp)
    target = copy / BATCH / "dialogue.json"
    data = json.loads(target.read_text())
    for groups in data["dialogues"].values():
        for msgs in groups.values():
            for msg in msgs:
                msg.pop("message_index")
    target.write_text(json.dumps(data))
    return copy


def _with_references(data: Any) -> Any:
    for item in data["qars"]:
        item["R"] = [{"date": "2025-01-09", "group": "Group 1", "message_index": "1"}]
    return data


def _repeat_message_index(data: Any) -> Any:
    data["dialogues"]["2025-01-09"]["Group 1"][1]["message_index"] = 1
    return data


def _no_qa(root: Path, tmp: Path) -> Path:
    copy = _copy(root, tmp)
    (copy / "dataset" / "004" / "qa_004.json").unlink()
    return copy


def _empty(root: Path, tmp: Path) -> Path:
    (tmp / "empty" / "dataset").mkdir(parents=True)
    return tmp / "empty"


@pytest.mark.parametrize(("layout", "expect"), [
    (_strip_message_index,
     "no question's R references resolve to a message: expected R = [{date, group, "
     "message_index}]"),
    (_edit(f"{BATCH}/dialogue.json", _repeat_message_index),
     "field message_index: message_index 1 repeats in Group 1 on 2025-01-09"),
    (_edit(f"{BATCH}/dialogue.json", lambda d: {"days": d["dialogues"]}),
     "neither EverMemBench shape"),
    (_edit(f"{BATCH}/dialogue.json", lambda d: '{\n  "dialogues": {\n'),
     "malformed JSON at line 3"),
    (_edit(f"{BATCH}/qa_004.json", lambda d: {"qars": []}), "with at least one question"),
    (_edit(f"{BATCH}/profiles.json", lambda d: {"members": [{"Title": "CTO"}]}),
     "expected profiles with a Name"),
    (_no_qa, "expected one qa_004.json beside dialogue.json, found 0"),
    (_empty, "expected EverMemBench's eval-code layout (dataset/<batch>/dialogue.json"),
])
def test_layouts_without_evidence_or_in_neither_shape_fail(eval_root: Path, tmp_path: Path,
                                                           layout, expect: str) -> None:
    source = layout(eval_root, tmp_path)
    with pytest.raises(DataError, match=re.escape(expect)) as caught:
        build("evermembench", LoadRequest(source=source))
    assert str(source) in caught.value.file
