from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import source_named
from tmem_core import DataError
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table


@pytest.fixture(scope="module")
def locomo(locomo_path: Path):
    return source_named(build("locomo", LoadRequest(source=locomo_path)))


def test_counts_match_the_shared_file(locomo, locomo_path: Path) -> None:
    raw = json.loads(locomo_path.read_text())
    turns = sum(len(v) for s in raw for k, v in s["conversation"].items()
                if k.startswith("session_") and isinstance(v, list))
    assert locomo.questions.num_rows == 1347
    assert len(locomo.manifest["conversations"]) == 7
    assert locomo.messages.num_rows == turns == 4124
    assert locomo.manifest["categories"] == {
        "single-hop": 563, "adversarial": 312, "temporal": 214, "multi-hop": 192,
        "open-domain": 66}


def test_dates_parse_to_utc_and_images_keep_captions(locomo) -> None:
    msgs = {m.msg_id: m for m in messages_from_table(locomo.messages)}
    first = msgs["conv-26:D1:1"]
    assert first.timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert first.author == "Caroline" and first.session_id == "conv-26:S1"
    image = msgs["conv-26:D1:5"]
    assert "a photo of a dog walking past a wall" in image.text
    assert json.loads(image.meta or "{}")["img_url"] == ["https://i.redd.it/l7hozpetnhlb1.jpg"]


def test_answers_are_strings_and_gold_stays_out_of_questions(locomo) -> None:
    gold = gold_from_table(locomo.questions)
    assert gold["conv-26:q1"].answer == "2022"  # a number upstream
    adversarial = [g for g in gold.values() if g.answer_kind == "abstention"]
    assert len(adversarial) == 312
    public = questions_from_table(locomo.questions)[0]
    for name in ("answer", "evidence_ids", "options", "answer_kind", "gold_meta"):
        assert not hasattr(public, name)


def test_malformed_evidence_is_repaired_or_reported(locomo) -> None:
    gold = gold_from_table(locomo.questions)
    assert gold["conv-26:q37"].evidence_ids == ("conv-26:D8:6", "conv-26:D9:17")
    assert "conv-43:D11:26" in gold["conv-43:q18"].evidence_ids
    warnings = locomo.manifest["warnings"]
    assert any("conv-42:q88" in w and "unparseable" in w for w in warnings)
    assert any("conv-42:q58" in w and "no turn D10:19" in w for w in warnings)
    assert len(locomo.manifest["repairs"]) == 3


def _tweaked(locomo_path: Path, tmp_path: Path, edit) -> Path:
    raw = json.loads(locomo_path.read_text())[:1]
    edit(raw[0])
    path = tmp_path / "tweaked.json"
    path.write_text(json.dumps(raw))
    return path


def test_unseen_variations_load(locomo_path: Path, tmp_path: Path) -> None:
    def edit(sample: dict) -> None:
        sample["qa"][0]["evidence"] = ["D1:03", "d1:4 ,D1:5"]
        sample["qa"][1]["answer"] = 3.5
        sample["conversation"]["session_2_date_time"] = "10:05 am on May 25, 2023"
    prepared = source_named(build("locomo",
                                  LoadRequest(source=_tweaked(locomo_path, tmp_path, edit))))
    gold = gold_from_table(prepared.questions)
    assert gold["conv-26:q0"].evidence_ids == ("conv-26:D1:3", "conv-26:D1:4", "conv-26:D1:5")
    assert gold["conv-26:q1"].answer == "3.5"
    stamps = Counter(m.timestamp for m in messages_from_table(prepared.messages)
                     if m.session_id == "conv-26:S2")
    assert list(stamps) == [datetime(2023, 5, 25, 10, 5, tzinfo=UTC)]


@pytest.mark.parametrize(("edit", "field"), [
    (lambda s: s["conversation"].__setitem__("session_1_date_time", "someday"),
     "session_1_date_time"),
    (lambda s: s["qa"][0].pop("question"), "question"),
    (lambda s: s["qa"][0].__setitem__("category", 9), "category"),
    (lambda s: s["conversation"]["session_1"][1].__setitem__("dia_id", "D1:1"), "dia_id"),
])
def test_bad_records_name_file_record_and_field(locomo_path: Path, tmp_path: Path, edit,
                                                field: str) -> None:
    path = _tweaked(locomo_path, tmp_path, edit)
    with pytest.raises(DataError) as err:
        build("locomo", LoadRequest(source=path))
    assert err.value.field == field and err.value.file == str(path)
    assert err.value.record.startswith("conv-26")
