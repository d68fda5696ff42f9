"""tmem-eval: distributed batch evaluation of long-term conversational memory methods.

The five errors a user can meet (`ConfigError`, `DataError`, `EngineError`, `ResultsError`,
and their base `TmemError` for the rest: see `tmem_core._errors`), with the one
wording of choices (`allowed`) and of range checks (`check_range`). `to_json` and `from_json`
carry typed records (a method's payloads) through the stores.
"""

from tmem_core._errors import (
    ConfigError,
    DataError,
    EngineError,
    ResultsError,
    TmemError,
    allowed,
    check_range,
)
from tmem_core._typed import from_json, to_json

__version__ = "0.1.0"
__all__ = [
    "ConfigError",
    "DataError",
    "EngineError",
    "ResultsError",
    "TmemError",
    "allowed",
    "check_range",
    "from_json",
    "to_json",
]
