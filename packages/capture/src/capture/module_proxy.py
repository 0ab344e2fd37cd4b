"""The part of a compiled module's wrapper that stands in for the original `nn.Module`."""

from __future__ import annotations

from typing import Any, TypeVar

import torch

__all__ = ["ModuleProxy"]

Self = TypeVar("Self", bound="ModuleProxy")


class ModuleProxy:
    """Forwards attribute reads and writes, `dir()`, `train()` and `eval()` to `_orig_mod` (set with
    `object.__setattr__` by the subclass); `train()`/`eval()` return the wrapper."""

    _orig_mod: torch.nn.Module

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_orig_mod"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._orig_mod, name, value)

    def __dir__(self) -> list[str]:
        return dir(self._orig_mod)

    def train(self: Self, mode: bool = True) -> Self:
        """Set training mode on the original module."""
        self._orig_mod.train(mode)
        return self

    def eval(self: Self) -> Self:
        """Set eval mode on the original module."""
        self._orig_mod.eval()
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._orig_mod!r})"
