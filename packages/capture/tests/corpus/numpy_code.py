"""NumPy code on tensors: `Tensor.numpy()`, ndarray methods and operators, `np.*` functions (linalg, fft,
meshgrid, `*_like` on tensors), `np.iinfo`/`finfo`/`dtype`, ndarray arguments and ndarray results. Traced as
tensor code, writes into arrays included; data-dependent branches and `np.random` must break cleanly."""

from __future__ import annotations

import numpy as np
import torch

from ._registry import args, program, x, xy

F = "numpy_code"

TABLE = np.linspace(0.5, 2.0, 4)  # a module-level ndarray read by a program


def nd(*shape: int) -> np.ndarray:
    """A standard-normal float32 ndarray (from torch's RNG, so the harness's seed decides it)."""
    return torch.randn(*shape).numpy()


@program(F, x(3, 4))
def ufuncs_then_from_numpy(t: torch.Tensor) -> torch.Tensor:
    a = t.numpy()
    b = np.exp(a) + np.sqrt(np.abs(a)) * np.sin(a)
    return torch.from_numpy(b) * 2


@program(F, x(3, 4))
def ndarray_methods(t: torch.Tensor) -> torch.Tensor:
    a = t.numpy()
    s = a.sum(axis=0) + a.max(axis=0) - a.mean()
    r = a.reshape(4, 3).T.argmax(axis=0)
    return torch.from_numpy(s) + torch.from_numpy(r).float()


@program(F, x(3, 4))
def where_and_clip(t: torch.Tensor) -> np.ndarray:
    a = t.numpy()
    return np.clip(np.where(a > 0, a, 0.1 * a), -0.5, 0.5)


@program(F, xy((3, 4), (2, 4)))
def concatenate_and_stack(t: torch.Tensor, u: torch.Tensor) -> np.ndarray:
    both = np.concatenate([t.numpy(), u.numpy()], axis=0)
    return np.stack([both, both * 2], axis=-1).mean(axis=1)


@program(F, x(4, 5))
def linalg_norm(t: torch.Tensor) -> torch.Tensor:
    a = t.numpy()
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    return torch.from_numpy(a / norms)


@program(F, x(8))
def fft_magnitude(t: torch.Tensor) -> np.ndarray:
    spectrum = np.fft.rfft(t.numpy().astype(np.float64))
    return np.abs(spectrum)


@program(F, x(4, 3))
def meshgrid_of_aranges(t: torch.Tensor) -> torch.Tensor:
    xs, ys = np.meshgrid(np.arange(3), np.arange(4))
    return t + torch.from_numpy(xs * 10 + ys).float()


@program(F, x(2, 3))
def like_functions_on_a_tensor(t: torch.Tensor) -> np.ndarray:
    return np.ones_like(t) + np.zeros_like(t) * 3 + np.full_like(t, 0.5)


@program(F, x(3))
def iinfo_finfo_dtype(t: torch.Tensor) -> torch.Tensor:
    a = t.numpy()
    eps = np.finfo(a.dtype).eps
    top = np.iinfo(np.int16).max
    assert a.dtype == np.float32 and np.dtype("float32") == a.dtype
    return t * float(top) + float(eps)


@program(F, x(3, 2))
def astype_and_int_promotion(t: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    a = (t.numpy() * 10).astype(np.int32)
    return a + 1.5, (a // 3).astype(np.float64) * np.float32(2.0)


@program(F, x(5))
def returns_ndarray(t: torch.Tensor) -> np.ndarray:
    return (t * 2).numpy()


@program(F, x(5))
def returns_numpy_scalar(t: torch.Tensor) -> tuple[np.floating, np.floating]:
    a = t.numpy()
    return np.sum(a * a), a.max()


@program(F, args(lambda: nd(3, 4)))
def ndarray_argument(a: np.ndarray) -> np.ndarray:
    return np.tanh(a) * a.shape[0] + a.T.mean(axis=1)[:, None].T


@program(F, args(lambda: torch.randn(3, 4), lambda: nd(3, 4)))
def ndarray_argument_into_torch(t: torch.Tensor, a: np.ndarray) -> torch.Tensor:
    return torch.relu(t * torch.from_numpy(a) + 1)


@program(F, x(4))
def module_level_ndarray(t: torch.Tensor) -> torch.Tensor:
    return t * torch.from_numpy(TABLE).float()


@program(F, x(2, 3))
def asarray_of_a_tensor(t: torch.Tensor) -> np.ndarray:
    a = np.asarray(t)
    return np.square(a) - np.array([1.0, 2.0, 3.0])


@program(F, x(3))
def numpy_scalar_times_tensor(t: torch.Tensor) -> torch.Tensor:
    scale = np.mean(t.numpy())
    return t * scale + 1


@program(F, x(4, 2))
def shape_metadata_in_python(t: torch.Tensor) -> torch.Tensor:
    a = t.numpy()
    rows, cols = a.shape
    return t.reshape(cols, rows) * (a.ndim + a.size + a.itemsize)


@program(F, x(3, 2))
def iterate_rows(t: torch.Tensor) -> list[np.ndarray]:
    return [row * i for i, row in enumerate(t.numpy())]


@program(F, x(3, 4))
def indexing_with_newaxis(t: torch.Tensor) -> np.ndarray:
    a = t.numpy()
    return a[1:, np.newaxis, ::2] - a[..., -1][:, None, None].mean()


@program(F, x(4))
def inplace_add_on_ndarray(t: torch.Tensor) -> torch.Tensor:
    a = t.clone().numpy()
    a += 1  # writes into the array (and the clone it shares memory with)
    return torch.from_numpy(a) * 2


@program(F, x(4))
def item_assignment_writes_tensor(t: torch.Tensor) -> torch.Tensor:
    c = t * 1
    a = c.numpy()
    a[0] = 5.0  # writes into c through the shared memory
    return c + 1


@program(F, x(4))
def branch_on_numpy_value(t: torch.Tensor) -> torch.Tensor:
    if np.sum(t.numpy()) > 0:
        return t * 2
    return t - 2


@program(F, x(3))
def seeded_random_state(t: torch.Tensor) -> torch.Tensor:
    noise = np.random.RandomState(0).rand(3)  # not a function of the inputs: never a constant of the graph
    return t + torch.from_numpy(noise).float()


@program(F, x(3, 3))
def numpy_result_back_to_torch_ops(t: torch.Tensor) -> torch.Tensor:
    m = torch.tensor(np.tril(t.numpy()))
    return m @ t + torch.as_tensor(np.eye(3), dtype=torch.float32)


@program(F, args(lambda: nd(4), lambda: torch.randn(4)))
def inplace_on_ndarray_argument(a: np.ndarray, t: torch.Tensor) -> torch.Tensor:
    a *= 2  # the caller's array changes, as in eager
    a[1:3] = -1.0
    return t + torch.from_numpy(a)


@program(F, args(lambda: torch.randint(1, 20, (3, 4), dtype=torch.int32)))
def integer_division_and_median(t: torch.Tensor) -> tuple[np.ndarray, np.floating, np.ndarray]:
    a = t.numpy()
    return a / 3, np.median(a), np.arctan2(a, 2)  # float64 and a scalar, as NumPy gives them


@program(F, x(6))
def fft_of_float32(t: torch.Tensor) -> np.ndarray:
    return np.fft.fft(t.numpy()) * 2  # complex64 in NumPy 2


@program(F, x(3))
def array_of_arrays(t: torch.Tensor) -> np.ndarray:
    a = t.numpy()
    return np.array([a, a * 2, np.cumsum(a)], dtype=np.float64)
