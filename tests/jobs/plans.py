"""Reading the output of `jobs.plan` over several configs."""

from __future__ import annotations


def plans_by_config(stdout: str) -> dict[str, list[str]]:
    """The lines of each config's plan in the output of `jobs.plan` over several configs."""
    plans: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        if line.startswith("== "):
            plans[line.removeprefix("== ")] = []
        elif plans:
            plans[list(plans)[-1]].append(line)
    return plans
