"""Child-process entry point: serve a GGUF with xllamacpp on 127.0.0.1 until stdin closes.

Run by `EmbeddedServer`. Serving in a child process keeps a native crash away from the caller
(a Ray worker), lets the parent see a dead server and restart it, and ends the server with
its parent (stdin reaches EOF when the parent exits or dies).
"""

from __future__ import annotations

import argparse
import os
import sys

import xllamacpp


def serve(args: argparse.Namespace) -> None:
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.n_ctx
    params.n_parallel = args.n_parallel
    # One KV cache per slot (n_ctx / n_parallel tokens each): a unified cache made concurrent
    # decoding ~100x slower in this build.
    params.kv_unified = False
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads_batch
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.verbosity = 0  # errors only: the default logs every request
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    sys.stdin.read()
    # Exit without running the server's destructor: it waits for the main loop, which can hang
    # when a request was cut off. Nothing here needs flushing.
    os._exit(0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, required=True)
    parser.add_argument("--n-parallel", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--threads-batch", type=int, required=True)
    return parser


if __name__ == "__main__":
    serve(_parser().parse_args())
