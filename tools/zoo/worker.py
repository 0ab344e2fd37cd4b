"""The zoo worker: a subprocess that measures models on request, so a crash or hang costs one process.

Protocol: one JSON object per line on stdin, ``{"model": NAME, "compilers": [...], "mode": {...}}``
(the mode as `tools.zoo.modes.Mode.to_json` writes it; absent for the default mode); the reply, one
JSON line on the process's original stdout, is `tools.zoo.run.run_model`'s result (anything
transformers, torch or Kiln print goes to stderr instead). Run as ``python -m tools.zoo.worker``;
`tools.zoo.pool` drives it.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings


def main() -> int:
    """Serve requests from stdin until it closes."""
    reply = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the protocol
    warnings.simplefilter("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from tools.zoo.modes import Mode
    from tools.zoo.run import run_model

    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            answer = run_model(request["model"], list(request["compilers"]), Mode.from_json(request.get("mode")))
        except Exception:
            answer = {"model": request.get("model"), "error": "worker error", "traceback": traceback.format_exc()[-3000:]}
        reply.write(json.dumps(answer) + "\n")
        reply.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
