"""The wrapper's promise to kernels: the tensors of one kernel call never share memory.

Kernels declare their pointer arguments not to alias (``__restrict__`` in C++, and Triton compiles
loads and stores on the same assumption), so one memory passed as two arguments is undefined
behaviour that optimizing compilers really exploit. The memory plan hands a dying buffer's memory to
a new one (plain reuse: ``buf5 = buf3; del buf3``; in-place reuse by a kernel output:
``buf1 = buf0``, with ``buf0`` read by the same kernel through ``buf1``). :class:`StorageTracker`
follows those names while the wrapper is written and checks every kernel call.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["KernelArgumentAliasError", "StorageTracker"]


class KernelArgumentAliasError(AssertionError):
    """Internal error: a generated kernel call would pass one memory as two arguments."""


class StorageTracker:
    """Which wrapper names share one storage, through the memory plan's reuse of dead buffers.

    A name never seen (graph inputs, extern results) is its own storage.

    Example:
        >>> storages = StorageTracker()
        >>> storages.fresh("buf0")
        >>> storages.share("buf1", "buf0")  # buf1 = buf0  # reuse in place
        >>> storages.check_call("cpp_fused_add_0", ["x", "buf0", "buf1"])  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        KernelArgumentAliasError: ... passes buf0 and buf1, which share the memory ...
    """

    def __init__(self) -> None:
        self._storage: dict[str, int] = {}  # name -> its storage
        self._first: list[str] = []  # storage -> the name it was allocated as

    def fresh(self, name: str) -> None:
        """``name`` was just bound to new memory."""
        self._storage[name] = len(self._first)
        self._first.append(name)

    def share(self, name: str, existing: str) -> None:
        """``name`` is bound to the memory of ``existing`` (reused, in place or not)."""
        if existing not in self._storage:
            self.fresh(existing)
        self._storage[name] = self._storage[existing]

    def storage(self, name: str) -> str:
        """The name ``name``'s memory was allocated as (a name never seen: itself)."""
        if name not in self._storage:
            self.fresh(name)
        return self._first[self._storage[name]]

    def check_call(self, kernel: str, arguments: Sequence[str]) -> None:
        """Raise :class:`KernelArgumentAliasError` when two of a kernel's tensor ``arguments`` share a storage."""
        seen: dict[int, str] = {}
        for name in arguments:
            self.storage(name)
            other = seen.get(self._storage[name])
            seen[self._storage[name]] = name
            if other is not None:
                raise KernelArgumentAliasError(
                    f"internal error in inductor_ir's wrapper: the call of {kernel} passes {other} and {name}, "
                    f"which share the memory first allocated as {self.storage(name)} (arguments: "
                    f"{', '.join(arguments)}); kernels declare their arguments not to alias, so its results would "
                    "be wrong. This is a bug in the memory plan (inductor_ir.scheduler.memory): please report it "
                    "with the graph."
                )
