"""`memory_system`: register an external system, as a method of the same name."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tmem_core import ConfigError
from tmem_core.methods._context import ContextMethod
from tmem_core.methods._registry import MethodEnv, NoParams, method
from tmem_core.methods.external._method import EXTERNAL_VERSION, ExternalMemory, show_recalled
from tmem_core.methods.external._record import SystemRecord
from tmem_core.methods.external._system import P, SystemFactory, SystemSpec


def memory_system(name: str, *, description: str, config: type[Any] = NoParams,
                  extra: str | None = None, imports: Sequence[str] = (),
                  prompts: Sequence[str] = (),
                  environment: Callable[[], Mapping[str, Any]] | None = None,
                  check: Callable[[P], None] | None = None
                  ) -> Callable[[SystemFactory[P]], SystemFactory[P]]:
    """Register `factory` as the external system `name`, and the method `name` using it
    (`prompts`: the bundled prompts the system's adapter renders; `environment`: what a
    run's contract says of the system's own environment, if it has one; `check`: what the
    parameters must say beyond their defaults, checked when the method is built, a
    `ConfigError` about one of its keys reported at `methods.<name>.<key>`)."""

    def register(factory: SystemFactory[P]) -> SystemFactory[P]:
        spec = SystemSpec(name, factory, config, description, extra, tuple(imports))

        def build(env: MethodEnv, params: P, method_name: str) -> ContextMethod:
            _check_installed(spec)
            if check is not None:
                _check_params(check, params, method_name)
            return ExternalMemory(spec, params, env.index_store, env.top_k, env.budget,
                                  method_name)

        method(name, config=config, show=show_recalled, record=SystemRecord,
               version=EXTERNAL_VERSION, prompts=prompts, memory=True,
               environment=environment,
               description=f"{description} (external system; Top-k items recalled)")(build)
        return factory

    return register


def _check_params(check: Callable[[P], None], params: P, method_name: str) -> None:
    try:
        check(params)
    except ConfigError as exc:  # about one of its own keys
        raise ConfigError(f"methods.{method_name}.{exc.key}", exc.reason) from None


def _check_installed(spec: SystemSpec[Any]) -> None:
    missing = [m for m in spec.imports if importlib.util.find_spec(m) is None]
    if missing:
        hint = f": pip install -e '.[{spec.extra}]'" if spec.extra else ""
        raise ConfigError(f"methods.{spec.name}", f"method {spec.name!r} needs "
                                                  f"{', '.join(missing)}, which is not "
                                                  f"installed{hint}")
