"""Exp-2's evidence annotation (paper A.4), evaluation side: reverse retrieval from each
non-abstention question's gold answer, an LLM filter for direct support, a confidence per
unit, low-confidence units audited by a person (`jobs.view --audit`), and the accepted units
written as a new prepared variant of the benchmark. It reads gold answers by design and
feeds no method: nothing under `methods/` or `pipeline/` imports it.
"""

from tmem_core.annotation._annotate import (
    AnnotateConfig,
    Annotation,
    annotatable,
    annotate,
    content_overlap,
    reverse_query,
    reverse_retrieval,
)
from tmem_core.annotation._units import (
    AUDIT_FILE,
    LOW_CONFIDENCE_FILE,
    PREPARED_DIR,
    SETTINGS_FILE,
    UNITS_FILE,
    Unit,
    final_status,
    judged,
    read_audit,
    read_units,
    record_decision,
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
    "SETTINGS_FILE",
    "UNITS_FILE",
    "AnnotateConfig",
    "Annotation",
    "Unit",
    "annotatable",
    "annotate",
    "annotated_variant",
    "content_overlap",
    "coverage",
    "final_status",
    "judged",
    "precision_recall",
    "read_audit",
    "read_units",
    "record_decision",
    "reverse_query",
    "reverse_retrieval",
    "write_units",
]
