"""Ask one backbone one question; print the answer, the usage and the cost.

python -m jobs.llm --backbone smollm2 --prompt "What is the capital of France?"
python -m jobs.llm --backbone smollm2 --prompt "..." --schema answer.schema.json
python -m jobs.llm --backbone my-qwen --backbones-file backbones.toml --prompt "..."
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from jobs._cli import run_main
from tmem_core import ConfigError
from tmem_core.llm import ChatRequest, ChatResponse, get_backbone, open_client


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    backbone = get_backbone(args.backbone, args.backbones_file)
    schema = _schema(args.schema) if args.schema else None
    request = ChatRequest.from_prompt(args.prompt, system=args.system, schema=schema)
    with open_client(backbone, use_cache=not args.no_cache) as client:
        (response,) = client.generate([request])
    _print(response)
    return 0 if response.ok else 1


def _schema(path: Path) -> dict[str, Any]:
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError("--schema", f"cannot read {path}: {exc}") from None
    if not isinstance(schema, dict):
        raise ConfigError("--schema", f"{path}: expected a JSON object")
    return schema


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.llm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backbone", default="smollm2", help="backbone name (default smollm2)")
    parser.add_argument("--prompt", required=True, help="the user message")
    parser.add_argument("--system", help="an optional system message")
    parser.add_argument("--schema", type=Path, help="a JSON-schema file: constrain the answer")
    parser.add_argument("--backbones-file", type=Path, help="TOML/YAML file adding backbones")
    parser.add_argument("--no-cache", action="store_true", help="bypass the request cache")
    return parser


def _print(response: ChatResponse) -> None:
    if response.ok:
        print(
            json.dumps(response.parsed, indent=2) if response.parsed is not None else response.text
        )
    else:
        print(f"error: {response.error}", file=sys.stderr)
    usage = response.usage
    print(
        f"usage: prompt_tokens={usage.prompt_tokens} completion_tokens={usage.completion_tokens}"
        f" latency_s={response.latency_s:.3f} cached={response.cached}"
        f" cost_usd={response.cost_usd:.6f}"
    )


if __name__ == "__main__":
    # a schema file that cannot be read or parsed, an engine that did not start
    run_main(main)
