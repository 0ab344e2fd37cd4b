"""Per-call overhead of a cached compiled function: eager vs torch.compile(backend="eager") vs capture.

The function takes 10 tiny tensors and adds them up; after warm-up every call hits the cache, so
the difference to eager is the cost of the guard checks and the dispatch to the compiled graph.

With `--model bert|mobilenet_v2|resnet50` (repeatable; `--bert` = `--model bert`), also a transformers
model with random weights (BertModel-base at 1 x 16 tokens; MobileNetV2 / ResNet-50 on one 3x64x64
image; eval, no_grad): eager, torch.compile(backend="eager") and `frontend.compile(model, backend="eager")`
per call, interleaved, and the guard check alone (the fast generated function vs checking every guard
on its own, the way guards were checked before the compiled guard layout).

    python3 tools/bench/capture_overhead.py [--calls 20000] [--repeats 5] [--model resnet50] [--model-calls 30]
    python3 tools/bench/capture_overhead.py --calls 2000 --model mobilenet_v2 --model resnet50 --model bert
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


def _build_model(name: str) -> tuple[torch.nn.Module, torch.Tensor, str]:
    """A transformers model with random weights (eval), a small input, and a readable description."""
    import transformers

    torch.manual_seed(0)
    if name == "bert":
        config = transformers.BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                         intermediate_size=3072)
        return transformers.BertModel(config).eval(), torch.randint(0, 1000, (1, 16)), "BertModel-base, 1x16 tokens"
    image = torch.randn(1, 3, 64, 64)
    if name == "mobilenet_v2":
        config = transformers.MobileNetV2Config(tf_padding=False, num_labels=1000)
        return transformers.MobileNetV2ForImageClassification(config).eval(), image, "MobileNetV2, 1x3x64x64"
    if name == "resnet50":
        return (transformers.ResNetForImageClassification(transformers.ResNetConfig(num_labels=1000)).eval(), image,
                "ResNet-50, 1x3x64x64")
    raise ValueError(f"unknown model {name!r}: use bert, mobilenet_v2 or resnet50")


def _first_output(result: Any) -> torch.Tensor:
    return result[0] if not isinstance(result, torch.Tensor) else result


def model_overhead(name: str, calls: int, repeats: int, with_torch_compile: bool = True) -> None:
    """Per-call time of eager, torch.compile(backend="eager") and `frontend.compile(backend="eager")` on a
    transformers model (eval, no_grad), interleaved; then the guard check alone (fast vs guard by guard)."""
    import frontend
    from capture.cache import DEFAULT_CACHE, bind_frame_arguments
    from capture.guards import compile_guards, compile_guards_plainly, first_failure

    model, x, description = _build_model(name)
    candidates: dict[str, Callable[..., Any]] = {"eager": model, "kiln": frontend.compile(model, backend="eager")}
    if with_torch_compile:
        candidates["torch.compile"] = torch.compile(model, backend="eager")
    with torch.no_grad():
        expected = _first_output(model(x))
        for label, fn in candidates.items():
            torch.testing.assert_close(_first_output(fn(x)), expected, msg=label)
        times = interleaved_microseconds(candidates, [x], calls, repeats, warmup=5)
        fn = type(model).forward
        entries = [e for state in DEFAULT_CACHE.states_for(fn.__code__) for e in state.entries]
        guards = max(entries, key=lambda e: len(e.guard_set.guards)).guard_set
        frame = (bind_frame_arguments(fn, (model, x), {}), fn.__globals__, fn.__closure__)
        fast, plain = compile_guards(guards), compile_guards_plainly(guards)
        if not (fast(*frame) and plain(*frame)):
            raise AssertionError(f"the guard check fails on the benchmark's own call: {first_failure(guards, *frame)}")
        checks = interleaved_microseconds({"fast": lambda: fast(*frame), "plain": lambda: plain(*frame)}, [], 200,
                                          repeats)
    eager = times["eager"]
    reference = f", torch.compile(eager) {times['torch.compile']:.0f} (+{times['torch.compile'] - eager:.0f})" \
        if with_torch_compile else ""
    print(f"{description} (eval, no_grad): eager {eager:.0f} us/call, kiln(eager) {times['kiln']:.0f} "
          f"(+{times['kiln'] - eager:.0f}){reference}")
    print(f"  guard check alone ({len(guards.guards)} guards): fast {checks['fast']:.1f} us, "
          f"guard by guard {checks['plain']:.1f} us ({checks['plain'] / checks['fast']:.0f}x)")


def main() -> None:
    """Print the side-by-side table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bert", action="store_true", help="also measure a BertModel-base (= --model bert)")
    parser.add_argument("--model", action="append", default=[], choices=("bert", "mobilenet_v2", "resnet50"),
                        help="also measure this transformers model (repeatable)")
    parser.add_argument("--model-calls", "--bert-calls", type=int, default=30)
    parser.add_argument("--no-torch-compile", action="store_true", help="models: skip the torch.compile reference")
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
    for name in (["bert"] if options.bert else []) + options.model:
        model_overhead(name, options.model_calls, options.repeats, not options.no_torch_compile)


if __name__ == "__main__":
    main()
