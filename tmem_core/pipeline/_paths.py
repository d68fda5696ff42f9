"""Where a sweep's relative paths point when the sweep runs as a Ray job.

`ray job submit --working-dir .` runs the entrypoint in Ray's unpacked copy of the working
directory (`<ray temp>/session_*/runtime_resources/working_dir_files/_ray_pkg_*`), which Ray
deletes with its session: results written there are lost, and data beside the checkout
(`../shared/...`) is not there. So a sweep reads its config's relative paths from the folder
`--paths-from` names (the submitter's checkout on a local head), and a relative `results_dir`
from the folder `TMEM_RESULTS_ROOT` names when the job's runtime env sets it (a shared volume
on a cluster); a relative `results_dir` in Ray's copy with neither is refused.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tmem_core import ConfigError

RESULTS_ENV = "TMEM_RESULTS_ROOT"
"""The folder a relative `results_dir` is read from (cluster/runtime_env.yaml and the RayJob
set it to the shared volume)."""
HINT = ("pass the folder to read them from to the entrypoint (`-- python -m jobs.sweep CONFIG "
        "--paths-from \"$PWD\"`), or set " + RESULTS_ENV + " in the job's runtime env")


def ray_copy() -> Path | None:
    """This process's working directory when it is Ray's unpacked copy of a job's."""
    cwd = Path.cwd()
    return cwd if "working_dir_files" in cwd.parts else None


def read_paths_from(folder: Path) -> None:
    """Resolve relative paths against `folder` from now on (this process and the children it
    starts), while modules are still imported from the code's own folder."""
    if not folder.is_dir():
        raise ConfigError("--paths-from", f"no such folder {folder}")
    code = str(Path.cwd())
    sys.path[:] = [code if entry in ("", ".") else entry for entry in sys.path]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [code,
                                                             os.environ.get("PYTHONPATH")]))
    os.chdir(folder)


def results_root(results_dir: str) -> str:
    """The folder a sweep's results go to: `results_dir` when absolute, else read from
    `TMEM_RESULTS_ROOT` when set, else from here, unless here is Ray's copy of a job's working
    directory (`ConfigError`)."""
    if Path(results_dir).is_absolute():
        return results_dir
    if os.environ.get(RESULTS_ENV):
        return str(Path(os.environ[RESULTS_ENV]) / results_dir)
    copy = ray_copy()
    if copy is not None:
        raise ConfigError("results_dir", f"{results_dir!r} is relative, and this sweep runs in "
                                         f"Ray's copy of its working directory ({copy}), which "
                                         f"Ray deletes with its session: {HINT}")
    return results_dir


def missing_source_hint() -> str:
    """What to add to a missing data path's error in Ray's copy of a working directory."""
    return f" (relative to Ray's copy of the job's working directory: {HINT})" if ray_copy() \
        else ""
