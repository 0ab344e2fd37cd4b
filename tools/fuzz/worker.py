"""The fuzz worker: a subprocess that runs programs on request, so a crash costs one process, not the run.

Protocol: one JSON object per line on stdin, replies one JSON object per line on the process's
original stdout (anything Kiln or torch prints goes to stderr instead). Requests:

* ``{"cmd": "generate", "seed": S, "target": T, "config": {...}}``: generate the program of seed S,
  reply ``{"event": "program", "program": ...}`` *before* running it (if the process then dies, the
  parent still knows which program killed it), then ``{"event": "verdict", ...}``.
* ``{"cmd": "check", "program": {...}, "target": T}``: run a given program; reply with its verdict.
* ``{"cmd": "eager", "program": {...}}``: run it eagerly only; reply whether eager raises (the
  shrinker's question, asked here because eager PyTorch itself may crash on a candidate).
* ``{"cmd": "triage", "program": {...}, "targets": [...]}``: the verdict under each target (the
  triage ladder: eager, aot_eager, cpp, triton).

Run as ``python -m tools.fuzz.worker``; `tools.fuzz.pool.Worker` drives it.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import warnings
from typing import Any, TextIO

from tools.fuzz.execute import check
from tools.fuzz.generator import GenConfig, check_eager, generate
from tools.fuzz.program import Program


def _verdict_json(program: Program, target: str) -> dict[str, Any]:
    started = time.perf_counter()
    verdict = check(program, target)
    return {
        "event": "verdict",
        "kind": verdict.kind,
        "where": verdict.where,
        "detail": verdict.detail,
        "seconds": round(time.perf_counter() - started, 3),
        "restart": verdict.kind == "skipped",  # a GPU kernel asserted: this process's CUDA context is lost
    }


def handle(request: dict[str, Any], reply: TextIO) -> None:
    """Answer one request (see the module docstring), writing reply lines to `reply`."""

    def send(message: dict[str, Any]) -> None:
        reply.write(json.dumps(message) + "\n")
        reply.flush()

    cmd = request["cmd"]
    if cmd == "generate":
        started = time.perf_counter()
        program = generate(request["seed"], GenConfig(**request.get("config", {})))
        send({"event": "program", "program": program.to_json(), "seconds": round(time.perf_counter() - started, 3)})
        send(_verdict_json(program, request.get("target", "cpp")))
    elif cmd == "eager":
        error = check_eager(Program.from_json(request["program"]))
        send({"event": "eager", "raises": error is not None, "error": "" if error is None else repr(error)[:500]})
    elif cmd == "check":
        send(_verdict_json(Program.from_json(request["program"]), request.get("target", "cpp")))
    elif cmd == "triage":
        program = Program.from_json(request["program"])
        send({"event": "triage", "verdicts": {t: _verdict_json(program, t) for t in request["targets"]}})
    else:
        send({"event": "error", "detail": f"unknown command {cmd!r}"})


def main() -> int:
    """Serve requests from stdin until it closes."""
    reply = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the protocol
    warnings.simplefilter("ignore")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            handle(request, reply)
        except Exception:
            reply.write(json.dumps({"event": "error", "detail": traceback.format_exc()[-4000:]}) + "\n")
            reply.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
