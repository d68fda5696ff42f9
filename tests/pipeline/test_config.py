from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.conftest import bundled_sweep
from tmem_core import ConfigError
from tmem_core.llm import load_backbones
from tmem_core.methods import get_method, method_names
from tmem_core.pipeline import load_sweep, parse_sweep, registered
from tmem_core.pipeline._config_load import Allowed
from tmem_core.prompts import load_prompt

ALLOWED = Allowed(benchmarks=["locomo", "synthetic"], methods=["bm25", "tmem_heuristic"],
                  backbones=lambda _: ["smollm2", "qwen"])
GOOD = {"name": "s", "benchmarks": [{"name": "synthetic", "size": 300, "limit": 2}],
        "grid": {"methods": ["bm25", "tmem_heuristic"], "backbones": ["smollm2", "qwen"],
                 "top_k": [12, 36], "budget": [1024]}}


def test_grid_expands_and_ids_are_stable() -> None:
    config = parse_sweep(GOOD, ALLOWED)
    runs = config.runs()
    assert len(runs) == 2 * 2 * 2
    assert config.judges == ("smollm2",)  # default judge: the first backbone
    ids = {r.run_id for r in runs}
    assert len(ids) == 8
    assert ids == {r.run_id for r in parse_sweep(GOOD, ALLOWED).runs()}
    assert runs[0].run_id.startswith("synthetic_bm25_smollm2_k12_b1024_")


@pytest.mark.parametrize(("patch", "key", "words"), [
    ({"grid": {"methods": ["bm26"], "backbones": ["smollm2"]}}, "grid.methods",
     "allowed: bm25, tmem_heuristic"),
    ({"grid": {"methods": ["bm25"], "backbones": ["gpt9"]}}, "grid.backbones", "qwen"),
    ({"grid": {"methods": ["bm25"], "backbones": ["qwen"], "top_k": [0]}}, "grid.top_k",
     "positive"),
    ({"grid": {"methods": ["bm25"], "backbones": ["qwen"], "top_k": ["8"]}}, "grid.top_k[0]",
     "expected int, got str '8'"),
    ({"grid": {"methods": ["bm25"], "backbones": ["qwen"], "budgets": [5]}}, "grid",
     "unknown key 'budgets'; allowed: backbones, budget"),
    ({"grid": {"methods": ["bm25"], "backbones": ["qwen"], "judges": []}}, "grid.judges",
     "judges no answer"),
    ({"grid": {"methods": ["bm25"], "backbones": ["qwen"], "judges": ["gpt9"]}},
     "grid.backbones", "unknown value 'gpt9'"),
    ({"benchmarks": [{"name": "locomoo"}]}, "benchmarks[0].name", "locomo, synthetic"),
    ({"benchmarks": [{"name": "synthetic", "sise": 3}]}, "benchmarks[0]",
     "unknown key 'sise'; allowed: categories, limit, name, prepared, seed, size"),
    ({"benchmarks": [{"name": "synthetic", "limit": "x"}]}, "benchmarks[0].limit",
     "expected int, got str 'x'"),
    ({"benchmarks": [{"name": "synthetic", "limit": -1}]}, "benchmarks[0]", "0 or more"),
    ({"benchmarks": []}, "benchmarks", "non-empty"),
    ({"resources": {"llm_actorz": 2}}, "resources", "unknown key 'llm_actorz'"),
    ({"resources": {"fuse_stages": "yes"}}, "resources.fuse_stages", "expected bool"),
    ({"resources": {"engine_replicas": 0}}, "resources", "1 or more"),
    ({"methods": {"dense": {"kind": "bm25"}}}, "methods.dense", "not in grid.methods"),
    ({"extra": 1}, "", "unknown key 'extra'; allowed:"),
    ({"methods": {"bm25": {"bogus_param": 3}}}, "methods.bm25",
     "unknown key 'bogus_param'; allowed: kind, metadata"),
    ({"methods": {"tmem_heuristic": {"episode_rate": "high"}}},
     "methods.tmem_heuristic.episode_rate", "expected float, got str 'high'"),
    ({"methods": {"tmem_heuristic": {"scope": "everywhere"}}}, "methods.tmem_heuristic.scope",
     "allowed: 'interval', 'global'"),
    ({"results_dir": "/proc/version/results"}, "results_dir", "/proc/version is not a folder"),
])
def test_errors_name_the_key_and_the_allowed_values(patch: dict, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_sweep({**GOOD, **patch}, ALLOWED)
    assert err.value.key == key and words in str(err.value)


def test_yaml_and_toml_files(tmp_path: Path) -> None:
    toml = tmp_path / "a.toml"
    toml.write_text('[[benchmarks]]\nname = "synthetic"\n[grid]\nmethods = ["bm25"]\n'
                    'backbones = ["qwen"]\n')
    yml = tmp_path / "b.yaml"
    yml.write_text("benchmarks: [{name: synthetic}]\ngrid: {methods: [bm25], backbones: [qwen]}\n")
    assert load_sweep(toml, ALLOWED).name == "a"
    assert load_sweep(yml, ALLOWED).runs()[0].run_id == load_sweep(toml, ALLOWED).runs()[0].run_id
    bad = tmp_path / "c.toml"
    bad.write_text("[grid\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_sweep(bad, ALLOWED)


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parents[2].glob(
    "jobs/configs/*.toml")), ids=lambda p: p.name)
def test_example_configs_load(path: Path, tmp_path: Path) -> None:
    if path.name.startswith("backbones"):
        assert load_backbones(path)
        return
    assert load_sweep(bundled_sweep(path, tmp_path)).runs()


def test_judge_prompt_override(tmp_path: Path) -> None:
    official = tmp_path / "official.txt"
    official.write_text("# labels: CORRECT, WRONG\n[user]\n{{question}} {{answer}} {{response}}\n")
    config = parse_sweep({**GOOD, "judge_prompts": {"judge/synthetic": str(official)}}, ALLOWED)
    assert config.runs()[0].judge_prompts == {"judge/synthetic": str(official)}
    assert config.runs()[0].run_id != parse_sweep(GOOD, ALLOWED).runs()[0].run_id
    unused = parse_sweep({**GOOD, "judge_prompts": {"judge/locomo": str(official)}}, ALLOWED)
    assert unused.runs()[0].run_id == parse_sweep(GOOD, ALLOWED).runs()[0].run_id
    with pytest.raises(ConfigError) as err:
        parse_sweep({**GOOD, "judge_prompts": {"judge/locomo": str(tmp_path / "no.txt")}},
                    ALLOWED)
    assert err.value.key == "judge_prompts.judge/locomo"


def test_a_methods_definition_version_enters_its_run_identity(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A redefined method (version past 1) never shares a run id, and so never resumes the
    records, of its older definition; methods at version 1 keep the ids they had."""
    from tmem_core.methods import _registry

    runs = {r.method: r for r in parse_sweep(GOOD, ALLOWED).runs()}
    assert runs["tmem_heuristic"].identity()["method_version"] == 4
    ids = {method: run.run_id for method, run in runs.items()}
    older = dataclasses.replace(_registry.get_method("tmem_heuristic"), version=1)
    monkeypatch.setitem(_registry.METHODS._specs, "tmem_heuristic", older)
    again = {r.method: r for r in parse_sweep(GOOD, ALLOWED).runs()}
    assert again["tmem_heuristic"].run_id != ids["tmem_heuristic"]
    assert again["bm25"].run_id == ids["bm25"]


def test_an_edited_judge_prompt_file_is_another_run(tmp_path: Path) -> None:
    official = tmp_path / "official.txt"
    official.write_text("[user]\nQuestion: {question}\nGold: {gold_answer}\n"
                        "Generated: {generated_answer}\n")  # upstream's placeholders
    first = parse_sweep({**GOOD, "judge_prompts": {"judge/synthetic": str(official)}}, ALLOWED)
    identity = first.runs()[0].identity()["judge_prompts"]["judge/synthetic"]
    assert identity == {"file": str(official), "sha256": load_prompt(str(official)).sha256}
    edited = tmp_path / "edited.txt"
    edited.write_text(official.read_text() + "Answer CORRECT or WRONG.\n")
    second = parse_sweep({**GOOD, "judge_prompts": {"judge/synthetic": str(edited)}}, ALLOWED)
    assert second.runs()[0].identity()["judge_prompts"]["judge/synthetic"]["sha256"] != \
        identity["sha256"]


@pytest.mark.parametrize(("text", "words"), [
    ("[user]\nQ: {query} A: {gold_answer} R: {response}\n", "placeholder {query} names none"),
    ("[user]\nQ: {question} R: {generated_answer}\n", "this one fills question, response"),
    ("[user]\nQ: {question} A: {answer} R: {response\n", "not a str.format template"),
])
def test_a_judge_prompt_file_that_cannot_judge_is_a_config_error(tmp_path: Path, text: str,
                                                                  words: str) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    with pytest.raises(ConfigError) as err:
        parse_sweep({**GOOD, "judge_prompts": {"judge/locomo": str(bad)}}, ALLOWED)
    assert err.value.key == "judge_prompts.judge/locomo" and words in str(err.value)


def test_a_revised_method_carries_its_version_in_the_run_identity() -> None:
    runs = {r.method: r for r in parse_sweep({**GOOD, "grid": {
        "methods": ["bm25", "bm25_meta", "recent_context"], "backbones": ["smollm2"]}},
        registered()).runs()}
    assert get_method("bm25").version == 2  # its query now names the asking user
    assert runs["bm25"].identity()["method_version"] == 2
    assert runs["bm25_meta"].identity()["method_version"] == 2  # a variant of the family
    assert "method_version" not in runs["recent_context"].identity()  # never revised


def test_the_old_name_of_recent_context_is_refused_with_the_new_one() -> None:
    grid = {"methods": ["bm25", "full_context"], "backbones": ["smollm2"]}
    with pytest.raises(ConfigError, match="'full_context' is now 'recent_context'") as err:
        parse_sweep({**GOOD, "grid": grid}, registered())
    assert err.value.key == "grid.methods"
    with pytest.raises(ConfigError, match="use 'recent_context'"):
        get_method("full_context")


CONSTRUCTED = {**GOOD, "grid": {"methods": ["tmem", "bm25"], "backbones": ["smollm2", "qwen"]}}


def test_a_construct_backbone_is_part_of_its_methods_runs_only() -> None:
    allowed = Allowed(benchmarks=["synthetic"], methods=method_names(),
                      backbones=lambda _: ["smollm2", "qwen"])
    plain = {(r.method, r.backbone): r for r in parse_sweep(CONSTRUCTED, allowed).runs()}
    given = {(r.method, r.backbone): r for r in parse_sweep(
        {**CONSTRUCTED, "construct_backbones": {"tmem": "qwen"}}, allowed).runs()}
    assert all(r.construct_backbone is None and "construct_backbone" not in r.identity()
               for r in plain.values())
    for key, run in given.items():
        if key[0] == "bm25":  # no construct backbone: the run it always was
            assert run.run_id == plain[key].run_id and run.construct_backbone is None
        else:  # the same backbone constructing is still a setting the run records
            assert run.run_id != plain[key].run_id and run.construct_backbone == "qwen"
            assert run.backbone_names == tuple(dict.fromkeys((key[1], "qwen", "smollm2")))


@pytest.mark.parametrize(("table", "words"), [
    ({"tmem": "gpt9"}, "unknown value 'gpt9'; allowed: qwen, smollm2"),
    ({"bm25": "qwen"}, "calls no LLM in its memory or construction"),
    ({"t2mem": "qwen"}, "a method not in grid.methods (tmem, bm25)"),
    ({"tmem": 3}, "expected str"),
])
def test_a_bad_construct_backbone_names_its_key(table: dict[str, object], words: str) -> None:
    allowed = Allowed(benchmarks=["synthetic"], methods=method_names(),
                      backbones=lambda _: ["smollm2", "qwen"])
    with pytest.raises(ConfigError) as err:
        parse_sweep({**CONSTRUCTED, "construct_backbones": table}, allowed)
    assert err.value.key.startswith(f"construct_backbones.{next(iter(table))}")
    assert words in str(err.value), err.value


def test_every_judge_prompt_of_the_benchmark_is_in_the_run_identity() -> None:
    """The official prompts judge by default (each by name and hash in the run's identity);
    the project's paraphrase is chosen by name, and is another run."""
    locomo = {**GOOD, "benchmarks": [{"name": "locomo", "source": "locomo10.json"}]}
    official = parse_sweep(locomo, ALLOWED, sources=False).runs()[0]
    assert official.identity()["judge_prompts"] == {
        "judge/locomo": {"prompt": "judge/locomo@v2",
                         "sha256": load_prompt("judge/locomo@v2").sha256}}
    project = parse_sweep({**locomo, "judge_prompts": {"judge/locomo": "judge/locomo@v1"}},
                          ALLOWED, sources=False).runs()[0]
    assert project.identity()["judge_prompts"]["judge/locomo"] == {
        "prompt": "judge/locomo@v1", "sha256": load_prompt("judge/locomo@v1").sha256}
    assert project.run_id != official.run_id
    with pytest.raises(ConfigError) as err:
        parse_sweep({**locomo, "judge_prompts": {"judge/locomo": "judge/locomo@v9"}}, ALLOWED,
                    sources=False)
    assert err.value.key == "judge_prompts.judge/locomo" and "no version 9" in str(err.value)


def test_self_judged_runs_are_judged_by_their_own_backbone() -> None:
    grid = {**GOOD["grid"], "judges": "self"}  # type: ignore[dict-item]
    config = parse_sweep({**GOOD, "grid": grid}, ALLOWED)
    assert {(r.backbone, r.judges) for r in config.runs()} == {
        ("smollm2", ("smollm2",)), ("qwen", ("qwen",))}
    assert config.judges == ("smollm2", "qwen")
    fixed = parse_sweep({**GOOD, "grid": {**grid, "judges": ["qwen"]}}, ALLOWED)
    assert {r.judges for r in fixed.runs()} == {("qwen",)}
    with pytest.raises(ConfigError) as err:
        parse_sweep({**GOOD, "grid": {**grid, "judges": "mine"}}, ALLOWED)
    assert err.value.key == "grid.judges" and "'self'" in str(err.value)
