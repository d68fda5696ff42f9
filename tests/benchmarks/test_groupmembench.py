"""GroupMemBench's adapter on the synthetic fixture in the upstream repository layout."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import source_named
from tmem_core import DataError
from tmem_core.benchmarks import LoadRequest, PreparedBenchmark, build
from tmem_core.benchmarks._groupmembench import DIALOGUE_FILE, QUESTION_TYPES
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def root(fixtures: Path) -> Path:
    return fixtures / "groupmembench"


@pytest.fixture(scope="module")
def prepared(root: Path) -> PreparedBenchmark:
    return source_named(build("groupmembench", LoadRequest(source=root)))


def _domain_file(root: Path, domain: str) -> dict[str, list[dict[str, object]]]:
    path = root / "data" / "final" / domain / DIALOGUE_FILE.format(domain=domain)
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_every_message_and_every_question_of_every_type_file(root: Path,
                                                             prepared: PreparedBenchmark) -> None:
    manifest = prepared.manifest
    for domain in ("Finance", "Healthcare"):
        files = sorted((root / "questions" / domain).glob("*.jsonl"))
        lines = sum(1 for f in files for line in f.read_text().splitlines() if line.strip())
        held = sum(len(msgs) for msgs in _domain_file(root, domain).values())
        assert manifest["conversations"][domain] == {"messages": held, "questions": lines}
    assert (manifest["messages"], manifest["questions"]) == (9, 8)
    assert manifest["categories"] == {"abstention": 2, "knowledge_update": 1, "multi_hop": 1,
                                      "temporal": 2, "term_ambiguity": 1, "user_implicit": 1}
    assert set(manifest["categories"]) == set(QUESTION_TYPES)
    assert "Healthcare: no question file for multi_hop, knowledge_update, user_implicit, " \
           "term_ambiguity" in manifest["warnings"]
    questions = {q.qid: q for q in questions_from_table(prepared.questions)}
    ku = questions["Finance:knowledge_update:ku_1"]
    assert (ku.conv_id, ku.category, ku.asking_user) == ("Finance", "knowledge_update", "User_3")
    gold = gold_from_table(prepared.questions)
    assert gold["Finance:knowledge_update:ku_1"].answer == "45k"
    assert json.loads(gold["Finance:knowledge_update:ku_1"].gold_meta or "") == {
        "difficulty": "hard"}
    assert gold["Healthcare:abstention:ab_1"].answer_kind == "abstention"


def test_channels_merge_in_time_order_with_replies_resolved(prepared: PreparedBenchmark) -> None:
    msgs = [m for m in messages_from_table(prepared.messages) if m.conv_id == "Finance"]
    assert [m.msg_id for m in msgs] == [f"Finance:Msg_{i}" for i in (1, 2, 3, 4, 6, 5)]
    assert [m.timestamp.isoformat() for m in msgs[:2]] == ["2025-07-09T00:10:23+00:00",
                                                           "2025-07-09T08:45:00+00:00"]
    third = msgs[2]
    assert (third.channel, third.author, third.role, third.topic, third.phase) == (
        "Vendor Budget Review", "User_1", "Controller", "vendor budget", "Planning")
    assert [m.reply_to for m in msgs] == [None, None, "Finance:Msg_1", "Finance:Msg_2", None,
                                          None]
    assert "Finance: 1 reply_to references name no message (left empty)" in \
        prepared.manifest["warnings"]


def test_msg_nodes_repeated_across_channels_get_the_channel_number(
        prepared: PreparedBenchmark) -> None:
    msgs = [m for m in messages_from_table(prepared.messages) if m.conv_id == "Healthcare"]
    assert [(m.msg_id, m.channel) for m in msgs] == [
        ("Healthcare:c0:m1", "Ward Rota"), ("Healthcare:c1:m1", "Pharmacy Stock"),
        ("Healthcare:c0:m2", "Ward Rota")]
    assert msgs[2].reply_to == "Healthcare:c0:m1"  # its own channel's m1


def test_synthesis_annotations_are_counted_and_never_reach_messages(
        root: Path, prepared: PreparedBenchmark) -> None:
    rows = [m for d in ("Finance", "Healthcare") for msgs in _domain_file(root, d).values()
            for m in msgs]
    manifest = prepared.manifest
    assert manifest["noise_messages"] == sum(str(m["is_noise"]).lower() == "true"
                                             for m in rows) == 2
    assert manifest["decision_point_messages"] == 5
    assert manifest["withheld_message_fields"] == {
        "decision_change_metadata": 1, "decision_type": 2, "is_decision_point": 9,
        "is_noise": 9}
    assert all(m.meta is None for m in messages_from_table(prepared.messages))


@pytest.mark.parametrize("where", ["data/final", "data/final/Finance"])
def test_data_final_or_one_domain_finds_the_questions_tree(root: Path, where: str) -> None:
    prepared = source_named(build("groupmembench", LoadRequest(source=root / where)))
    counts = prepared.manifest["conversations"]
    assert counts["Finance"] == {"messages": 6, "questions": 6}
    assert len(counts) == (1 if where.endswith("Finance") else 2)


def test_a_domain_folder_with_its_questions_inside(root: Path, tmp_path: Path) -> None:
    domain = tmp_path / "Finance"
    shutil.copytree(root / "data" / "final" / "Finance", domain)
    shutil.copytree(root / "questions" / "Finance", domain / "questions")
    assert build("groupmembench", LoadRequest(source=domain)).manifest["questions"] == 6


def _without_questions(root: Path, tmp: Path) -> Path:
    shutil.copytree(root / "data" / "final", tmp / "final")
    return tmp / "final"


def _empty_question_files(root: Path, tmp: Path) -> Path:
    shutil.copytree(root, tmp / "repo")
    for path in (tmp / "repo" / "questions" / "Healthcare").glob("*.jsonl"):
        path.write_text("\n")
    return tmp / "repo"


def _unknown_question_file(root: Path, tmp: Path) -> Path:
    shutil.copytree(root, tmp / "repo")
    (tmp / "repo" / "questions" / "Finance" / "questions_all.jsonl").write_text("{}\n")
    return tmp / "repo"


def _old_flat_layout(root: Path, tmp: Path) -> Path:
    domain = tmp / "flat" / "Finance"
    domain.mkdir(parents=True)
    shutil.copy(root / "data/final/Finance/synthetic_domain_channels_rolevariants_Finance.json",
                domain / "finance_dialogue.json")
    shutil.copy(root / "questions/Finance/temporal.jsonl", domain)
    return tmp / "flat"


@pytest.mark.parametrize(("layout", "expect"), [
    (_without_questions, "no questions for domain Finance: expected "
                         "questions/Finance/<qtype>.jsonl beside data/final"),
    (_empty_question_files, "no questions for domain Healthcare"),
    (_unknown_question_file, "not a question type file"),
    (_old_flat_layout, "expected GroupMemBench's layout, data/final/<Domain>/"),
])
def test_layouts_without_questions_or_in_neither_shape_fail(root: Path, tmp_path: Path,
                                                           layout, expect: str) -> None:
    with pytest.raises(DataError, match=re.escape(expect)):
        build("groupmembench", LoadRequest(source=layout(root, tmp_path)))


def test_prepare_of_data_final_without_questions_exits_2_and_writes_nothing(
        root: Path, tmp_path: Path) -> None:
    source = _without_questions(root, tmp_path)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "jobs.prepare", "--benchmark", "groupmembench",
                           "--source", str(source), "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: file {source / 'Finance'}: no questions for domain Finance")
    assert not out.exists()
