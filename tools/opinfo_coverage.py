"""Run torch's OpInfo database (float32, CPU samples) through inductor_ir's lower + interpret.

For every OpInfo, up to ``--samples`` sample inputs are traced with ``make_fx`` (using
``inductor_ir.decompositions()``, as the frontend does), lowered, and interpreted; the results are
compared with eager. Reports:

* matched: % of ops whose every sample's interpreted output matches eager;
* lowered: % of ops whose graphs contain no ``FallbackKernel`` (extern calls such as mm count as
  lowered; the seed draw of random ops does not count as a fallback);
* a per-op table with ``--verbose``.

Nondeterministic ops (eager differs from itself) are skipped. Usage:

    python3 tools/opinfo_coverage.py [--samples 2] [--limit N] [--only name,...] [--verbose]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir


@dataclass
class OpResult:
    """What happened to one OpInfo."""

    name: str
    samples: int = 0
    matched: int = 0
    lowered: bool = True
    skipped: str = ""
    errors: list[str] = field(default_factory=list)
    fallbacks: set[str] = field(default_factory=set)


_RANDOM = ("randint", "randperm", "bernoulli", "normal", "uniform", "exponential", "geometric", "cauchy",
           "multinomial", "rrelu_with_noise", "rand")


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def _close(a: Any, b: Any) -> bool:
    la, lb = pytree.tree_leaves(a), pytree.tree_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(y, torch.Tensor):
            if not isinstance(x, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                return False
            if not torch.allclose(x.double() if x.is_floating_point() else x, y.double() if y.is_floating_point() else y,
                                  rtol=1e-4, atol=1e-5, equal_nan=True):  # fmt: skip
                return False
        elif isinstance(y, (int, float, bool)):
            if x != y and not (isinstance(y, float) and y != y):
                return False
    return True


def _run_sample(op: Any, sample: Any, table: dict[Any, Any], result: OpResult) -> None:
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    positions = [k for k, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
    tensors = [leaves[k] for k in positions]

    def fn(*ts: torch.Tensor) -> Any:
        values = list(leaves)
        for k, t in zip(positions, ts):
            values[k] = t
        inp, args, kwargs = pytree.tree_unflatten(values, spec)
        return op.op(inp, *args, **kwargs)

    if any(t.layout != torch.strided for t in tensors):
        raise _Skip("sparse inputs")
    if op.name.startswith(("empty", "new_empty")):
        raise _Skip("uninitialized values")
    clones = [t.clone() for t in tensors]
    try:
        torch.manual_seed(0)
        expected = fn(*[t.clone() for t in tensors])
        torch.manual_seed(1)
        again = fn(*[t.clone() for t in tensors])
    except Exception as error:
        raise _Skip(f"eager fails ({type(error).__name__})") from None
    if any(isinstance(t, torch.Tensor) and t.layout != torch.strided for t in pytree.tree_leaves(expected)):
        raise _Skip("sparse outputs")
    if not _close(again, expected):
        raise _Skip("random")
    try:
        gm = make_fx(fn, decomposition_table=table)(*[t.clone() for t in tensors])
    except Exception as error:
        raise _Skip(f"make_fx cannot trace it ({type(error).__name__})") from None
    program = inductor_ir.lower(gm, clones)
    # OpInfo seeds its random ops itself; our streams differ from eager's by design (see creation.py).
    drawn = " ".join(str(getattr(b, "op", "")) for b in program.buffers)
    if any(word in drawn for word in _RANDOM):
        raise _Skip("random")
    try:
        program.check()
    except AssertionError as error:
        result.errors.append(f"lowering crashed: IR check failed: {error}")
    for message in program.lowering_errors:
        result.errors.append(f"lowering crashed: {message[:160]}")
    for buf in program.buffers:
        if type(buf) is inductor_ir.FallbackKernel and "randint" not in str(buf.op):
            result.lowered = False
            result.fallbacks.add(str(buf.op))
    torch.manual_seed(0)
    got = inductor_ir.interpret(program, [t.clone() for t in tensors])
    result.samples += 1
    if _close(got, pytree.tree_leaves(expected)):
        result.matched += 1
    else:
        result.errors.append("mismatch")


class _Skip(Exception):
    pass


def main(argv: list[str]) -> int:
    """Run the coverage and print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--only", default="")
    parser.add_argument("--timeout", type=int, default=20)
    parser.add_argument("--verbose", action="store_true")
    options = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db

    table = inductor_ir.decompositions()
    only = set(filter(None, options.only.split(",")))
    ops = [o for o in op_db if (not only or o.name in only) and torch.float32 in o.supported_dtypes("cpu")]
    if options.limit:
        ops = ops[: options.limit]
    signal.signal(signal.SIGALRM, _alarm)
    results: list[OpResult] = []
    start = time.perf_counter()
    for op in ops:
        result = OpResult((op.variant_test_name and f"{op.name}.{op.variant_test_name}") or op.name)
        results.append(result)
        signal.alarm(options.timeout)
        try:
            samples = op.sample_inputs("cpu", torch.float32, requires_grad=False)
            for k, sample in enumerate(samples):
                if k >= options.samples:
                    break
                try:
                    _run_sample(op, sample, table, result)
                except _Skip as skip:
                    result.skipped = str(skip)
                    break
                except _Timeout:
                    raise
                except Exception as error:  # a crash in our pipeline counts as a mismatch
                    result.samples += 1
                    result.errors.append(f"{type(error).__name__}: {str(error).splitlines()[0][:120] if str(error) else ''}")
        except _Timeout:
            result.errors.append("timeout")
        except Exception as error:
            result.skipped = f"no samples ({type(error).__name__})"
        finally:
            signal.alarm(0)
        if options.verbose:
            status = "skip " + result.skipped if result.skipped else f"{result.matched}/{result.samples}"
            print(f"{result.name:40s} {status:14s} lowered={result.lowered} {sorted(result.fallbacks)[:3]} {result.errors[:1]}", flush=True)
    counted = [r for r in results if not r.skipped and r.samples]
    matched = sum(1 for r in counted if r.matched == r.samples)
    lowered = sum(1 for r in counted if r.lowered and r.matched == r.samples)
    lowered_any = sum(1 for r in counted if r.lowered)
    crashes = sum(1 for r in counted if any(e != "mismatch" for e in r.errors))
    lowering_crashes = sorted({r.name for r in counted if any(e.startswith("lowering crashed") for e in r.errors)})
    print(f"OpInfo ops considered: {len(results)}; counted (deterministic, with samples): {len(counted)}")
    print(f"matched eager (every sample): {matched}/{len(counted)} = {100 * matched / max(len(counted), 1):.1f}%")
    print(f"lowered without FallbackKernel: {lowered_any}/{len(counted)} = {100 * lowered_any / max(len(counted), 1):.1f}%")
    print(f"lowered and matched: {lowered}/{len(counted)} = {100 * lowered / max(len(counted), 1):.1f}%")
    print(f"ops with a crash in lower/interpret: {crashes}; wall time {time.perf_counter() - start:.0f}s")
    print(f"ops whose lowering crashed (ran as fallbacks): {len(lowering_crashes)} {lowering_crashes[:20]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
