"""Run zoo models in a pool of worker subprocesses, each request with a timeout.

Each pool slot owns one `tools.zoo.worker` process and feeds it one model at a time. A model that
crashes its worker (a segfault, an abort, the OOM killer) comes back as ``{"error": "crash ..."}``
with the tail of the worker's stderr; one that outlives the timeout kills the worker and comes back
as ``{"error": "timeout ..."}``. The next model starts a fresh worker. Workers are also replaced
every `recycle` models, so that state one model leaves behind (caches, monkey patches, memory)
cannot pile up.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One `python -m tools.zoo.worker` subprocess, started on demand, niced, in its own session."""

    def __init__(self, log_path: Path, nice: int = 10, recycle: int = 8) -> None:
        self.log_path = log_path
        self.nice = nice
        self.recycle = recycle
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._served = 0

    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env["PYTHONHASHSEED"] = "0"
        env["TRANSFORMERS_VERBOSITY"] = "error"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        command = [sys.executable, "-m", "tools.zoo.worker"]
        if self.nice:
            command = ["nice", "-n", str(self.nice), *command]
        log = self.log_path.open("a")
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                   cwd=ROOT, env=env, start_new_session=True)
        log.close()
        lines: queue.Queue[str | None] = queue.Queue()
        stream = process.stdout
        assert stream is not None

        def pump() -> None:
            for line in stream:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        self._lines = lines
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
            _kill(process)

    def _stderr_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def run(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; its reply, or an error record for a crash or a timeout."""
        if self._process is not None and self._served >= self.recycle:
            self.close()
        if self._process is None or self._process.poll() is not None:
            self._process = self._start()
        process = self._process
        self._served += 1
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
        except OSError:
            pass
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            _kill(process)
            self._process = None
            return {"model": request["model"], "error": f"timeout: no result in {timeout:.0f}s (worker killed)"}
        if line is None:
            code = process.wait()
            self._process = None
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            return {"model": request["model"], "error": f"crash: worker died ({how})",
                    "traceback": self._stderr_tail()}
        return json.loads(line)  # type: ignore[no-any-return]


def _kill(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: the worker and any compiler it started
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def run_pool(models: list[str], compilers: Callable[[str], list[str]], jobs: int, timeout: float,
             on_result: Callable[[dict[str, Any]], None], nice: int = 10,
             mode: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Measure every model in `models` with `jobs` workers (in `mode`, see `tools.zoo.modes`); results in order."""
    todo: queue.Queue[tuple[int, str]] = queue.Queue()
    for index, name in enumerate(models):
        todo.put((index, name))
    results: list[dict[str, Any] | None] = [None] * len(models)
    lock = threading.Lock()
    logs = Path(tempfile.mkdtemp(prefix="kiln-zoo-"))

    def slot(number: int) -> None:
        worker = Worker(logs / f"worker{number}.log", nice=nice)
        try:
            while True:
                try:
                    index, name = todo.get_nowait()
                except queue.Empty:
                    return
                request: dict[str, Any] = {"model": name, "compilers": compilers(name)}
                if mode:
                    request["mode"] = mode
                result = worker.run(request, timeout)
                with lock:
                    results[index] = result
                    on_result(result)
        finally:
            worker.close()

    threads = [threading.Thread(target=slot, args=(n,), daemon=True) for n in range(max(1, jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [r if r is not None else {"model": models[i], "error": "not run"} for i, r in enumerate(results)]
