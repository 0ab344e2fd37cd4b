"""Sources: where a value the trace read lives, as a Python expression over the frame.

Generated guard and entry functions take three arguments: `L` (the frame's argument values, in
`co_varnames` order), `G` (the function's globals) and `C` (its closure cells). A source renders
itself as an expression over those names, e.g. ``L[0].lin.weight``.
"""

from __future__ import annotations

from dataclasses import dataclass


class Source:
    """Base class: a path from the frame's inputs to a value."""

    def expr(self) -> str:
        """The Python expression (over L, G, C) that evaluates to the value."""
        raise NotImplementedError

    def name_hint(self) -> str:
        """A short identifier-like name, used for graph placeholders."""
        raise NotImplementedError

    @property
    def guard_free(self) -> bool:
        """True when values read through this source need no guard (fixed attributes of library modules:
        `variables.objects.is_fixed_library_attribute`)."""
        return False


@dataclass(frozen=True)
class LocalSource(Source):
    """The frame's argument number `index`, named `name`."""

    index: int
    name: str

    def expr(self) -> str:
        return f"L[{self.index}]"

    def name_hint(self) -> str:
        return self.name


@dataclass(frozen=True)
class GlobalSource(Source):
    """A name in the function's globals."""

    name: str

    def expr(self) -> str:
        return f"G[{self.name!r}]"

    def name_hint(self) -> str:
        return self.name


@dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of closure cell number `index` (free variable `name`)."""

    index: int
    name: str

    def expr(self) -> str:
        return f"C[{self.index}].cell_contents"

    def name_hint(self) -> str:
        return self.name


@dataclass(frozen=True)
class AttrSource(Source):
    """`base.attr`."""

    base: Source
    attr: str
    of_python_module: bool = False

    def expr(self) -> str:
        if self.attr.isidentifier() and not self.attr.startswith("__"):
            return f"{self.base.expr()}.{self.attr}"
        return f"getattr({self.base.expr()}, {self.attr!r})"

    def name_hint(self) -> str:
        return f"{self.base.name_hint()}_{self.attr}"

    @property
    def guard_free(self) -> bool:
        return self.of_python_module


@dataclass(frozen=True)
class ItemSource(Source):
    """`base[key]` for a constant key."""

    base: Source
    key: object

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.key!r}]"

    def name_hint(self) -> str:
        return f"{self.base.name_hint()}_{self.key}"


@dataclass(frozen=True)
class PureCallSource(Source):
    """`owner_type.method(base, *args)` for a read-only builtin method and constant arguments."""

    base: Source
    owner_type: str
    method: str
    args: tuple[object, ...]

    def expr(self) -> str:
        rendered = "".join(f", {a!r}" for a in self.args)
        return f"{self.owner_type}.{self.method}({self.base.expr()}{rendered})"

    def name_hint(self) -> str:
        return f"{self.base.name_hint()}_{self.method}"


@dataclass(frozen=True)
class ExpressionSource(Source):
    """A Python expression over the arguments (`text`, e.g. ``(L[1] / 3)``), computed by the entry on every call;
    its operands are guarded where they are read."""

    text: str
    hint: str = "number"

    def expr(self) -> str:
        return self.text

    def name_hint(self) -> str:
        return self.hint


@dataclass(frozen=True)
class ScalarTensorSource(Source):
    """`torch.scalar_tensor(base, dtype=torch.float64)`: a Python number read on every call as the 0-d tensor a
    graph input holds (`torch_name` is the guard namespace's name of `torch`, `dtype` e.g. ``"torch.int64"``).
    Made anew on each call, so it needs no guard of its own: `base` is guarded to be a float (an int)."""

    base: Source
    torch_name: str
    dtype: str = "torch.float64"

    def expr(self) -> str:
        dtype = self.dtype.replace("torch.", f"{self.torch_name}.", 1)
        return f"{self.torch_name}.scalar_tensor({self.base.expr()}, dtype={dtype})"

    def name_hint(self) -> str:
        return self.base.name_hint()

    @property
    def guard_free(self) -> bool:
        return True


@dataclass(frozen=True)
class ObjectSource(Source):
    """An object the trace met without a path from the inputs: referenced directly by the generated code.

    Reads through it (attributes, items) are still guarded, since the object's state may change.
    """

    name: str
    hint: str = "obj"

    def expr(self) -> str:
        return self.name

    def name_hint(self) -> str:
        return self.hint
