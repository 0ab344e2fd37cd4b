"""try/except/finally, raise and catch, and `with` blocks around traced code."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import TracebackType

import torch

from ._registry import program, x

F = "exceptions"


class Scale:
    """A user context manager that returns a number from __enter__."""

    def __init__(self, k: float) -> None:
        self.k = k
        self.entered = False

    def __enter__(self) -> float:
        self.entered = True
        return self.k

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.entered = False


@contextlib.contextmanager
def _scaled(k: float) -> Iterator[float]:
    yield k * 2


@program(F, x(4))
def try_finally(a: torch.Tensor) -> torch.Tensor:
    out = a
    try:
        out = out * 2
    finally:
        out = out + 1
    return out


@program(F, x(4))
def try_except_not_raised(a: torch.Tensor) -> torch.Tensor:
    try:
        out = a.sin()
    except RuntimeError:
        out = a
    return out * 3


@program(F, x(4))
def except_key_error(a: torch.Tensor) -> torch.Tensor:
    d = {"a": 1.0}
    try:
        k = d["missing"]
    except KeyError:
        k = 5.0
    return a * k


@program(F, x(4))
def except_index_error(a: torch.Tensor) -> torch.Tensor:
    items = [a]
    try:
        return items[3]
    except IndexError:
        return a.cos()


@program(F, x(4))
def raise_and_catch_value_error(a: torch.Tensor) -> torch.Tensor:
    try:
        raise ValueError("bad")
    except ValueError:
        a = a * 2
    return a + 1


@program(F, x(4))
def try_except_else_finally(a: torch.Tensor) -> torch.Tensor:
    out = a
    try:
        out = out + 1
    except ZeroDivisionError:
        out = out - 100
    else:
        out = out * 3
    finally:
        out = out.tanh()
    return out


@program(F, x(4))
def except_attribute_error(a: torch.Tensor) -> torch.Tensor:
    try:
        return a.not_a_method()
    except AttributeError:
        return a.exp()


@program(F, x(4))
def nested_try(a: torch.Tensor) -> torch.Tensor:
    try:
        try:
            raise KeyError("k")
        except KeyError:
            a = a * 2
            raise ValueError("v") from None
    except ValueError:
        a = a + 1
    return a


@program(F, x(4))
def user_context_manager(a: torch.Tensor) -> torch.Tensor:
    with Scale(3.0) as k:
        out = a * k
    return out.relu()


@program(F, x(4))
def contextlib_contextmanager(a: torch.Tensor) -> torch.Tensor:
    with _scaled(1.5) as k:
        return a * k


@program(F, x(4))
def nullcontext_block(a: torch.Tensor) -> torch.Tensor:
    with contextlib.nullcontext():
        out = a.sin()
    return out + 1


@program(F, x(4))
def suppress_exception(a: torch.Tensor) -> torch.Tensor:
    out = a
    with contextlib.suppress(KeyError):
        out = out * 2
        out = out + {}["missing"]
    return out


@program(F, x(4))
def finally_runs_on_return(a: torch.Tensor) -> torch.Tensor:
    log = []

    def inner(t: torch.Tensor) -> torch.Tensor:
        try:
            return t * 2
        finally:
            log.append(1)

    return inner(a) + len(log)


@program(F, x(4))
def stacked_with_blocks(a: torch.Tensor) -> torch.Tensor:
    with Scale(2.0) as k1, Scale(0.5) as k2:
        out = a * k1 * k2 + a
    return out


@program(F, x(4))
def assert_on_constant(a: torch.Tensor) -> torch.Tensor:
    assert a.dim() == 1, "expects a vector"
    return a * 2
