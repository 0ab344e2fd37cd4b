"""Python operators (`+`, `<`, `x[i]`, `-x`, ...) applied to variable trackers."""

from __future__ import annotations

import operator
import types
from collections.abc import Sized
from typing import TYPE_CHECKING, Any, cast

import torch

from capture.sources import ItemSource
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.common import BINARY_OPERATORS, INPLACE_OPERATORS
from capture.variables.containers import DictVariable, ListVariable, TupleVariable
from capture.variables.mixed_builtins import known_index_or_fail
from capture.variables.model_output import ModelOutputVariable
from capture.variables.ndarray import NdarrayVariable, ndarray_operator
from capture.variables.objects import NNModuleVariable, PythonObjectVariable
from capture.variables.sizes import SizeVariable
from capture.variables.sym_values import SymNodeVariable, SymSliceVariable, record
from capture.variables.tensor import TensorVariable
from capture.variables.user_objects import NewObjectVariable, dunder_call

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator

_INPLACE_TO_BINARY = dict(zip(INPLACE_OPERATORS, BINARY_OPERATORS))


def _contains_tensor(value: VariableTracker) -> bool:
    if isinstance(value, TensorVariable):
        return True
    if isinstance(value, (TupleVariable, ListVariable)):
        return any(_contains_tensor(item) for item in value.items)
    return False


def apply_operator(tx: InstructionTranslator, fn: Any, args: list[VariableTracker]) -> VariableTracker:
    """Apply `fn` (an operator.* function) to trackers: fold constants, record tensor work."""
    if fn is operator.not_:
        return ConstantVariable(not args[0].truth(tx))
    if fn is operator.truth:
        return ConstantVariable(args[0].truth(tx))
    if all(a.is_constant() for a in args):
        try:
            return ConstantVariable(fn(*[a.as_constant() for a in args]))
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
    if any(isinstance(a, NdarrayVariable) for a in args):  # NumPy's semantics, traced as tensors
        return ndarray_operator(tx, fn, args)
    if fn is operator.getitem:
        if isinstance(args[0], (NewObjectVariable, PythonObjectVariable)):
            result = dunder_call(tx, "getitem", args)
            if result is not None:
                return result
        return _getitem(tx, args[0], args[1])
    if fn is operator.contains:
        return _contains(tx, args[0], args[1])
    if any(isinstance(a, TensorVariable) for a in args) or any(_contains_tensor(a) for a in args[1:2]):
        if not isinstance(args[0], TensorVariable):  # `number += tensor` rebinds: the binary operator
            fn = _INPLACE_TO_BINARY.get(fn, fn)
        return tx.output.call_graph("call_function", fn, args, {})
    if any(isinstance(a, SymNodeVariable) for a in args) and \
            all(isinstance(a, SymNodeVariable) or a.is_constant() for a in args):
        binary = _INPLACE_TO_BINARY.get(fn, fn)
        if binary in (operator.floordiv, operator.mod) and not _known_positive(args[1]):
            # torch's ShapeEnv folds `(s // -3) // -3` into `s // 9`, which holds for positive
            # divisors only (7 gives 0, Python 1): such a division is computed on the values,
            # each specialized with a guard.
            return ConstantVariable(binary(args[0].as_constant(), args[1].as_constant()))
        # Arithmetic and comparisons on sizes of dynamic dims: traced as SymInt/SymFloat/SymBool nodes.
        return record(tx.output, binary, args)
    return _sequence_operator(tx, fn, args)


def _sequence_operator(tx: InstructionTranslator, fn: Any, args: list[VariableTracker]) -> VariableTracker:
    binary = _INPLACE_TO_BINARY.get(fn, fn)
    if any(isinstance(a, (NewObjectVariable, PythonObjectVariable)) for a in args):
        result = dunder_call(tx, binary.__name__, args)
        if result is not None:
            return result
    if len(args) == 2:
        left, right = args
        if binary is operator.add:  # `x.shape[:1] + (heads,) + x.shape[1:]`: a constant tuple or Size, as items
            left, right = _constant_sequence(left), _constant_sequence(right)
        if binary is operator.add and _tuple_like(left) and _tuple_like(right):
            # torch.Size + tuple and tuple + torch.Size are a torch.Size (as in eager)
            items = left.items + right.items  # type: ignore[attr-defined]
            return SizeVariable(items) if isinstance(left, SizeVariable) or isinstance(right, SizeVariable) \
                else TupleVariable(items)
        if binary is operator.add and isinstance(left, (TupleVariable, ListVariable)) and \
                type(left) is type(right):
            if fn is operator.iadd and isinstance(left, ListVariable):
                left.items.extend(right.items)  # type: ignore[union-attr]
                left.mark_mutated(tx)
                return left
            return type(left)(left.items + right.items)  # type: ignore[union-attr]
        if binary is operator.mul and isinstance(left, (TupleVariable, ListVariable)) and right.is_constant():
            return type(left)(left.items * int(right.as_constant()))
        if fn in (operator.eq, operator.ne):
            same = _structurally_equal(tx, left, right)
            return ConstantVariable(same if fn is operator.eq else not same)
    raise Unsupported(f"operator {fn.__name__} on {', '.join(type(a).__name__ for a in args)}")


def _constant_sequence(value: VariableTracker) -> VariableTracker:
    """A constant tuple or torch.Size as a tuple tracker of its items (other values unchanged)."""
    if isinstance(value, ConstantVariable) and type(value.value) in (tuple, torch.Size):
        items: list[VariableTracker] = [ConstantVariable(item) for item in value.value]
        return SizeVariable(items) if type(value.value) is torch.Size else TupleVariable(items)
    return value


def _tuple_like(value: VariableTracker) -> bool:
    return isinstance(value, TupleVariable) and (value.cls is None or isinstance(value, SizeVariable))


def _structurally_equal(tx: InstructionTranslator, left: VariableTracker, right: VariableTracker) -> bool:
    sequences = (TupleVariable, ListVariable)
    if isinstance(left, sequences) and isinstance(right, sequences):
        if isinstance(left, ListVariable) != isinstance(right, ListVariable) or len(left.items) != len(right.items):
            return False  # a torch.Size equals a tuple of the same sizes
        return all(_structurally_equal(tx, a, b) for a, b in zip(left.items, right.items))
    numbers = (ConstantVariable, SymNodeVariable)
    if isinstance(left, SymNodeVariable) or isinstance(right, SymNodeVariable):
        if isinstance(left, numbers) and isinstance(right, numbers):  # `x.shape == y.shape`: guards sizes
            return record(tx.output, operator.eq, [left, right]).truth(tx)
    if left.is_constant() and right.is_constant():
        return bool(left.as_constant() == right.as_constant())
    if isinstance(left, sequences) != isinstance(right, sequences) and (left.is_constant() or right.is_constant()):
        return False
    if _equality_is_identity(left) and _equality_is_identity(right):
        return identical(left, right, tx)  # `obj == None`, `cls == type(x)`: neither defines __eq__
    raise Unsupported(f"== between {left} and {right}")


def _equality_is_identity(value: VariableTracker) -> bool:
    """True when `==` on this value falls back to `is` (None, an object or a class with no `__eq__` of its
    own: `object.__eq__` answers NotImplemented for anything but itself)."""
    if value.is_constant():
        return value.as_constant() is None
    if not isinstance(value, PythonObjectVariable):
        return False
    kind = type(value.value)
    return getattr(kind, "__eq__", None) in (object.__eq__, type.__eq__) and \
        getattr(kind, "__ne__", None) in (object.__ne__, type.__ne__)


def _getitem(tx: InstructionTranslator, container: VariableTracker, index: VariableTracker) -> VariableTracker:
    if isinstance(container, TensorVariable):
        return tx.output.call_graph("call_function", operator.getitem, [container, index], {})
    if isinstance(index, TensorVariable) and isinstance(container, (TupleVariable, ListVariable)):
        index = known_index_or_fail(index)  # `items[torch.tensor(1)]`: Python calls the tensor's __index__
    if not index.is_constant() and not isinstance(index, (SymNodeVariable, SymSliceVariable)):
        raise Unsupported(f"indexing {type(container).__name__} with a non-constant index")
    key = index.as_constant()  # a symbolic index into a Python sequence specializes (with a guard)
    if isinstance(container, (TupleVariable, ListVariable)):
        try:
            selected = container.items[key]
        except (IndexError, TypeError) as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        if isinstance(key, slice):
            if isinstance(container, SizeVariable):
                return SizeVariable(selected)
            return type(container)(selected) if isinstance(container, ListVariable) else TupleVariable(selected)
        return cast(VariableTracker, selected)  # one item: the key is an index
    if isinstance(container, ModelOutputVariable):
        return container.getitem(key)
    if isinstance(container, DictVariable):
        found = container.lookup(key)
        if found is None:
            raise Unsupported(f"KeyError: {key!r}", user_error=True) from KeyError(key)
        return found
    if isinstance(container, NNModuleVariable):
        module = container.module
        try:
            selected = cast(Any, module)[key]
        except (IndexError, KeyError, TypeError) as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)) and \
                isinstance(key, slice) and (container.source is not None or container.child_sources is not None):
            return container.sliced(tx, key)
        if container.child_sources is not None and isinstance(key, int):
            return tx.output.wrap_value(selected, container.child_source(range(len(cast(Sized, module)))[key]))
        source = ItemSource(container.source, key) if container.source is not None else None
        return tx.output.wrap_value(selected, source)
    raise Unsupported(f"indexing {container}")


def _known_positive(divisor: VariableTracker) -> bool:
    """Whether a divisor is a positive number, or a symbolic int the ShapeEnv knows is positive."""
    if isinstance(divisor, SymNodeVariable):
        expr = getattr(divisor.value.node, "expr", None)
        return bool(getattr(expr, "is_positive", False))
    value = divisor.as_constant()
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _contains(tx: InstructionTranslator, container: VariableTracker, item: VariableTracker) -> VariableTracker:
    if isinstance(container, PythonObjectVariable) and container.source is not None and item.is_constant():
        # Evaluated now, and guarded by evaluating it again on every call.
        key = item.as_constant()
        try:
            result = key in container.value
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        expr = container.source.expr()
        name = tx.output.guards.constant(key)
        tx.output.guards.add("CONTAINS", container.source, f"({name} in {expr}) is {result}",
                             f"({key!r} in {expr}) is {result}")
        return ConstantVariable(result)
    if isinstance(container, DictVariable) and item.is_constant():
        return ConstantVariable(container.lookup(item.as_constant()) is not None)
    if isinstance(container, (TupleVariable, ListVariable)) and item.is_constant() and \
            all(i.is_constant() for i in container.items):
        return ConstantVariable(item.as_constant() in [i.as_constant() for i in container.items])
    container = _constant_sequence(container)
    numbers = (ConstantVariable, SymNodeVariable)
    if isinstance(container, (TupleVariable, ListVariable)) and isinstance(item, numbers) and \
            all(isinstance(i, numbers) for i in container.items):
        # `0 in x.shape` with symbolic sizes: compared item by item as Python does, each comparison guarded.
        return ConstantVariable(any(_structurally_equal(tx, i, item) for i in container.items))
    if isinstance(container, (TupleVariable, ListVariable)):
        return ConstantVariable(_contains_by_items(tx, container.items, item))
    raise Unsupported("`in` over traced values")


def _contains_by_items(tx: InstructionTranslator, items: list[VariableTracker], item: VariableTracker) -> bool:
    """`item in [1, 2, t]` as CPython runs it: each element in turn is the item (`is`) or equal to it, and
    the walk stops at the first match, so a tensor only past a match is never compared. Comparing a tensor
    with `==` reads its data: a graph break there."""
    for element in items:
        tensors = isinstance(element, TensorVariable), isinstance(item, TensorVariable)
        if any(tensors) and (element.is_constant() or item.is_constant()):
            raise Unsupported("`in` compares a tensor with a Python value (`==` reads the tensor's data)")
        if identical(element, item, tx):
            return True
        if any(tensors):
            raise Unsupported("`in` compares tensors with `==`, which reads their data")
        if _structurally_equal(tx, element, item):
            return True
    return False


def _same_tensor(tx: InstructionTranslator, left: TensorVariable, right: TensorVariable) -> bool:
    """`left is right` for tensors: the same fake (an in-place op returns its input); two existing
    tensors found distinct must stay distinct on later calls (a guard)."""
    if left.example is right.example:
        return True
    sources = [v.value_source for v in (left, right)]
    if left.value is not None and right.value is not None and sources[0] is not None and sources[1] is not None:
        check = f"{sources[0].expr()} is not {sources[1].expr()}"
        tx.output.guards.add("DISTINCT_INPUT", sources[0], check, check, subjects=(sources[0].expr(), sources[1].expr()))
    return False


def identical(left: VariableTracker, right: VariableTracker, tx: InstructionTranslator) -> bool:
    """`left is right` for trackers, decided at trace time (guarded where it relies on the inputs)."""
    if left is right:
        return True
    if left.is_constant() and right.is_constant():
        return left.as_constant() is right.as_constant()
    if isinstance(left, TensorVariable) and isinstance(right, TensorVariable):
        return _same_tensor(tx, left, right)
    for side in (left, right):
        if side.is_constant() and side.as_constant() is None:
            return False
    values = [getattr(v, "module", getattr(v, "value", getattr(v, "fn", None))) for v in (left, right)]
    if values[0] is not None and values[1] is not None:
        same = values[0] is values[1]
        sources = [v.source for v in (left, right)]
        identity_guarded = all(isinstance(v, (torch.nn.Module, type, types.ModuleType)) for v in values)
        if sources[0] is not None and sources[1] is not None and not sources[0].guard_free and \
                not sources[1].guard_free and sources[0].expr() != sources[1].expr() and not identity_guarded:
            # Objects guarded by type only (user instances) may be the same object on one call and not
            # on the next: the answer holds while the identity does.
            check = f"({sources[0].expr()} is {sources[1].expr()}) is {same}"
            tx.output.guards.add("IDENTITY", sources[0], check, check, subjects=(sources[0].expr(), sources[1].expr()))
        return same
    raise Unsupported(f"`is` between {left} and {right}")
