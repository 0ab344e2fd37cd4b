"""`OptimizedModule`: the one wrapper a compiled `nn.Module` becomes.

It is an `nn.Module` whose call runs a compiled forward of the original module, and which shares
everything else with it: parameters and buffers are the original's (an optimizer built on either
sees the same tensors), ``state_dict()`` has the original's keys, attribute reads and writes reach
the original, ``train()``/``eval()``/``to()`` apply to it. What runs on a call is given by whoever
builds the wrapper: capture gives the captured forward with the original's forward hooks around it
(`capture.context.module_call`), or DDP's own call around its captured inner module
(`capture.distributed.data_parallel_call`); the frontend adds its compile record (``kiln_context``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

__all__ = ["OptimizedModule"]

_OWN_ATTRIBUTES = frozenset({"_orig_mod", "_kiln_original", "training", "forward", "kiln_context"})


class OptimizedModule(nn.Module):
    """A compiled view of `module`: same state, compiled call.

    Args:
        module: the original module (``_orig_mod``, also reachable as ``original``).
        call: what calling the wrapper runs (the original's hooks included); it is also the
            wrapper's ``forward``, so ``nn.Module.__call__`` reaches it without another frame.
    """

    _orig_mod: nn.Module

    def __init__(self, module: nn.Module, call: Callable[..., Any]) -> None:
        super().__init__()
        self._orig_mod = module
        object.__setattr__(self, "_kiln_original", module)
        object.__setattr__(self, "forward", call)
        self.training = module.training

    @property
    def original(self) -> nn.Module:
        """The module that was compiled."""
        return self._orig_mod

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the compiled call (replaced per instance by the `call` given to the constructor)."""
        raise NotImplementedError  # pragma: no cover - every instance has its own forward

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "_orig_mod":
                raise
            return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN_ATTRIBUTES or "_orig_mod" not in self.__dict__.get("_modules", {}):
            super().__setattr__(name, value)
        elif hasattr(self._orig_mod, name) or not name.startswith("_"):
            setattr(self._orig_mod, name, value)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if name not in _OWN_ATTRIBUTES and hasattr(self._orig_mod, name):
            delattr(self._orig_mod, name)
        else:
            super().__delattr__(name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"

    # State is the original's, under the original's names.
    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """The original module's state_dict (same keys as without compiling)."""
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """Load into the original module; keys saved with a ``_orig_mod.`` prefix are accepted too."""
        prefix = "_orig_mod."
        if state_dict and all(key.startswith(prefix) for key in state_dict):
            state_dict = {key[len(prefix):]: value for key, value in state_dict.items()}
        return self._orig_mod.load_state_dict(state_dict, strict=strict, assign=assign)

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, nn.Parameter]]:
        """The original module's parameters, with its names."""
        return self._orig_mod.named_parameters(prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """The original module's buffers, with its names."""
        return self._orig_mod.named_buffers(prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)

    def train(self, mode: bool = True) -> OptimizedModule:
        """Set training mode on the original module (and this wrapper)."""
        self._orig_mod.train(mode)
        object.__setattr__(self, "training", mode)
        return self
