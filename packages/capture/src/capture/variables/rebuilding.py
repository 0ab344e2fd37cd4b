"""What rebuilding values made in the traced region needs below the reconstructor: the helpers the
generated code calls at run time, and the error for a value that has no Python form."""

from __future__ import annotations

import types
from typing import Any


def new_object(cls: type, attrs: dict[str, Any]) -> Any:
    """Rebuild an object made in the traced region (attributes set directly, as its __init__ did)."""
    instance: Any = object.__new__(cls)
    instance.__dict__.update(attrs)
    return instance


def make_function(code: types.CodeType, f_globals: dict[str, Any], defaults: tuple[Any, ...],
                  kwdefaults: dict[str, Any], closure: tuple[Any, ...] = ()) -> types.FunctionType:
    """Rebuild a function made in the traced region (a lambda, a comprehension, a closure over cells)."""
    fn = types.FunctionType(code, f_globals, code.co_name, defaults or None, closure or None)
    fn.__kwdefaults__ = kwdefaults or None
    fn.__qualname__ = code.co_qualname
    return fn


class CannotReconstruct(Exception):
    """A live value has no Python form (e.g. a closure made in the region): resume is impossible."""
