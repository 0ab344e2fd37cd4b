"""HuggingFace `ModelOutput` objects (dict-subclass dataclasses) made in the traced region."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.containers import DictVariable, TupleVariable

if TYPE_CHECKING:
    from capture.sources import Source
    from capture.variables.tracer import Tracer


def is_model_output_class(cls: Any) -> bool:
    """True for subclasses of `transformers.utils.generic.ModelOutput` that are dataclasses."""
    if not isinstance(cls, type) or not issubclass(cls, dict) or not dataclasses.is_dataclass(cls):
        return False
    return any(klass.__name__ == "ModelOutput" and (klass.__module__ or "").startswith("transformers")
               for klass in cls.__mro__)


def _is_none(value: VariableTracker) -> bool:
    return value.is_constant() and value.as_constant() is None


class ModelOutputVariable(DictVariable):
    """A `ModelOutput`: a dict of its non-None fields, whose fields are also attributes.

    Indexing with a string reads a key; with an int or a slice, the tuple of non-None values
    (`to_tuple()`), as `ModelOutput.__getitem__` does.
    """

    def __init__(self, cls: type, fields: dict[str, VariableTracker], source: Source | None = None) -> None:
        super().__init__({name: value for name, value in fields.items() if not _is_none(value)}, source)
        self.cls = cls
        self.fields = dict(fields)

    @classmethod
    def construct(cls, output_cls: type, args: list[VariableTracker],
                  kwargs: dict[str, VariableTracker]) -> ModelOutputVariable:
        """`output_cls(*args, **kwargs)` with dataclass field defaults (no `__post_init__` special cases)."""
        names = [field.name for field in dataclasses.fields(output_cls)]
        if len(args) > len(names) or any(name not in names for name in kwargs):
            raise Unsupported(f"{output_cls.__name__}(...) with unexpected arguments", user_error=True)
        values: dict[str, VariableTracker] = dict(zip(names, args))
        values.update(kwargs)
        for field in dataclasses.fields(output_cls):
            if field.name not in values:
                if field.default is dataclasses.MISSING:
                    raise Unsupported(f"{output_cls.__name__}() without a value for {field.name!r}")
                values[field.name] = ConstantVariable(field.default)
        first = values[names[0]] if names else None
        others_none = all(_is_none(values[name]) for name in names[1:])
        if first is not None and others_none and not first.is_constant() and \
                first.python_type() not in (type(None),) and isinstance(first, (DictVariable, TupleVariable)):
            raise Unsupported(f"{output_cls.__name__} built from a mapping or an iterable")
        return cls(output_cls, {name: values[name] for name in names})

    def python_type(self) -> type:
        return self.cls

    def to_tuple(self) -> TupleVariable:
        """The non-None values, in field order."""
        return TupleVariable(list(self.items.values()))

    def getitem(self, key: Any) -> VariableTracker:
        """`output[key]`: string keys read the dict, ints and slices the tuple of values."""
        if isinstance(key, str):
            if key not in self.items:
                raise Unsupported(f"KeyError: {key!r}", user_error=True) from KeyError(key)
            return self.items[key]
        values = list(self.items.values())
        try:
            selected = values[key]
        except (IndexError, TypeError) as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        return TupleVariable(selected) if isinstance(key, slice) else selected

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name in self.items:
            return self.items[name]
        if name in self.fields:
            return self.fields[name]
        if name == "to_tuple":
            return _ToTupleMethod(self)
        if name == "__class__":
            return tx.output.wrap_value(self.cls, None)
        if name in ("items", "keys", "values", "get"):  # ModelOutput refuses pop/update/setdefault/...
            return super().getattr(tx, name)
        raise Unsupported(f"{self.cls.__name__}.{name}")

    def setattr(self, name: str, value: VariableTracker) -> None:
        """`output.name = value`: the attribute, and the key when it exists and the value is not None."""
        self._refuse_if_existing()
        if name not in self.fields:
            raise Unsupported(f"setting attribute {name!r} on a {self.cls.__name__}")
        self.fields[name] = value
        if name in self.items and not _is_none(value):
            self.items[name] = value

    def setitem(self, key: Any, value: VariableTracker) -> None:
        """`output[key] = value`: the key and the attribute of that name."""
        self._refuse_if_existing()
        self.items[key] = value
        if key in self.fields:
            self.fields[key] = value

    def _refuse_if_existing(self) -> None:
        if self.source is not None:
            raise Unsupported(f"mutating a {self.cls.__name__} passed into the captured region")

    def rebuild_fields(self) -> dict[str, VariableTracker]:
        """Field values (keys set by item assignment included) to call the class with."""
        merged = dict(self.fields)
        merged.update({k: v for k, v in self.items.items() if k in self.fields})
        return merged

    def __repr__(self) -> str:
        return f"ModelOutputVariable({self.cls.__name__}, {list(self.items)})"


class _ToTupleMethod(VariableTracker):
    def __init__(self, output: ModelOutputVariable) -> None:
        self.output = output

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if args or kwargs:
            raise Unsupported("to_tuple() takes no arguments", user_error=True)
        return self.output.to_tuple()
