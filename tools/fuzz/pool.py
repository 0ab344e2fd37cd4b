"""The parent's side of a fuzz worker: start it, send requests, notice crashes and hangs, restart.

A segfault or abort in a compiled kernel (or in the compiler) kills only the worker process; the
request in flight comes back as a "crash" verdict carrying the exit signal and the tail of the
worker's stderr, and the next request starts a fresh worker. A request that outlives its timeout
kills the worker and comes back as a "hang".
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def worker_environment(cache_dir: Path, kiln_src: Path | None = None, interpret: bool = True) -> dict[str, str]:
    """The worker's environment: Triton's interpreter (any worker may triage on the triton target;
    `interpret=False` for a worker whose Triton kernels run on a GPU), a private Kiln cache, and with
    `kiln_src` (a checkout or `git archive` of Kiln) that tree's packages imported instead of the
    installed ones, so a run can pin a commit while the checkout changes."""
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"
    env["KILN_CACHE_DIR"] = str(cache_dir)
    paths = [str(ROOT)]
    if kiln_src is not None:
        paths += [str(p) for p in sorted((kiln_src / "packages").glob("*/src"))]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*paths, env.get("PYTHONPATH", "")) if p)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


class Worker:
    """One `tools.fuzz.worker` subprocess for `target`, restarted after a crash or every `recycle` requests.

    Args:
        target: the Kiln target its programs run on ("cpp", "triton", ...).
        cache_dir: the Kiln cache folder the worker uses (kept across restarts: shrinking reuses kernels).
        log_path: where the worker's stderr goes (its tail is quoted in crash verdicts).
        nice: niceness of the worker process (the machine is shared).
        recycle: requests served before a fresh process takes over (bounds memory growth).
        kiln_src: run the Kiln packages of this tree (see `worker_environment`).
    """

    def __init__(self, target: str, cache_dir: Path, log_path: Path, nice: int = 10, recycle: int = 150,
                 kiln_src: Path | None = None) -> None:
        self.target = target
        self.kiln_src = kiln_src
        self.cache_dir = cache_dir
        self.log_path = log_path
        self.nice = nice
        self.recycle = recycle
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._served = 0

    def _start(self) -> subprocess.Popen[str]:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("a")
        command = [sys.executable, "-m", "tools.fuzz.worker"]
        if self.nice:
            command = ["nice", "-n", str(self.nice), *command]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT,
            env=worker_environment(self.cache_dir, self.kiln_src, interpret=self.target != "cuda"), start_new_session=True,
        )
        log.close()
        self._lines = queue.Queue()
        stream = process.stdout
        assert stream is not None

        def pump(lines: queue.Queue[str | None]) -> None:
            for line in stream:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, args=(self._lines,), daemon=True).start()
        self._served = 0
        return process

    def close(self) -> None:
        """Stop the worker (it exits when its stdin closes; killed if it does not)."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._kill(process)

    def _kill(self, process: subprocess.Popen[str]) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # its own session: the worker and its compilers
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()

    def _stderr_tail(self, since: int, chars: int = 3000) -> str:
        """What the worker wrote to stderr after byte `since`, without torch's glog-style log lines."""
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(since)
                text = handle.read().decode(errors="replace")
        except OSError:
            return ""
        lines = [line for line in text.splitlines() if not re.match(r"[EWIF]\d{4} ", line)]
        return "\n".join(lines)[-chars:]

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def request(self, message: dict[str, Any], timeout: float, replies: int = 1) -> list[dict[str, Any]]:
        """Send `message` and collect `replies` reply objects.

        On a crash or a timeout the list ends with ``{"event": "verdict", "kind": "crash" | "hang"}``
        (after whatever replies did arrive, such as the generated program).
        """
        if self._process is not None and self._served >= self.recycle:
            self.close()
        if self._process is None or self._process.poll() is not None:
            self._process = self._start()
        process = self._process
        self._served += 1
        log_start = self._log_size()
        assert process.stdin is not None
        got: list[dict[str, Any]] = []
        try:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
        except OSError:
            pass
        while len(got) < replies:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                self._kill(process)
                self._process = None
                got.append({"event": "verdict", "kind": "hang", "detail": f"no reply in {timeout:.0f}s (killed)"})
                return got
            if line is None:
                code = process.wait()
                self._process = None
                how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                got.append({"event": "verdict", "kind": "crash", "detail": f"worker died ({how}); stderr tail:\n{self._stderr_tail(log_start)}"})
                return got
            reply = json.loads(line)
            got.append(reply)
            if reply.get("event") == "error":
                return got
        if any(reply.get("restart") for reply in got):
            self.close()  # its state is unusable (a GPU kernel asserted): the next request starts a fresh one
        return got
