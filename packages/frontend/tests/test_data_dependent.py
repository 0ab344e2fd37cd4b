"""Data-dependent ops end to end (capture, aotgrad, inductor_ir, C++ and Triton kernels): `nonzero`,
`masked_select`, `unique`, boolean masks, `item()` and `tolist()` compile into one graph whose sizes
are unbacked symbols; fresh values each call change those sizes without a recompile."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import frontend
from frontend.backends import inductor as inductor_backend
from frontend.config import Config

pytestmark = pytest.mark.usefixtures("fresh_cache")
STRICT = {"fallback_to_eager": False}


def _masks(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    rows = torch.nonzero(x > 0)
    positive = x[x > 0]
    return rows.float().sum(0) + positive.numel(), positive.exp() * 2, torch.masked_select(x, x < 0).sum()


def _unique(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    values, counts = torch.unique(x.round(), return_counts=True)
    return values * 2, counts.float() / counts.sum()


def _item(x: torch.Tensor) -> tuple[Any, ...]:
    n = x.abs().sum().long().item()
    scale = x.max().item()
    return torch.ones(n + 1) * x.mean(), x * scale, scale


def _route(x: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    counts = torch.nn.functional.one_hot(expert, 3).sum(0)  # tokens per expert, as MoE routing counts
    parts = torch.split(x[torch.argsort(expert, stable=True)], counts.tolist())
    return torch.cat([p * (k + 1) for k, p in enumerate(parts)])


CASES: dict[str, tuple[Callable[..., Any], Callable[[torch.Generator], tuple[torch.Tensor, ...]]]] = {
    "masks": (_masks, lambda g: (torch.randn(5, 7, generator=g),)),
    "unique": (_unique, lambda g: (torch.randn(30, generator=g) * 3,)),
    "item": (_item, lambda g: (torch.randn(9, generator=g),)),
    "tolist_split": (_route, lambda g: (torch.randn(10, 4, generator=g), torch.randint(0, 3, (10,), generator=g))),
}


def _check(fn: Callable[..., Any], make: Callable[[torch.Generator], tuple[torch.Tensor, ...]],
           dynamic: bool | None = None) -> None:
    compiled = frontend.compile(fn, fullgraph=True, dynamic=dynamic, options=STRICT)
    generator = torch.Generator().manual_seed(0)
    for _ in range(4):  # fresh values: other result sizes on each call
        inputs = make(generator)
        torch.testing.assert_close(compiled(*inputs), fn(*inputs))
    assert compiled.kiln_context.graphs_compiled == 1
    assert compiled.kiln_context.recompilations == 0


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.fake_unique_int64) if n == "unique" else n
                                  for n in sorted(CASES)])
def test_data_dependent_graph_compiles_once(name: str) -> None:
    _check(*CASES[name])


def test_data_dependent_graph_with_symbolic_input_sizes() -> None:
    _check(*CASES["masks"], dynamic=True)


def test_training_through_masked_select() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.masked_select(x * w, x > 0).sin().sum() * 2

    compiled = frontend.compile(fn, fullgraph=True, options=STRICT)
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        x, w = torch.randn(6, 5, generator=generator), torch.randn(5, generator=generator)
        ours = [x.clone().requires_grad_(), w.clone().requires_grad_()]
        eager = [x.clone().requires_grad_(), w.clone().requires_grad_()]
        out, expected = compiled(*ours), fn(*eager)
        torch.testing.assert_close(out, expected)
        out.backward()
        expected.backward()
        for got, want in zip(ours, eager):
            torch.testing.assert_close(got.grad, want.grad)


def test_split_sizes_that_do_not_add_up_raise_like_eager() -> None:
    def fn(x: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(t.sum(0) for t in torch.split(x, counts.tolist()))

    compiled = frontend.compile(fn, fullgraph=True, options=STRICT)
    x = torch.randn(10, 3)
    torch.testing.assert_close(compiled(x, torch.tensor([3, 2, 5])), fn(x, torch.tensor([3, 2, 5])))
    with pytest.raises(RuntimeError):
        fn(x, torch.tensor([3, 2, 4]))
    with pytest.raises(RuntimeError):
        compiled(x, torch.tensor([3, 2, 4]))


def _checked_max(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    n = lengths.max().item()
    torch._check(n <= x.shape[1])
    return x * 2 + n


def _checked_is_size(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    n = lengths.min().item()
    torch._check_is_size(n)
    return x * 2 + n


def _checked_nonnegative(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    n = lengths.min().item()
    torch._check(n >= 0)
    return x + n


def _checked_nonzero_count(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    m = torch.nonzero(lengths).size(0)
    torch._check(m >= 2)
    return x * m


def _checked_unused(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    torch._check(lengths.max().item() <= x.shape[1])  # the value feeds nothing but the check
    return x * 2


# A check that pins the value to one number makes the ShapeEnv replace its symbol by that number
# (the sizes below are then static): the compiled code must still read the value and check it.
def _pinned_item(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    n = lengths.max().item()
    torch._check(n == 8)
    return x[:, :n] * 2 + n


def _pinned_to_a_size(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    n = lengths.max().item()
    torch._check(n == x.shape[1])
    return x.sum(1) * n


def _pinned_nonzero_count(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    m = torch.nonzero(lengths).size(0)  # of an input: fake tensors memoize its symbol across traces
    torch._check(m == 2)
    return x * m


# name: (function, lengths that pass its check, lengths that fail it, the failed condition)
CHECKED: dict[str, tuple[Callable[..., Any], list[int], list[int], str]] = {
    "check_le": (_checked_max, [3, 8], [3, 9], "<= 8"),
    "check_is_size": (_checked_is_size, [3, 8], [-1, 8], ">= 0"),
    "check_ge": (_checked_nonnegative, [3, 8], [-1, 8], ">= 0"),
    "check_nonzero_size": (_checked_nonzero_count, [3, 8, 0, 1], [0, 8, 0, 0], ">= 2"),
    "check_unused_item": (_checked_unused, [3, 8], [3, 9], "<= 8"),
    "check_eq_item": (_pinned_item, [3, 8], [3, 7], ">= 8"),
    "check_eq_size": (_pinned_to_a_size, [3, 8], [3, 9], "<= 8"),
    "check_eq_nonzero_size": (_pinned_nonzero_count, [3, 8], [0, 8], ">= 2"),
}


def _check_raises_like_eager(name: str, backend: str, tmp_path: Path, *, training: bool = False,
                             dynamic: bool | None = None, condition: str | None = None) -> None:
    fn, good, bad, failed = CHECKED[name]
    condition = re.escape(failed) if condition is None else condition
    compiled = frontend.compile(fn, backend=backend, fullgraph=True, dynamic=dynamic,
                                options={**STRICT, "cache_dir": str(tmp_path)})
    x = torch.randn(2, 8, requires_grad=training)
    out = compiled(x, torch.tensor(good))
    torch.testing.assert_close(out, fn(x, torch.tensor(good)))
    if training:
        eager = x.detach().clone().requires_grad_()
        out.sum().backward()
        fn(eager, torch.tensor(good)).sum().backward()
        torch.testing.assert_close(x.grad, eager.grad)
    with pytest.raises(RuntimeError):
        fn(x, torch.tensor(bad))
    with pytest.raises(RuntimeError, match=condition):
        compiled(x, torch.tensor(bad))
    assert compiled.kiln_context.graphs_compiled == 1


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", sorted(CHECKED))
def test_torch_check_on_a_data_dependent_value_raises_like_eager(name: str, backend: str, tmp_path: Path) -> None:
    """`torch._check` on an `item()` or `nonzero().size(0)` value: aotgrad traces the graph again with
    fresh unbacked symbols, and the check used to reach no backend (compiled code returned a result)."""
    _check_raises_like_eager(name, backend, tmp_path)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_torch_check_against_a_symbolic_size_raises_like_eager(backend: str, tmp_path: Path) -> None:
    _check_raises_like_eager("check_le", backend, tmp_path, dynamic=True, condition=r"u\d+ <= s\d+")


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", ["check_le", "check_eq_item", "check_eq_nonzero_size"])
def test_torch_check_on_a_data_dependent_value_raises_when_training(name: str, backend: str, tmp_path: Path) -> None:
    _check_raises_like_eager(name, backend, tmp_path, training=True)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", ["check_eq_size", "check_eq_nonzero_size"])
def test_torch_check_pinning_a_value_raises_like_eager_with_symbolic_sizes(name: str, backend: str,
                                                                           tmp_path: Path) -> None:
    """`torch._check(n == 5)` lets the ShapeEnv replace n's symbol by 5, which folded the checks on it
    to True (later traces reused the replaced symbol, the generated code no longer read it)."""
    _check_raises_like_eager(name, backend, tmp_path, dynamic=True, condition=r"u\d+")


def test_branch_on_an_item_breaks_the_graph_there() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.cos()
        if y.sum().item() > 2.5:
            return y * 2
        return y - 1

    compiled = frontend.compile(fn, options=STRICT)
    generator = torch.Generator().manual_seed(2)
    for _ in range(4):
        x = torch.randn(5, generator=generator)
        torch.testing.assert_close(compiled(x), fn(x))


def test_float_arithmetic_on_an_item_gives_eagers_double() -> None:
    """``v / 7`` of a float read by ``.item()`` is Python's division of two doubles; the wrapper computed
    ``0.142857142857143*v`` (SymPy's product with a 15-digit constant), off in the last digits."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor]:
        v = x.sum().item()
        return x * 2, v / 3, x + v / 7

    compiled = frontend.compile(fn, options=STRICT)
    generator = torch.Generator().manual_seed(3)
    for _ in range(4):
        x = torch.randn(4, dtype=torch.float64, generator=generator)
        got, expected = compiled(x), fn(x)
        assert got[1] == expected[1]
        assert torch.equal(got[2], expected[2]) and torch.equal(got[0], expected[0])


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1 (set by nox)")
def test_triton_wrapper_binds_unbacked_sizes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import codegen_triton

    def triton_on_cpu(device_type: str, config: Config) -> Any:
        options = codegen_triton.TritonBackend.parse_options(config.kernel_backend_options("cuda"))
        return codegen_triton.TritonBackend("cpu", options)

    monkeypatch.setattr(inductor_backend, "load_kernel_backend", triton_on_cpu)
    with frontend.config.patch(debug=True, debug_dir=tmp_path):
        _check(*CASES["masks"])
    (wrapper,) = tmp_path.glob("run_*/*/forward/wrapper.py")
    assert re.search(r"u\d+ = buf\d+\.size\(0\)", wrapper.read_text())
    _check_raises_like_eager("check_le", "inductor", tmp_path / "le")
    _check_raises_like_eager("check_nonzero_size", "inductor", tmp_path / "nonzero")
    _check_raises_like_eager("check_eq_item", "inductor", tmp_path / "pinned")
    _check_raises_like_eager("check_eq_nonzero_size", "inductor", tmp_path / "pinned_nonzero")


def test_unique_runs_eagerly_where_fake_tensors_give_it_wrong_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where torch's fake unique kernel gives the counts the input's dtype (some torch releases), the
    call breaks the graph and runs eagerly: compiled from that metadata, kernels read int64 counts
    as floats."""
    import capture.symbolic.output_graph as output_graph

    monkeypatch.setattr(output_graph, "_unique_indices_not_int64",
                        lambda target, result: getattr(target, "__name__", "") == "unique")
    x = torch.randn(30, generator=torch.Generator().manual_seed(0)) * 3
    with pytest.raises(Exception, match="fake kernel gives the inverse indices"):
        frontend.compile(_unique, fullgraph=True, options=STRICT)(x)
    frontend.reset()
    compiled = frontend.compile(_unique, options=STRICT)
    torch.testing.assert_close(compiled(x), _unique(x))
