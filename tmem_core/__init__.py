"""tmem-eval: distributed batch evaluation of long-term conversational memory methods.

`ConfigError` is the one error of a configuration that cannot be used (a sweep or backbones
file, a registry name, a method's parameters, a job's flags): it names the key. `to_json` and
`from_json` carry typed records (a method's payloads) through the stores.
"""

from tmem_core._typed import ConfigError, from_json, to_json

__version__ = "0.1.0"
__all__ = ["ConfigError", "from_json", "to_json"]
