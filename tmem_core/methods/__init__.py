"""Memory methods: one interface, evidence for a question under a budget.

Baselines live in `baselines`, T-MEM in `tmem`; `make_method` builds one by name.
"""

from tmem_core.methods._base import Evidence, EvidenceMethod, evidence
from tmem_core.methods._registry import METHOD_NAMES, make_method

__all__ = ["METHOD_NAMES", "Evidence", "EvidenceMethod", "evidence", "make_method"]
