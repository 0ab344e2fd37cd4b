"""Loading compiled kernel libraries with ctypes and calling their kernels with tensors."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

__all__ = ["CppKernel", "load_library"]


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
    """

    __slots__ = ("_function", "_library", "name", "num_pointers", "num_sizes", "num_threads")

    def __init__(
        self,
        library: ctypes.CDLL,
        name: str,
        num_pointers: int,
        num_sizes: int,
        num_threads: int | None = None,
    ) -> None:
        self._library = library  # keeps the library loaded while the kernel lives
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
        threads = self.num_threads or torch.get_num_threads()
        if self.num_sizes:
            self._function(*[t.data_ptr() for t in args[:count]], *[int(s) for s in args[count:]], threads)
        else:
            self._function(*[t.data_ptr() for t in args], threads)

    def __repr__(self) -> str:
        return f"<CppKernel {self.name}>"
