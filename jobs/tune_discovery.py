"""Choose Temporal Evidence Discovery's density-test defaults on the development split and
report them on the rest (evaluation side: reads gold evidence).

    python -m jobs.tune_discovery --locomo ../shared/datasets/locomo/locomo10_dev.json \\
        [--out tune.json]

Development (messages with their own times): the synthetic set (2,000 messages) with seeds
100 and 101, base and interleaved, and the EverMemBench-Dynamic sample of tests/fixtures.
Reported: synthetic seeds 0-2 and every LoCoMo conversation (session-level stamps, read in
turn order on the message clock). Times are message-clock units (the conversation's median
interval between messages), so the parameters carry across time scales. The
episode rate is measured on the development split, the other parameters searched there
(`tmem_core/methods/tmem/_development.py`); the figures of both splits are printed for the
chosen parameters, per part and depth: the recall of the seeds alone, of the candidate pool
handed to selection and of the no-LLM reranker's Top-k of it, the pool's size, the intervals
kept and the share of them holding gold evidence, and the lone seeds kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from jobs._cli import run_main
from tmem_core import DataError
from tmem_core.methods.tmem import DiscoveryConfig
from tmem_core.methods.tmem._development import (
    DEPTHS,
    GRID,
    Metrics,
    Point,
    Seeded,
    by_part,
    choose,
    measure,
    seeded_questions,
    split,
)

SHOWN_POINTS = 10
EVERMEMBENCH_SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / \
    "evermembench" / "dynamic"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.tune_discovery", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--locomo", type=Path, required=True, help="LoCoMo's locomo10 file")
    parser.add_argument("--evermembench", type=Path, default=EVERMEMBENCH_SAMPLE,
                        help="an EverMemBench-Dynamic folder for the development split")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    for path in (args.locomo, args.evermembench):
        if not path.exists():
            raise DataError("no such file or folder", file=str(path))
    development = seeded_questions(split("development", args.locomo, args.evermembench))
    chosen, points = choose(development)
    print_points(points)
    print(f"chosen: {_setting(chosen)}; episode rate {chosen.episode_rate}/unit at "
          f"{chosen.reference_anchors} anchors, exponent {chosen.episode_exponent}")
    figures = {"chosen": _changed(chosen), "grid": {k: list(v) for k, v in GRID.items()},
               "points": [{**_changed(p.config), "score": p.score} for p in points]}
    for name, questions in (("development", development),
                            ("reported", seeded_questions(split("reported", args.locomo)))):
        figures[name] = print_split(name, questions, chosen)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


def print_points(points: list[Point]) -> None:
    admissible = sorted((p for p in points if p.score is not None),
                        key=lambda p: -(p.score or 0.0))
    print(f"development grid: {len(points)} points, {len(admissible)} admissible (a lone seed "
          f"in a quiet group fails from {min(DEPTHS)} anchors up); best {SHOWN_POINTS}:")
    for p in admissible[:SHOWN_POINTS]:
        print(f"  score {p.score:.4f}  {_setting(p.config)}  episode {p.config.episode_rate}/u "
              f"x (k/{p.config.reference_anchors})^{p.config.episode_exponent}")


def print_split(name: str, questions: list[Seeded], chosen: DiscoveryConfig
                ) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    print(f"== {name} split: {len(questions)} questions")
    print(f"  {'part':<32}{'k':>4}{'seeds':>7}{'pool':>7}{'top-k':>7}{'size':>6}"
          f"{'kept':>6}{'prec':>6}{'lone kept':>11}")
    for part, qs in by_part(questions).items():
        out[part] = {}
        for depth in DEPTHS:
            m = measure(qs, chosen, depth)
            out[part][str(depth)] = _metrics(m)
            print(f"  {part:<32}{depth:>4}{m.seed_recall:>7.3f}{m.pool_recall:>7.3f}"
                  f"{m.reranked_recall:>7.3f}{m.pool_size:>6.0f}{m.kept:>6}{m.precision:>6.2f}"
                  f"{f'{m.lone_kept}/{m.lone}':>11}")
    return out


def _metrics(m: Metrics) -> dict[str, float]:
    return {**dataclasses.asdict(m), "precision": m.precision}


def _setting(config: DiscoveryConfig) -> str:
    return (f"duration {config.min_duration:g} u, gap {config.max_gap:g} u, padding "
            f"{config.padding}, position {config.threshold_position:g}")


def _changed(config: DiscoveryConfig) -> dict[str, float]:
    return {k: getattr(config, k) for k in (*GRID, "episode_rate", "episode_exponent")}


if __name__ == "__main__":
    run_main(main)
