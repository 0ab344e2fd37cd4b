"""The background compile pool's mechanics, with stand-in jobs (no GPU: the workers write marker files)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codegen_triton.runtime.compile_pool import CompilePool, PrecompileJob
from codegen_triton.runtime.fast_launch import Variant

_TARGET = ("test", 0, 32)


def _stand_in(job: PrecompileJob, target: tuple[str, int, int]) -> bool:
    """Runs in a worker: `job.function` says what to do; a marker file records that it ran."""
    folder = Path(job.module_path)
    (folder / f"started-{job.module_name}").touch()
    if job.function == "sleep":
        time.sleep(0.3)
    elif job.function == "hang":
        time.sleep(60)
    elif job.function == "fail":
        raise RuntimeError("this variant does not compile")
    (folder / f"done-{job.module_name}").touch()
    return True


def _job(folder: Path, name: str, action: str = "ok") -> PrecompileJob:
    return PrecompileJob(str(folder), name, action, Variant(("*fp32",), (0,), (len(name),), 4, 1))


def _done(folder: Path) -> set[str]:
    return {path.name.removeprefix("done-") for path in folder.glob("done-*")}


def test_every_job_runs_once_and_wait_returns_after_it(tmp_path: Path) -> None:
    pool = CompilePool(2, _TARGET, _stand_in)
    try:
        jobs = [_job(tmp_path, f"k{i}") for i in range(7)]
        assert pool.submit(jobs) == 7
        assert pool.submit(jobs[:3]) == 0  # each job once
        for job in jobs:
            pool.wait(job, timeout=30)
            assert job.module_name in _done(tmp_path)
        assert _done(tmp_path) == {job.module_name for job in jobs}
        assert pool.pending() == 0
    finally:
        pool.close()


def test_waiting_for_a_queued_job_starts_it_first(tmp_path: Path) -> None:
    pool = CompilePool(1, _TARGET, _stand_in)
    try:
        jobs = [_job(tmp_path, f"k{i}", "sleep") for i in range(12)]
        pool.submit(jobs)
        pool.wait(jobs[-1], timeout=30)
        done = _done(tmp_path)
        assert jobs[-1].module_name in done
        # One worker, two jobs handed over at a time: the last job overtook most of the queue.
        assert len(done) <= 5, done
    finally:
        pool.close()


def test_a_failing_job_does_not_raise_in_wait(tmp_path: Path) -> None:
    pool = CompilePool(2, _TARGET, _stand_in)
    try:
        bad, good = _job(tmp_path, "bad", "fail"), _job(tmp_path, "good")
        pool.submit([bad, good])
        pool.wait(bad, timeout=30)  # the launch compiles it again and reports the real error
        pool.wait(good, timeout=30)
        assert _done(tmp_path) == {"good"}
        assert not pool.stopped
    finally:
        pool.close()


def test_a_hung_job_stops_the_pool_after_the_wait_limit(tmp_path: Path) -> None:
    pool = CompilePool(2, _TARGET, _stand_in)
    hung, later = _job(tmp_path, "hung", "hang"), _job(tmp_path, "later")
    pool.submit([hung])
    started = time.perf_counter()
    pool.wait(hung, timeout=1.0)
    assert time.perf_counter() - started < 10
    assert pool.stopped
    # A stopped pool takes no jobs and never blocks: launches compile for themselves.
    assert pool.submit([later]) == 0
    pool.wait(later, timeout=30)
    assert "later" not in _done(tmp_path)


@pytest.mark.parametrize("workers", [1, 3])
def test_close_drops_queued_jobs(tmp_path: Path, workers: int) -> None:
    pool = CompilePool(workers, _TARGET, _stand_in)
    jobs = [_job(tmp_path, f"k{i}", "sleep") for i in range(20)]
    pool.submit(jobs)
    pool.close()
    for job in jobs:
        pool.wait(job, timeout=1)  # returns at once
    time.sleep(0.5)
    assert len(_done(tmp_path)) < 20


def test_a_job_still_queued_here_can_be_claimed_by_its_launch(tmp_path: Path) -> None:
    pool = CompilePool(1, _TARGET, _stand_in)
    try:
        jobs = [_job(tmp_path, f"k{i}", "sleep") for i in range(5)]
        pool.submit(jobs)  # one worker: two jobs go to the executor, three wait here
        assert not pool.claim(jobs[0])  # a worker has it: the launch waits for it instead
        assert pool.claim(jobs[-1])  # the launch compiles it itself
        assert not pool.claim(jobs[-1])  # once
        assert not pool.claim(_job(tmp_path, "never-submitted"))
        for job in jobs[:-1]:
            pool.wait(job, timeout=30)
        assert _done(tmp_path) == {job.module_name for job in jobs[:-1]}  # the claimed job never ran
        pool.wait(jobs[-1], timeout=1)  # and waiting for it returns at once
    finally:
        pool.close()
