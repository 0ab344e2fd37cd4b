"""Modules wrapped in torch.distributed's `DistributedDataParallel` (DDP).

DDP's own forward is bookkeeping for its C++ reducer (marking which gradients to expect,
rebuilding buckets, syncing buffers, Join), written against objects capture cannot trace and must
not replay from a graph: it runs eagerly, exactly as without compiling. The module DDP wraps is
what holds the tensor work, so that is what capture compiles: `data_parallel_call` runs DDP's
forward eagerly and, for the length of that call, routes DDP's call of its wrapped module through
the wrapped module's captured forward.

While DDP runs its wrapped module it names itself as the active DDP module
(``DistributedDataParallel._get_active_ddp_module()``), the hook DDP provides for compilers: a
backend reads it to learn the bucket sizes its graphs feed (see ``frontend.distributed``).

A DDP module called from inside a captured function is a graph break at that call (with this
module's reason): DDP and the module it wraps then run eagerly.

FSDP2 (``fully_shard``) registers forward hooks that take keyword arguments on each module it
shards; they gather and free parameters with collectives, so they run eagerly too. A call of
such a submodule is a graph break; `with_hooked_submodules_captured` makes the submodule's own
forward captured (a graph of its own), its hooks run by ``nn.Module.__call__`` around it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

_MISSING = object()


def data_parallel_class() -> type[torch.nn.Module] | None:
    """torch's `DistributedDataParallel` class, or None where torch.distributed is not built."""
    if not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel


def is_data_parallel(module: object) -> bool:
    """Whether `module` is a `torch.nn.parallel.DistributedDataParallel` (or a subclass)."""
    cls = data_parallel_class()
    return cls is not None and isinstance(module, cls)


def active_data_parallel_module() -> torch.nn.Module | None:
    """The DDP module whose wrapped module is running now (DDP sets it around that call), or None."""
    cls = data_parallel_class()
    if cls is None:
        return None
    getter = getattr(cls, "_get_active_ddp_module", None)
    return getter() if callable(getter) else None


DATA_PARALLEL_BREAK_REASON = (
    "a DistributedDataParallel module called inside a compiled function runs eagerly (DDP's forward drives "
    "its gradient reducer); compile the DDP module itself (frontend.compile(ddp_model)) to have the module it "
    "wraps compiled"
)
"""The graph-break reason capture gives for a DDP module called from a captured function."""


def data_parallel_call(module: torch.nn.Module, wrapped_forward: Callable[..., Any]) -> Callable[..., Any]:
    """What calling the compiled wrapper of a DDP module runs: DDP's forward eagerly, its wrapped module captured.

    Each call calls the DDP module (its hooks, its forward, its reducer bookkeeping) with the wrapped
    module's ``forward`` replaced, for that call only, by ``wrapped_forward`` (the wrapped module's
    captured forward); hooks registered on the wrapped module run eagerly around it, as
    ``nn.Module.__call__`` runs them.

    Example::

        ddp = DistributedDataParallel(model)
        compiled = capture.optimize(backend)(ddp)    # model's forward is captured; DDP's runs eagerly
    """
    wrapped = module.module
    assert isinstance(wrapped, torch.nn.Module)
    lock = threading.RLock()

    def call_data_parallel(*args: Any, **kwargs: Any) -> Any:
        with lock, forward_replaced(wrapped, wrapped_forward):
            return module(*args, **kwargs)

    return call_data_parallel


def has_keyword_hooks(module: torch.nn.Module) -> bool:
    """Whether `module` has forward hooks taking keyword arguments (FSDP2's), which capture cannot inline."""
    return bool(getattr(module, "_forward_pre_hooks_with_kwargs", None) or getattr(module, "_forward_hooks_with_kwargs", None))


def with_hooked_submodules_captured(module: torch.nn.Module, forward: Callable[..., Any],
                                    capture_module: Callable[[torch.nn.Module], Callable[..., Any]]) -> Callable[..., Any]:
    """`forward` (the captured forward of `module`), calling its hook-taking-keywords submodules captured too.

    The outermost submodules with keyword hooks (`has_keyword_hooks`) each get their own captured
    forward (``capture_module(submodule)``), installed as the submodule's ``forward`` for the length
    of each call of the result; their calls are graph breaks in `module`'s graph, so
    ``nn.Module.__call__`` runs their hooks eagerly around their captured forward. Returns `forward`
    itself when there are none.
    """
    hooked: list[tuple[str, torch.nn.Module]] = []
    for name, sub in module.named_modules():
        if sub is not module and has_keyword_hooks(sub) and not any(name.startswith(f"{h}.") for h, _ in hooked):
            hooked.append((name, sub))
    if not hooked:
        return forward
    replacements = [(sub, capture_module(sub)) for _, sub in hooked]

    def forward_with_submodules_captured(*args: Any, **kwargs: Any) -> Any:
        with contextlib.ExitStack() as stack:
            for sub, captured in replacements:
                stack.enter_context(forward_replaced(sub, captured))
            return forward(*args, **kwargs)

    return forward_with_submodules_captured


@contextlib.contextmanager
def forward_replaced(module: torch.nn.Module, forward: Any) -> Iterator[None]:
    """`module.forward` is `forward` inside the block; the instance's own forward (if any) after."""
    saved = module.__dict__.get("forward", _MISSING)
    module.__dict__["forward"] = forward
    try:
        yield
    finally:
        if saved is _MISSING:
            module.__dict__.pop("forward", None)
        else:
            module.__dict__["forward"] = saved
