"""Loading compiled kernel libraries with ctypes and calling their kernels with tensors."""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from inductor_ir.ir.checks import IndexCheck, RuntimeCheck

__all__ = ["CppKernel", "load_library"]

_data_ptr = torch.Tensor.data_ptr
_get_num_threads = torch.get_num_threads
_profiler_enabled = torch.autograd._profiler_enabled
_record_function = torch.profiler.record_function
_FailureRecord = ctypes.c_int64 * 3  # {site, value, size}: runtime/kiln_cpu_checks.h


def load_library(path: Path) -> ctypes.CDLL:
    """``dlopen`` a kernel library (``RTLD_LOCAL``: its symbols stay its own).

    Raises:
        OSError: the file is not a loadable library (the caller rebuilds it).
    """
    return ctypes.CDLL(str(path), mode=getattr(ctypes, "RTLD_LOCAL", 0))


class CppKernel:
    """One compiled kernel, called as ``kernel(*tensors, *size_ints)``.

    Tensors are passed as data pointers (the generated code indexes them with the layouts it was
    generated for), sizes as int64, then the OpenMP thread count: ``num_threads`` if given, else
    ``torch.get_num_threads()`` at each call (so ``torch.set_num_threads`` governs Kiln's kernels
    too, and loading a library never changes the process's OpenMP settings).

    ``checks``: the kernel's runtime checks by site (its ``KernelSource.metadata["checks"]``). After
    a call of a kernel that has some, a failure its checks recorded is raised as eager would raise
    it (``IndexError``, ``RuntimeError``); ``ops`` (the ATen ops it computes) is named in messages.

    Under ``torch.profiler`` each call is recorded under the kernel's name (a C++ kernel is otherwise
    invisible there: its time would show only as its caller's self time).
    """

    __slots__ = ("_failure", "_function", "_library", "checks", "name", "num_pointers", "num_sizes", "num_threads", "ops")

    def __init__(
        self,
        library: ctypes.CDLL,
        name: str,
        num_pointers: int,
        num_sizes: int,
        num_threads: int | None = None,
        checks: Mapping[int, RuntimeCheck] | None = None,
        ops: str = "",
    ) -> None:
        self._library = library  # keeps the library loaded while the kernel lives
        self.checks = dict(checks or {})
        self.ops = ops
        self._failure = _FailureRecord.in_dll(library, "kiln_failure") if self.checks else None
        self.name = name
        self.num_pointers = num_pointers
        self.num_sizes = num_sizes
        self.num_threads = num_threads
        function = getattr(library, name)
        function.argtypes = [ctypes.c_void_p] * num_pointers + [ctypes.c_int64] * num_sizes + [ctypes.c_int]
        function.restype = None
        self._function = function

    def __call__(self, *args: Any) -> None:
        """Run the kernel on ``(*input_tensors, *output_tensors, *size_ints)``."""
        count = self.num_pointers
        if len(args) != count + self.num_sizes:
            raise TypeError(f"kernel {self.name} takes {count + self.num_sizes} arguments, got {len(args)}")
        if _profiler_enabled():
            with _record_function(self.name):
                self._launch(args, count)
        else:
            self._launch(args, count)
        failure = self._failure
        if failure is not None and failure[0]:
            raise self._failed(failure)

    def _launch(self, args: tuple[Any, ...], count: int) -> None:
        threads = self.num_threads or _get_num_threads()
        if self.num_sizes:
            self._function(*map(_data_ptr, args[:count]), *map(int, args[count:]), threads)
        else:
            self._function(*map(_data_ptr, args), threads)

    def _failed(self, failure: Any) -> Exception:
        """The exception for the failure a check recorded (the record is cleared for the next call)."""
        site, value, size = failure[0], failure[1], failure[2]
        failure[0] = failure[1] = failure[2] = 0
        check = self.checks.get(site)
        if isinstance(check, IndexCheck):
            return check.exception(value, size, self.name)
        if check is not None:
            return check.exception(self.name, self.ops)
        return RuntimeError(f"kernel {self.name} failed its runtime check {site} (value {value}, size {size})")

    def __repr__(self) -> str:
        return f"<CppKernel {self.name}>"
