"""`python -m jobs.plan` accepts every config of jobs/configs/tmem_paper/: the CPU twins as
they are, the API and GPU ones with their benchmarks pointed at the small native-shape
fixtures (their data lives on the cluster; Exp-5's annotated GroupMemBench: the fixture with
evidence for its Knowledge Update question). The comparators in environments of their own are
in the Exp-1 and Exp-2 rows but planned without them here: a plan samples each run through
its real stages, which for one of them is its worker's start and a whole memory's build
(49 s for one HippoRAG 2 run of Exp-2 on this machine; tests/methods/external/test_comparators.py
runs each end to end)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pyarrow as pa
import pytest

from tests.hub import stage_tokenizer
from tests.jobs.plans import plans_by_config
from tmem_core.benchmarks import LoadRequest, build, write_prepared
from tmem_core.llm import get_backbone

pytestmark = pytest.mark.slow  # every paper config's plan samples its runs through real stages

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "jobs" / "configs" / "tmem_paper"
FIXTURES = ROOT / "tests" / "fixtures"
LOCAL = {"/mnt/cache/data/GroupMemBench": FIXTURES / "groupmembench",
         "/mnt/cache/data/EverMemBench": FIXTURES / "evermembench" / "dynamic"}
CONFIGS = sorted(PAPER.glob("*_*.toml"))
ANNOTATED = "/mnt/cache/data/GroupMemBench-annotated/prepared"
ISOLATED = re.compile(r', "(?:hipporag2|a_mem|hindsight)"')


def test_exp5_declares_its_three_conditions_on_knowledge_update_questions() -> None:
    for path in sorted(PAPER.glob("exp5_*.toml")):
        benchmarks = tomllib.loads(path.read_text())["benchmarks"]
        assert [b["variant"] for b in benchmarks] == [f"revisions={n}" for n in (1, 2, 3)]
        assert all(b["categories"] == ["knowledge_update"] for b in benchmarks), path.name
        assert len({(b["name"], b.get("source"), b.get("prepared"), b.get("size"))
                    for b in benchmarks}) == 1, path.name  # one base, three conditions


def _annotated_groupmembench(folder: Path) -> Path:
    """The GroupMemBench fixture as an annotation leaves it: its Knowledge Update question
    with evidence ids (the states Exp-5's chains revise)."""
    prepared = build("groupmembench", LoadRequest(source=FIXTURES / "groupmembench"))
    rows = prepared.questions.to_pylist()
    first = prepared.messages.column("msg_id").to_pylist()[:2]
    for row in rows:
        if row["category"] == "knowledge_update":
            row["evidence_ids"] = first
    write_prepared(type(prepared)(prepared.name, prepared.messages, pa.Table.from_pylist(
        rows, schema=prepared.questions.schema), prepared.manifest), folder)
    return folder


def test_one_config_per_experiment_and_setting() -> None:
    names = {p.stem for p in CONFIGS}
    assert names == {f"{e}_{k}" for e in ("exp1", "exp2", "exp3", "exp4", "exp5", "exp6", "e2",
                                          "e3") for k in ("api", "gpu", "cpu")}
    for path in CONFIGS:
        grid = tomllib.loads(path.read_text())["grid"]
        if path.stem.endswith("_cpu"):
            assert grid["backbones"] == ["smollm2"]
            continue
        assert grid["budget"] == [8192] and 36 in grid["top_k"]
        if path.stem.startswith(("exp1", "exp2")):  # the paper's comparators we have
            wanted = {"hipporag2", "a_mem", "hindsight"} if path.stem.startswith("exp1") else {
                "hipporag2"}
            assert wanted <= set(grid["methods"]), path.stem
        api = {"gpt-5.5", "deepseek-v4-flash", "deepseek-v4.1-flash"}
        assert set(grid["backbones"]) <= (api if path.stem.endswith("_api")
                                          else {"qwen3.5-27b", "gemma4-31b"})


def test_plan_accepts_every_paper_config(tmp_path: Path) -> None:
    """One `jobs.plan` over all of them (as a user plans a study), each config's plan apart."""
    copies = {}
    annotated = _annotated_groupmembench(tmp_path / "annotated")
    for path in CONFIGS:
        text = path.read_text()
        for remote, local in LOCAL.items():
            text = text.replace(f'source = "{remote}"', f'source = "{local}"\nlimit = 1')
        text = text.replace(f'prepared = "{ANNOTATED}"', f'prepared = "{annotated}"\nlimit = 1')
        text = ISOLATED.sub("", text)
        copies[tmp_path / path.name] = tomllib.loads(text)
        (tmp_path / path.name).write_text(re.sub(r'^results_dir = .*$', "", text, flags=re.M))
    hf_home = tmp_path / "hf"  # the GPU configs' Gemma counts with its own tokenizer
    stage_tokenizer(hf_home, get_backbone("gemma4-31b").model, ["the", "launch"])
    done = subprocess.run([sys.executable, "-m", "jobs.plan", *map(str, copies), "--sample",
                           "1"], cwd=ROOT, capture_output=True, text=True, timeout=1200,
                          check=False, env={**os.environ, "HF_HOME": str(hf_home)})
    assert done.returncode == 0, done.stderr[-3000:]
    plans = plans_by_config(done.stdout)
    assert list(plans) == [str(c) for c in copies]
    for config, data in copies.items():
        grid = data["grid"]
        runs = (len(data["benchmarks"]) * len(grid["methods"]) * len(grid["backbones"])
                * len(grid["top_k"]) * len(grid["budget"]))
        lines = plans[str(config)]
        assert sum(line.startswith("run ") for line in lines) == runs, config.name
        assert any(line.startswith("total:") for line in lines), config.name

