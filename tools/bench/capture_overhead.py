"""Per-call overhead of a cached compiled function: eager vs torch.compile(backend="eager") vs capture.

The function takes 10 tiny tensors and adds them up; after warm-up every call hits the cache, so
the difference to eager is the cost of the guard checks and the dispatch to the compiled graph.

With `--bert`, also a transformers BertModel (hidden 768, 12 layers, batch 1 x 16 tokens, eval,
no_grad) through `frontend.compile(model, backend="eager")`: its per-call overhead over eager, and
the guard check alone (the fast generated function vs checking every guard on its own, the way
guards were checked before session 2's guard work).

    python3 tools/bench/capture_overhead.py [--calls 20000] [--repeats 5] [--bert] [--bert-calls 30] [--clock cpu]
    python3 tools/bench/capture_overhead.py --plain-guards   # the old guard-by-guard check, to compare

The three variants are timed interleaved (each round runs every variant in turn; a variant's best
round counts), so load from other processes on a shared machine hits them alike.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

import capture


def ten_inputs(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):  # type: ignore[no-untyped-def]
    """The benchmarked function: 9 additions over 10 tiny tensors."""
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9


def _eager_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return gm.forward


def per_call_microseconds(fn: Callable[..., Any], inputs: list[torch.Tensor], calls: int, repeats: int,
                          warmup: int = 200, clock: Callable[[], float] = time.perf_counter) -> float:
    """Best-of-`repeats` mean time per call, in microseconds."""
    return interleaved_microseconds({"fn": fn}, inputs, calls, repeats, warmup, clock)["fn"]


def interleaved_microseconds(candidates: dict[str, Callable[..., Any]], inputs: list[torch.Tensor], calls: int,
                             rounds: int, warmup: int = 200,
                             clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Best-of-`rounds` mean time per call of each candidate, in microseconds, timed interleaved."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn(*inputs)
    best = dict.fromkeys(candidates, float("inf"))
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = clock()
            for _ in range(calls):
                fn(*inputs)
            best[name] = min(best[name], (clock() - start) / calls)
    return {name: value * 1e6 for name, value in best.items()}


def bert_overhead(calls: int, repeats: int) -> None:
    """BertModel-base per-call overhead of `frontend.compile(backend="eager")`, and its guard check alone."""
    from transformers import BertConfig, BertModel

    import frontend
    from capture.cache import DEFAULT_CACHE, bind_frame_arguments
    from capture.guards import compile_guards, compile_guards_plainly

    torch.manual_seed(0)
    model = BertModel(BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                 intermediate_size=3072)).eval()
    ids = torch.randint(0, 1000, (1, 16))
    compiled = frontend.compile(model, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(ids).last_hidden_state, model(ids).last_hidden_state)
        eager = per_call_microseconds(model, [ids], calls, repeats, warmup=5)
        ours = per_call_microseconds(compiled, [ids], calls, repeats, warmup=5)
        entries = [e for state in DEFAULT_CACHE.states.values() for e in state.entries]
        fn = type(model).forward
        frame = (bind_frame_arguments(fn, (model, ids), {}), fn.__globals__, fn.__closure__)
        guards = max(entries, key=lambda e: len(e.guard_set.guards)).guard_set
        fast, plain = compile_guards(guards), compile_guards_plainly(guards)
        assert fast(*frame) and plain(*frame)
        checks = {name: per_call_microseconds(lambda check=check: check(*frame), [], 200, repeats)
                  for name, check in (("fast", fast), ("plain", plain))}
    print(f"BertModel-base (12 layers, 1x16 tokens, eval): eager {eager:.0f} us/call, "
          f'frontend.compile(backend="eager") {ours:.0f} us/call, overhead {ours - eager:.0f} us')
    print(f"  guard check alone ({len(guards.guards)} guards): fast {checks['fast']:.1f} us, "
          f"guard by guard {checks['plain']:.1f} us ({checks['plain'] / checks['fast']:.0f}x)")


def main() -> None:
    """Print the side-by-side table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bert", action="store_true", help="also measure a BertModel-base")
    parser.add_argument("--bert-calls", type=int, default=30)
    parser.add_argument("--plain-guards", action="store_true", help="check guards one by one (the old way)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="cpu: this process's CPU time")
    options = parser.parse_args()
    if options.plain_guards:
        from capture import convert_frame, guards

        convert_frame.compile_guards = guards.compile_guards_plainly  # type: ignore[assignment]
    torch.manual_seed(0)
    inputs = [torch.randn(4) for _ in range(10)]
    candidates: dict[str, Callable[..., Any]] = {
        "eager": ten_inputs,
        'torch.compile(backend="eager")': torch.compile(ten_inputs, backend="eager"),
        "capture.optimize(eager)": capture.optimize(_eager_backend)(ten_inputs),
    }
    expected = ten_inputs(*inputs)
    for name, fn in candidates.items():
        torch.testing.assert_close(fn(*inputs), expected, msg=name)
    clock = time.process_time if options.clock == "cpu" else time.perf_counter
    times = interleaved_microseconds(candidates, inputs, options.calls, options.repeats, clock=clock)
    eager = times["eager"]
    print(f"{'variant':34} {'us/call':>9} {'overhead us':>12} {'x eager':>8}")
    for name, value in times.items():
        print(f"{name:34} {value:9.2f} {value - eager:12.2f} {value / eager:8.2f}")
    ours = times["capture.optimize(eager)"] - eager
    theirs = times['torch.compile(backend="eager")'] - eager
    print(f"capture overhead / torch.compile overhead: {ours / theirs:.2f}")
    if options.bert:
        bert_overhead(options.bert_calls, options.repeats)


if __name__ == "__main__":
    main()
