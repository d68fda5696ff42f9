"""EverMemBench in either upstream shape, detected from the files (or named by --variant).

`eval`, the layout its evaluation code reads (EverMind-AI/EverMemBench,
eval/src/core/loaders.py and qa_loader.py):
    <root>/dataset/<batch>/dialogue.json     {"dialogues": {date: {group: [message, ...]}}}
    <root>/dataset/<batch>/qa_<batch>.json   {"qars": [{id, Q, A, task_id, options}, ...]},
                                             or the legacy {"questions": [...]} (a bare list
                                             too) of {question_id, question, answer,
                                             options: ["A. ...", ...], correct_option}
`dynamic`, the EverMemBench-Dynamic dataset release (rows: a JSON list or JSON Lines):
    <root>/<topic>/dialogue.json    rows {topic_id, date, dialogues: {group: [message] | null}}
    <root>/<topic>/qa_<topic>.json  rows {topic_id, id, Q, A, R, options}
    <root>/profiles.json            {Name, Title, Dept, ...} per person, or {"members": [...]}
A message is {speaker, time (a full timestamp), dialogue, message_index (restarting every
date)}; a question's R lists {date, group, message_index: "1, 4-5"}, resolved to message ids
as gold evidence. The evaluation code's questions carry no R (answer accuracy needs none):
they are kept without evidence, counted, and recall leaves them out. Where a question's
`task_id` names tasks that messages list in their `task_ids`, those messages are its coarse
task evidence, kept apart in its gold metadata (`task_evidence_ids`), never as evidence.
`--source` is the repository root (or its dataset/ folder), the release root, or one batch
or topic folder: one conversation per folder.
"""

from __future__ import annotations

from pathlib import Path

from tmem_core import DataError
from tmem_core.benchmarks._evermembench_conversation import Conversation, Folder, Stats
from tmem_core.benchmarks._evermembench_dialogue import SHAPES, load_dialogue
from tmem_core.benchmarks._evermembench_qa import load_qa
from tmem_core.benchmarks._registry import LoadedBenchmark, LoadRequest, benchmark
from tmem_core.evaluation import Protocol
from tmem_core.schema import Gold, Question

_EXPECTED = ("expected EverMemBench's eval-code layout (dataset/<batch>/dialogue.json with "
             "qa_<batch>.json) or the EverMemBench-Dynamic release (<topic>/dialogue.json with "
             "qa_<topic>.json, profiles.json at the root)")


def _evermembench_judge(_q: Question, g: Gold) -> str | None:
    return None if g.answer_kind == "choice" else "judge/evermembench_open"


EVERMEMBENCH = Protocol(_evermembench_judge, ("judge/evermembench_open",),
                        temporal_categories=frozenset({"F_TP"}), date_tolerance_days=1,
                        judge_notes=("multiple-choice questions are scored by their letter, "
                                     "without a judge, as eval/src/core/evaluator.py does",))


@benchmark("evermembench", protocol=EVERMEMBENCH,
           description="EverMemBench multi-group dialogues with profiles",
           fixtures_only=True)
def load_evermembench(request: LoadRequest) -> LoadedBenchmark:
    shape = _shape_option(request.variant)
    if request.source is None or not request.source.is_dir():
        raise DataError(_EXPECTED, file=str(request.source or ""))
    out = LoadedBenchmark(messages=[], questions=[])
    stats = Stats()
    for folder in _folders(request.source):
        conv = Conversation(folder, out, stats)
        load_dialogue(conv, shape)
        load_qa(conv)
    out.details.update(stats.details())
    return out


def _shape_option(variant: str) -> str | None:
    if variant in ("base", "auto"):
        return None
    if variant not in SHAPES:
        raise DataError(f"unknown evermembench variant {variant!r}: expected auto (detect from "
                        f"the files), {' or '.join(SHAPES)}")
    return variant


def _folders(source: Path) -> list[Folder]:
    if (source / "dialogue.json").is_file():
        paths = [source]
    else:
        base = source / "dataset" if (source / "dataset").is_dir() else source
        paths = sorted(p for p in base.iterdir() if (p / "dialogue.json").is_file())
    if not paths:
        raise DataError(f"{_EXPECTED}; found no dialogue.json", file=str(source))
    return [Folder(p, _qa_file(p), _profiles_file(p)) for p in paths]


def _qa_file(folder: Path) -> Path:
    found = sorted({*folder.glob("qa_*.json"), *folder.glob("qa.json")})
    if len(found) != 1:
        raise DataError(f"expected one qa_{folder.name}.json beside dialogue.json, found "
                        f"{len(found)}", file=str(folder))
    return found[0]


def _profiles_file(folder: Path) -> Path | None:
    """`profiles.json` in the folder or up to two levels above (the release root)."""
    return next((f for f in (up / "profiles.json" for up in (folder, *list(folder.parents)[:2]))
                 if f.is_file()), None)
