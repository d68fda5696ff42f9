"""Exp-2's evidence annotation (paper A.4), evaluation side: reverse retrieval from each
non-abstention question's gold answer, an LLM filter for direct support, a confidence per
unit, units that establish the same claim grouped as interchangeable alternatives,
low-confidence units (or their groups) audited by a person (`jobs.view --audit`), and the
required groups written as a new prepared variant of the benchmark. It reads gold answers by
design and feeds no method: nothing under `methods/` or `pipeline/` imports it.
"""

from tmem_core.annotation._annotate import (
    RETRIEVERS,
    AnnotateConfig,
    Retriever,
    annotatable,
    annotate,
)
from tmem_core.annotation._groups import Group, candidate_groups, record_decision
from tmem_core.annotation._units import (
    AUDIT_FILE,
    LOW_CONFIDENCE_FILE,
    PREPARED_DIR,
    SETTINGS_FILE,
    read_audit,
    read_units,
    write_units,
)
from tmem_core.annotation._variant import (
    COVERAGE_DEPTHS,
    annotated_variant,
    coverage,
    precision_recall,
)

__all__ = [
    "AUDIT_FILE",
    "COVERAGE_DEPTHS",
    "LOW_CONFIDENCE_FILE",
    "PREPARED_DIR",
    "RETRIEVERS",
    "SETTINGS_FILE",
    "AnnotateConfig",
    "Group",
    "Retriever",
    "annotatable",
    "annotate",
    "annotated_variant",
    "candidate_groups",
    "coverage",
    "precision_recall",
    "read_audit",
    "read_units",
    "record_decision",
    "write_units",
]
