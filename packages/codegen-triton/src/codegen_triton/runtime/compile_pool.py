"""Compiling kernel variants ahead of their first launch, in worker processes kept for the process's life.

Triton compiles one kernel variant in about half a second of CPU (its MLIR passes, LLVM, ptxas). A
graph's variants go to a pool of forked worker processes as soon as the graph's kernels are written;
each worker calls `triton.compile` with exactly the same source, signature and options as the launch
will, which fills Triton's on-disk cache, and the launching process then finds the kernel there.

Nothing waits for the pool when a graph is compiled: the forward graph's kernels compile while the
backward graph is traced and lowered, and the backward's while the forward first runs. A launch that
needs a variant waits for that variant's job only if a worker has it already; a job still queued here is
taken back and compiled by the launching process itself (`CompilePool.claim`). At most two jobs per worker are handed to the executor at a time (the rest wait in this
process), so a program that ends early waits at exit for a few compiles, not for a whole queue.

One pool serves the whole process (`shared_compile_pool`): forking the workers costs about half a
second, paid once, as Triton's own caches are per process.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import multiprocessing
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from codegen_triton.runtime.fast_launch import Variant, compile_variant

__all__ = ["CompilePool", "PrecompileJob", "shared_compile_pool"]

log = logging.getLogger(__name__)

_WAIT_SECONDS = 300.0
"""How long a launch waits for one job before giving up on the pool (a worker that hangs)."""


@dataclass(frozen=True)
class PrecompileJob:
    """One variant of one kernel to compile in a worker: where its module is, and the variant."""

    module_path: str
    module_name: str
    function: str
    variant: Variant


def _load_function(job: PrecompileJob) -> Any:
    module = sys.modules.get(job.module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(job.module_name, job.module_path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[job.module_name] = module
    return getattr(module, job.function)


def _run_job(job: PrecompileJob, target: tuple[str, int, int]) -> bool:
    """Compile one variant (worker side): fills Triton's disk cache, and its launcher's too."""
    from triton.backends.compiler import GPUTarget

    compiled = compile_variant(_load_function(job), job.variant, GPUTarget(*target))
    try:  # The launcher is a small C module built per signature; building it here caches it on disk.
        from triton.backends.nvidia.driver import CudaLauncher

        CudaLauncher(compiled.src, compiled.metadata)
    except Exception:
        pass
    return True


class CompilePool:
    """Forked worker processes compiling `PrecompileJob`s in the background.

    `submit(jobs)` queues jobs (each job once) and returns at once; `wait(job)` blocks until that job
    has run (or failed: the launch then compiles it itself and reports any real error). If a job takes
    longer than the wait limit, or the workers die, the pool stops and every later `wait` returns at
    once: launches compile their own variants, as without a pool.
    """

    def __init__(
        self,
        workers: int,
        target: tuple[str, int, int],
        run_job: Callable[[PrecompileJob, tuple[str, int, int]], bool] = _run_job,
    ) -> None:
        """Args: workers: processes to fork (on first submit); target: (backend, arch, warp size) of the
        GPU to compile for; run_job: what a worker runs per job (a module-level function)."""
        self.workers = max(1, workers)
        self.target = target
        self.run_job = run_job
        self.pid = os.getpid()
        self._lock = threading.RLock()  # a future done at once runs its callback in the submitting thread
        self._queued: dict[PrecompileJob, None] = {}  # waiting in this process, in submission order
        self._futures: dict[PrecompileJob, Future[bool]] = {}  # handed to the executor
        self._in_flight = 0
        self._executor: ProcessPoolExecutor | None = None
        self._stopped = False

    def submit(self, jobs: Sequence[PrecompileJob]) -> int:
        """Queue the jobs not seen before; returns how many were new."""
        new = 0
        with self._lock:
            if self._stopped:
                return 0
            for job in jobs:
                if job not in self._queued and job not in self._futures:
                    self._queued[job] = None
                    new += 1
            self._feed()
        return new

    def claim(self, job: PrecompileJob) -> bool:
        """Take back `job` if it is still queued here (not yet handed to a worker): True when the
        caller is to compile it itself.

        A launch that needs a queued variant compiles it faster in its own process than a worker
        would: the worker's executor may hold two jobs per worker ahead of it, and a variant in
        Triton's disk cache (a warm start) loads in a few milliseconds where a round trip through a
        worker costs tens (H200, a warm start of a small MLP's 15 kernels: 0.46 s waiting).
        """
        with self._lock:
            if self._stopped or job not in self._queued:
                return False
            del self._queued[job]
            return True

    def wait(self, job: PrecompileJob, timeout: float = _WAIT_SECONDS) -> None:
        """Block until `job` has run, if it was submitted; a job still queued here starts first."""
        with self._lock:
            if self._stopped:
                return
            if job in self._queued:
                del self._queued[job]
                self._start(job)
            future = self._futures.get(job)
        if future is None:
            return
        try:
            future.result(timeout=timeout)
        except FutureTimeout:
            log.warning("codegen_triton: a kernel compile job took over %.0f s; compiling without workers", timeout)
            self.close()
        except Exception:
            pass  # the launch compiles this variant again and raises the real error, if any

    @property
    def stopped(self) -> bool:
        """Whether the pool was closed (or broke): launches then compile their own variants."""
        return self._stopped

    def pending(self) -> int:
        """Jobs submitted and not yet finished."""
        with self._lock:
            return len(self._queued) + sum(1 for future in self._futures.values() if not future.done())

    def close(self) -> None:
        """Stop the workers now; queued jobs are dropped (their launches compile them)."""
        with self._lock:
            self._stopped = True
            self._queued.clear()
            executor, self._executor = self._executor, None
        if executor is not None:
            for process in list(getattr(executor, "_processes", {}).values()):
                process.terminate()
            executor.shutdown(wait=False, cancel_futures=True)

    def _feed(self) -> None:
        """Hand queued jobs to the executor while fewer than two per worker are running (lock held)."""
        while self._queued and self._in_flight < 2 * self.workers and not self._stopped:
            job = next(iter(self._queued))
            del self._queued[job]
            self._start(job)

    def _start(self, job: PrecompileJob) -> None:
        """Submit one job to the executor (lock held)."""
        executor = self._executor or self._make_executor()
        try:
            future = executor.submit(self.run_job, job, self.target)
        except RuntimeError:  # the interpreter is shutting down, or the pool broke
            self._stopped = True
            self._queued.clear()
            return
        self._futures[job] = future
        self._in_flight += 1
        future.add_done_callback(self._finished)

    def _finished(self, future: Future[bool]) -> None:
        with self._lock:
            self._in_flight -= 1
            self._feed()

    def _make_executor(self) -> ProcessPoolExecutor:
        with warnings.catch_warnings():
            # Python warns that forking a multi-threaded process may deadlock the child; the workers
            # only run Triton's compiler (no CUDA, no locks taken by the parent's threads), and a hung
            # worker stops the pool after the wait limit.
            warnings.filterwarnings("ignore", message=".*multi-threaded, use of fork", category=DeprecationWarning)
            # A worker collects garbage whatever the parent's collector state when it forked (a
            # compiler may pause it while compiling): workers live as long as the process.
            self._executor = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("fork"), initializer=gc.enable
            )
        return self._executor


_SHARED: dict[tuple[int, tuple[str, int, int], int], CompilePool] = {}
"""The process's pools by (workers, target, pid): process state, like Triton's own kernel caches."""


def shared_compile_pool(workers: int, target: Any) -> CompilePool | None:
    """This process's pool for `workers` workers and `target`; None where forking is unavailable."""
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    target_key = (str(target.backend), int(target.arch), int(target.warp_size))
    key = (workers, target_key, os.getpid())
    pool = _SHARED.get(key)
    if pool is None or pool.stopped:
        pool = _SHARED[key] = CompilePool(min(workers, os.cpu_count() or 1), target_key)
    return pool
