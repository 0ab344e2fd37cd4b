"""NumPy code traced as tensor code (variables/ndarray.py): `Tensor.numpy()`, ndarray arguments, methods,
operators and `np.*` functions are graph nodes calling torch._numpy; ndarrays leaving the graph are real numpy
arrays (or numpy scalars). Each case is compared with eager on seeded inputs (values, dtype, type), with its graph
count; unsupported or data-dependent NumPy breaks the graph with a reason and still gives eager's result."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from capture_helpers import RecordingBackend

import capture
from capture.variables.ndarray import numpy_function, numpy_method, numpy_operator


def _compile(fn: Any, **options: Any) -> tuple[Any, RecordingBackend, list[str]]:
    capture.reset()
    backend = RecordingBackend()
    breaks: list[str] = []
    hooks = capture.CaptureHooks(on_graph_break=[lambda event: breaks.append(str(event.reason))])
    return capture.optimize(backend, hooks=hooks, **options)(fn), backend, breaks


def _tensor(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _same(ours: Any, eager: Any) -> None:
    """Same structure, types, dtypes and values (numpy values and tensors)."""
    assert type(ours) is type(eager), (type(ours), type(eager))
    if isinstance(eager, (tuple, list)):
        assert len(ours) == len(eager)
        for a, b in zip(ours, eager):
            _same(a, b)
    elif isinstance(eager, (np.ndarray, np.generic)):
        assert ours.dtype == eager.dtype and np.shape(ours) == np.shape(eager)
        np.testing.assert_allclose(ours, eager, rtol=1e-6, atol=1e-6)
    elif isinstance(eager, torch.Tensor):
        torch.testing.assert_close(ours, eager)
    else:
        assert ours == eager


def _check_one_graph(fn: Any, *make_inputs: Any, graphs: int = 1) -> RecordingBackend:
    compiled, backend, breaks = _compile(fn)
    for seed in (0, 1):
        inputs = [make(seed) for make in make_inputs]
        _same(compiled(*inputs), fn(*[make(seed) for make in make_inputs]))
    assert backend.count == graphs and not breaks, breaks
    return backend


def test_tensor_numpy_then_ufuncs_methods_and_operators_is_one_graph() -> None:
    def fn(t: torch.Tensor) -> np.ndarray:
        a = t.numpy()
        return np.exp(a).sum(axis=0) * 2 + a.T.mean() - np.abs(a).max(axis=0)

    backend = _check_one_graph(fn, lambda s: _tensor(s, 3, 4))
    targets = {n.target for n in backend.graphs[0].graph.nodes if n.op == "call_function"}
    assert targets <= {numpy_function, numpy_method, numpy_operator, __import__(
        "capture.variables.ndarray", fromlist=["numpy_attribute"]).numpy_attribute}


def test_numpy_promotion_rules_not_torch_ones() -> None:
    def fn(t: torch.Tensor) -> tuple[np.ndarray, ...]:
        ints = (t.numpy() * 10).astype(np.int32)
        # float64 in NumPy (torch, and torch._numpy for the division and arctan2, give float32)
        return ints + 1.5, ints / 2, np.arange(4) * 0.5, np.arctan2(ints, 3)

    _check_one_graph(fn, lambda s: _tensor(s, 4))


def test_numpy_scalars_and_zero_d_arrays_keep_their_types() -> None:
    def fn(t: torch.Tensor) -> tuple[Any, Any, Any]:
        a = t.numpy()
        return np.sum(a), a.max(), np.asarray(t.sum())

    compiled, _, _ = _compile(fn)
    ours, eager = compiled(_tensor(0, 5)), fn(_tensor(0, 5))
    assert isinstance(ours[0], np.float32) and isinstance(ours[1], np.float32)
    assert isinstance(ours[2], np.ndarray) and ours[2].shape == ()
    _same(ours, eager)


def test_linalg_fft_meshgrid_and_like_functions_on_tensors() -> None:
    def fn(t: torch.Tensor) -> tuple[Any, ...]:
        a = t.numpy()
        xs, ys = np.meshgrid(np.arange(4), np.arange(3))
        return (np.linalg.norm(a, axis=1), np.abs(np.fft.rfft(a.astype(np.float64))), xs + ys * a,
                np.ones_like(t) + np.zeros_like(a), np.concatenate([a, a[:1]], axis=0),
                np.where(a > 0, a, -1.0), np.fft.fft(a),  # complex64 from float32 in NumPy 2
                np.median(a), np.median(a, axis=0), np.array([a[0], a[1] * 2]), np.array([np.sum(a), a.max()]))

    _check_one_graph(fn, lambda s: _tensor(s, 3, 4))


def test_iinfo_finfo_and_dtype_fold_at_trace_time() -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        a = t.numpy()
        assert a.dtype == np.float32 and a.dtype == np.dtype("float32")
        return t * float(np.finfo(a.dtype).eps) + float(np.iinfo(np.int8).max)

    _check_one_graph(fn, lambda s: _tensor(s, 3))


def test_ndarray_arguments_are_graph_inputs_guarded_on_dtype_and_shape() -> None:
    def fn(a: np.ndarray, t: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.tanh(a) * a.shape[0]) + t

    compiled, backend, breaks = _compile(fn)
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    _same(compiled(a, _tensor(0, 3, 4)), fn(a, _tensor(0, 3, 4)))
    other = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    _same(compiled(other, _tensor(1, 3, 4)), fn(other, _tensor(1, 3, 4)))
    assert backend.count == 1  # new values, same dtype and shape: the same graph
    as_float64 = other.astype(np.float64)
    _same(compiled(as_float64, _tensor(1, 3, 4)), fn(as_float64, _tensor(1, 3, 4)))
    wider = np.ones((5, 4), np.float32)
    _same(compiled(wider, _tensor(1, 5, 4)), fn(wider, _tensor(1, 5, 4)))
    assert backend.count == 3 and not breaks


def test_returned_argument_array_is_the_callers_object_and_writes_reach_it() -> None:
    def fn(a: np.ndarray) -> np.ndarray:
        a *= 2
        a[0] = -1.0
        return a

    compiled, backend, breaks = _compile(fn)
    ours = np.arange(4, dtype=np.float32)
    assert compiled(ours) is ours
    np.testing.assert_array_equal(ours, fn(np.arange(4, dtype=np.float32)))
    assert backend.count == 1 and not breaks


def test_writes_through_numpy_reach_the_tensor() -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        c = t * 1
        a = c.numpy()
        a[1:3] = 0.5
        a += 1
        return c * 2

    _check_one_graph(fn, lambda s: _tensor(s, 4))

    def mutates_input(t: torch.Tensor) -> None:
        t.numpy()[0] = 7.0

    compiled, _, _ = _compile(mutates_input)
    ours, eager = _tensor(0, 3), _tensor(0, 3)
    compiled(ours)
    mutates_input(eager)
    torch.testing.assert_close(ours, eager)


def test_numpy_scalar_in_tensor_arithmetic() -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        return t * np.mean(t.numpy()) + 1

    _check_one_graph(fn, lambda s: _tensor(s, 3))


def test_ndarray_live_across_a_graph_break_is_a_real_array() -> None:
    def fn(t: torch.Tensor) -> np.ndarray:
        a = np.square(t.numpy())
        capture.graph_break()
        assert isinstance(a, np.ndarray)
        return a + 1

    compiled, backend, breaks = _compile(fn)
    _same(compiled(_tensor(0, 3)), fn(_tensor(0, 3)))
    assert breaks and backend.count == 2


def test_dynamic_shapes() -> None:
    def fn(t: torch.Tensor) -> np.ndarray:
        a = t.numpy()
        return a.sum(axis=1) * a.shape[1] - np.mean(a, axis=0)[:1]

    compiled, backend, _ = _compile(fn, dynamic=True)
    for n in (3, 5, 7):
        _same(compiled(_tensor(n, n, 4)), fn(_tensor(n, n, 4)))
    assert backend.count == 1

    def uses_a_size_as_operand(t: torch.Tensor) -> np.ndarray:
        a = t.numpy()
        return a + a.size  # a symbolic size as a NumPy operand is specialized (one graph per size)

    compiled, backend, _ = _compile(uses_a_size_as_operand, dynamic=True)
    for n in (3, 5):
        _same(compiled(_tensor(n, n, 4)), uses_a_size_as_operand(_tensor(n, n, 4)))


@pytest.mark.parametrize("case", ["branch", "tolist", "random", "requires_grad", "mixed"])
def test_unsupported_numpy_breaks_with_a_reason_and_eager_results(case: str) -> None:
    def branch(t: torch.Tensor) -> torch.Tensor:
        return t * 2 if np.sum(t.numpy()) > 0 else t - 2

    def tolist(t: torch.Tensor) -> list[float]:
        return (t.numpy() * 2).tolist()

    def random(t: torch.Tensor) -> np.ndarray:
        return t.numpy() + np.random.rand(3)

    def requires_grad(t: torch.Tensor) -> np.ndarray:
        return t.numpy()

    def mixed(t: torch.Tensor) -> Any:
        return t.numpy() + t

    fn = {"branch": branch, "tolist": tolist, "random": random, "requires_grad": requires_grad, "mixed": mixed}[case]
    compiled, _, breaks = _compile(fn)
    t = _tensor(0, 3).requires_grad_(case == "requires_grad")
    if case in ("requires_grad", "mixed"):  # eager raises: the compiled function raises the same error
        with pytest.raises(Exception) as eager_error:
            fn(t)
        with pytest.raises(type(eager_error.value)):
            compiled(t)
        return
    if case == "random":  # drawn at run time on every call, as eager: never a constant of the graph
        np.random.seed(0)
        ours = [compiled(t), compiled(t)]
        np.random.seed(0)
        eager = [fn(t), fn(t)]
        for a, b in zip(ours, eager):
            _same(a, b)
        assert not np.allclose(ours[0], ours[1])
    else:
        _same(compiled(t), fn(t))
    assert breaks
    reason = {"branch": "depends on a NumPy value", "tolist": "tolist", "random": "numpy.random (RandomState.rand) "
              "draws at run time"}[case]
    assert any(reason in b for b in breaks), breaks


def test_graph_traces_to_aten_for_backends() -> None:
    """A backend that traces the graph (aotgrad's make_fx) sees the NumPy nodes as ATen ops."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(t: torch.Tensor) -> np.ndarray:
        a = t.numpy()
        return np.linalg.norm(a, axis=0) + np.where(a > 0, a, 0).mean()

    compiled, backend, _ = _compile(fn)
    compiled(_tensor(0, 3, 4))
    traced = make_fx(backend.graphs[0])(_tensor(0, 3, 4))
    assert all(str(n.target).startswith("aten.") for n in traced.graph.nodes if n.op == "call_function")
    torch.testing.assert_close(traced(_tensor(1, 3, 4))[0], backend.graphs[0](_tensor(1, 3, 4))[0])




def test_read_only_array_argument_stays_numpys() -> None:
    def writes(a: np.ndarray) -> np.ndarray:
        a *= 2
        return a

    def reads(a: np.ndarray) -> np.ndarray:
        return np.tanh(a) + 1

    read_only = np.arange(3, dtype=np.float32)
    read_only.setflags(write=False)
    compiled, _, _ = _compile(writes)
    with pytest.raises(ValueError):
        writes(read_only)
    with pytest.raises(ValueError):
        compiled(read_only)
    compiled, _, _ = _compile(reads)
    _same(compiled(read_only), reads(read_only))
    writeable = np.arange(3, dtype=np.float32)
    _same(compiled(writeable), reads(writeable))


def test_builtins_and_attributes_on_ndarrays_and_numpy_scalars() -> None:
    def fn(t: torch.Tensor) -> tuple[Any, ...]:
        a = t.numpy()
        s = np.sum(a)
        return (abs(a), sum(a), isinstance(a, np.ndarray), isinstance(s, np.floating), a.dtype.kind, str(a.dtype),
                s.real, a.T, np.asarray(s).T, a.astype("float64"), a.astype(float))

    _check_one_graph(fn, lambda s: _tensor(s, 2, 3))


def test_numpy_dtypes_with_symbolic_and_large_sizes() -> None:
    def fn(t: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        ints = t.numpy().astype(np.int32)
        return ints / 2, np.fft.fft(t.numpy())  # float64 and complex64, as NumPy gives them

    compiled, backend, _ = _compile(fn, dynamic=True)
    for n in (3, 5):
        _same(compiled(_tensor(n, n)), fn(_tensor(n, n)))
    assert backend.count == 1

    def halves(t: torch.Tensor) -> np.ndarray:
        return t.numpy() / 2

    big = torch.arange(1 << 21, dtype=torch.int32)  # simulated with one element, for the dtype only
    compiled, _, _ = _compile(halves)
    _same(compiled(big), halves(big))


def test_numpy_of_a_conjugate_view_raises_as_in_eager() -> None:
    def fn(t: torch.Tensor) -> np.ndarray:
        return t.conj().numpy()

    t = torch.randn(3, dtype=torch.complex64)
    compiled, _, _ = _compile(fn)
    with pytest.raises(RuntimeError):
        fn(t)
    with pytest.raises(RuntimeError):
        compiled(t)
