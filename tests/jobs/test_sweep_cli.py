"""`python -m jobs.sweep` on bad input, as a new user meets it: one `error:` line, exit 2, no
traceback, nothing written, before Ray starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobs import sweep
from jobs._cli import run_main

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"grid": '[grid]\nmethods = ["bm25"]\nbackbones = ["smollm2"]\n',
        "benchmark": '[[benchmarks]]\nname = "synthetic"\nsize = 200\n'}


def _config(tmp: Path, *, extra: str = "", grid: str = GOOD["grid"],
            benchmark: str = GOOD["benchmark"], tables: str = "", results: Path | None = None
            ) -> Path:
    path = tmp / f"bad-{len(list(tmp.glob('bad-*.toml')))}.toml"
    path.write_text(f'results_dir = "{results or tmp / "results"}"\n{extra}\n'
                    f'{benchmark}{grid}{tables}')
    return path


def _cases(tmp: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of bad input: its sweep file, and how its error line begins."""
    missing = tmp / "no-such-backbones.toml"
    unknown_backend = tmp / "backbones.toml"
    unknown_backend.write_text('[backbones.mine]\nbackend = "vlm"\nmodel = "m"\n')
    unparseable = tmp / "unparseable.toml"
    unparseable.write_text("[grid\n")
    return {
        "no sweep file": (tmp / "nowhere.toml", f"error: no such file {tmp / 'nowhere.toml'}"),
        "unparseable sweep file": (unparseable, f"error: cannot parse {unparseable}"),
        "bad method parameter": (
            _config(tmp, tables="[methods.bm25]\nbogus_param = 3\n"),
            "error: config key 'methods.bm25': unknown key 'bogus_param'; allowed: kind, "
            "metadata"),
        "bad t2mem parameter": (
            _config(tmp, grid=GOOD["grid"].replace("bm25", "t2mem"),
                    tables="[methods.t2mem]\nsearch_top_k = 0\n"),
            "error: config key 'methods.t2mem': search_top_k must be 1 or more, got 0"),
        "nested key typo": (
            _config(tmp, grid=GOOD["grid"].replace("bm25", "tmem"),
                    tables="[methods.tmem.discovery_config]\nmax_gapp = 3\n"),
            "error: config key 'methods.tmem.discovery_config': unknown key 'max_gapp'; "
            "allowed: "),
        "a parameter the variant sets": (
            _config(tmp, grid=GOOD["grid"].replace("bm25", "dense"),
                    tables='[methods.dense]\nkind = "bm25"\n'),
            "error: config key 'methods.dense.kind': set to 'dense' by the variant dense of "
            "bm25"),
        "no backbones file": (
            _config(tmp, extra=f'backbones_file = "{missing}"'),
            f"error: config key 'backbones_file': {missing}: no such file {missing}"),
        "unknown backend": (
            _config(tmp, extra=f'backbones_file = "{unknown_backend}"'),
            f"error: config key 'backbones_file': {unknown_backend}: backbones.mine.backend: "
            "unknown backend 'vlm'; allowed: embedded, openai, serve"),
        "no benchmark source": (
            _config(tmp, benchmark='[[benchmarks]]\nname = "locomo"\n'),
            "error: config key 'benchmarks[0].source': benchmark 'locomo' is read from its "
            "native files"),
        "missing benchmark source": (
            _config(tmp, benchmark=f'[[benchmarks]]\nname = "locomo"\n'
                                   f'source = "{tmp / "locomo.json"}"\n'),
            f"error: config key 'benchmarks[0].source': no such file or folder "
            f"{tmp / 'locomo.json'}"),
        "results folder that cannot be made": (
            _config(tmp, results=unparseable / "results"),
            f"error: config key 'results_dir': cannot create {unparseable}/results: "
            f"{unparseable} is not a folder"),
        "no judge": (
            _config(tmp, grid=GOOD["grid"] + "judges = []\n"),
            "error: config key 'grid.judges': an empty list judges no answer"),
        "a GPU backbone whose tokenizer is not on disk": (
            _config(tmp, grid='[grid]\nmethods = ["bm25"]\nbackbones = ["gemma4-31b"]\n'),
            "error: config key 'backbones.gemma4-31b.tokenizer': tokenizer "
            "hf:google/gemma-4-31B-it is not on disk"),
        "unknown construct backbone": (
            _config(tmp, grid='[grid]\nmethods = ["tmem"]\nbackbones = ["smollm2"]\n',
                    tables='[construct_backbones]\ntmem = "gpt9"\n'),
            "error: config key 'construct_backbones.tmem': unknown value 'gpt9'; allowed: "),
    }


CASES = ["no sweep file", "unparseable sweep file", "bad method parameter",
         "bad t2mem parameter", "nested key typo", "a parameter the variant sets",
         "no backbones file", "unknown backend", "no benchmark source",
         "missing benchmark source", "results folder that cannot be made", "no judge",
         "unknown construct backbone", "a GPU backbone whose tokenizer is not on disk"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_error_line_and_nothing_written(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    cases = _cases(tmp_path)
    assert sorted(cases) == sorted(CASES)
    config, line = cases[case]
    before = sorted(tmp_path.rglob("*"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))  # nothing staged
    monkeypatch.setattr(sys, "argv", ["jobs.sweep", str(config)])
    with pytest.raises(SystemExit) as ended:
        run_main(sweep.main)
    err = capsys.readouterr().err
    assert ended.value.code == 2
    assert err.splitlines() == [err.splitlines()[0]]  # one line
    assert err.startswith(line), err
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


def test_a_malformed_source_ends_the_driver_with_one_error_line(tmp_path: Path) -> None:
    """Found when the driver (a child of the command) prepares the data: still one line,
    exit 2, and no sweep folder."""
    source = tmp_path / "locomo.json"
    source.write_text('[{"sample_id": "conv-1"')
    config = _config(tmp_path, benchmark=f'[[benchmarks]]\nname = "locomo"\n'
                                         f'source = "{source}"\n')
    done = subprocess.run([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: file {source}: malformed JSON"), done.stderr
    assert not (tmp_path / "results").exists()

