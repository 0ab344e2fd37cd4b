"""Wrapping existing Python values (arguments, globals, attributes) into trackers, with guards."""

from __future__ import annotations

import builtins
import functools
import sys
import types
from typing import TYPE_CHECKING, Any

import torch

from capture.libraries import is_stdlib_or_skipped
from capture.registry import MARKS
from capture.sources import AttrSource, ItemSource, Source
from capture.variables import upcalls
from capture.variables.base import ConstantVariable, VariableTracker, class_attribute, is_constant_value
from capture.variables.builtins import BREAKING_BUILTINS, BUILTIN_HANDLERS, BuiltinVariable
from capture.variables.common import OPERATOR_FUNCTIONS
from capture.variables.containers import (
    DICT_METHODS,
    LIST_METHODS,
    DictVariable,
    ListVariable,
    TupleVariable,
    is_literal_key,
)
from capture.variables.context_managers import GradModeRestorer, WithExitVariable
from capture.variables.functional import FunctionalVariable, PartialVariable
from capture.variables.functions import BoundMethodVariable, UserFunctionVariable
from capture.variables.library import library_callable
from capture.variables.model_output import ModelOutputVariable, is_model_output_class
from capture.variables.ndarray import wrap_ndarray_input
from capture.variables.objects import (
    TRACE_TIME_FUNCTIONS,
    NNModuleVariable,
    PythonObjectVariable,
    SkippedFunctionVariable,
    TorchFunctionVariable,
)
from capture.variables.tensor import TensorSubclassVariable, has_subclass_semantics

if TYPE_CHECKING:
    from capture.symbolic.output_graph import OutputGraph

_TORCH_CLASSES_CALLABLE = {torch.no_grad, torch.enable_grad, torch.set_grad_enabled, torch.device, torch.Size,
                           torch.finfo, torch.iinfo, torch.inference_mode, torch.autocast}


def wrap_existing(output: OutputGraph, value: Any, source: Source | None) -> VariableTracker:
    """The tracker for `value`, read through `source` (None: a value made at trace time)."""
    guards = output.guards if source is not None and not source.guard_free else None
    if isinstance(value, torch.Tensor):
        if has_subclass_semantics(value):
            if guards is not None and source is not None:
                guards.type_is(source, value)
            return TensorSubclassVariable(value, source)
        if source is None:
            return output.module_tensor(value, None, "constant")
        if isinstance(value, torch.nn.Parameter):
            return output.module_tensor(value, source, "param")
        return output.add_input(value, source)
    if type(value).__name__ == "ndarray" and type(value).__module__ == "numpy":
        return wrap_ndarray_input(output, value, source)  # a graph input, as a tensor with NumPy's semantics
    if isinstance(value, torch.nn.Module):
        if guards is not None and source is not None:
            guards.identity(source, value)
            guards.add("MODULE_TRAINING", source, f"{source.expr()}.training is {value.training}",
                       f"{source.expr()}.training is {value.training}")
        output.keepalive.append(value)
        return NNModuleVariable(value, source)
    if is_constant_value(value) and (not isinstance(value, (tuple, frozenset)) or type(value) is torch.Size):
        if guards is not None and source is not None:
            guards.equals(source, value)
        return ConstantVariable(value, source)
    if type(value) in (tuple, list) or (isinstance(value, tuple) and hasattr(value, "_fields")):
        if guards is not None and source is not None:
            guards.type_is(source, value)
        if type(value) is list and source is not None:
            # Read on first use: a list the region only appends to keeps its length unguarded.
            return ListVariable.unread(source, functools.partial(_read_items, output, list(value), source))
        return TupleVariable(_read_items(output, value, source), source,
                             cls=type(value) if type(value) is not tuple else None)
    if source is not None and is_model_output_class(type(value)) and all(isinstance(k, str) for k in value):
        if guards is not None:
            guards.type_is(source, value)
            keys = list(value.keys())
            guards.add("DICT_KEYS", source, f"list({source.expr()}.keys()) == {keys!r}",
                       f"keys of {source.expr()} are {keys!r}")
        fields = {name: output.wrap_value(value[name], ItemSource(source, name)) if name in value
                  else ConstantVariable(None) for name in type(value).__dataclass_fields__}
        return ModelOutputVariable(type(value), fields, source)
    if type(value) is dict and all(is_literal_key(k) for k in value):
        if guards is not None and source is not None:
            guards.type_is(source, value)
        if source is not None:
            # Read on first use: a dict the region only assigns items to keeps its keys unguarded.
            return DictVariable.unread(source, functools.partial(_read_entries, output, value, source),
                                       functools.partial(_read_entry, output, value, source))
        return DictVariable({k: _wrap_item(output, v, None) for k, v in value.items()})
    return wrap_callable_or_object(output, value, source)


def _read_items(output: OutputGraph, value: list[Any] | tuple[Any, ...], source: Source | None) -> list[VariableTracker]:
    """The trackers of a list's or tuple's items, guarding its length (the items guard themselves)."""
    if source is not None and not source.guard_free:
        expr = source.expr()
        output.guards.add("LENGTH", source, f"len({expr}) == {len(value)}", f"len({expr}) == {len(value)}")
    return [_wrap_item(output, item, ItemSource(source, i) if source is not None else None)
            for i, item in enumerate(value)]


def _read_entries(output: OutputGraph, value: dict[Any, Any], source: Source) -> dict[Any, VariableTracker]:
    """The trackers of a dict's entries, guarding its keys (the values guard themselves)."""
    if not source.guard_free:
        keys = list(value.keys())
        output.guards.add("DICT_KEYS", source, f"list({source.expr()}.keys()) == {keys!r}",
                          f"keys of {source.expr()} are {keys!r}")
    return {k: _wrap_item(output, v, ItemSource(source, k)) for k, v in value.items()}


def _read_entry(output: OutputGraph, value: dict[Any, Any], source: Source, key: Any) -> VariableTracker | None:
    """The tracker of one entry of a dict (None: missing), guarding that the dict has the key or has not."""
    present = key in value
    if not source.guard_free:
        expr = source.expr()
        name = output.guards.constant(key)
        output.guards.add("CONTAINS", source, f"({name} in {expr}) is {present}", f"({key!r} in {expr}) is {present}")
    return _wrap_item(output, value[key], ItemSource(source, key)) if present else None


def _wrap_item(output: OutputGraph, value: Any, source: Source | None) -> VariableTracker:
    """An item of an existing list, tuple or dict: through `OutputGraph.wrap_value` when it has a source, so a
    list or object reached both as ``d["a"]`` and as ``LOG`` is one tracker (its mutations seen through both)."""
    return output.wrap_value(value, source) if source is not None else wrap_existing(output, value, None)


def wrap_callable_or_object(output: OutputGraph, value: Any, source: Source | None) -> VariableTracker:
    """Functions, builtins, torch callables, modules and plain objects."""
    guards = output.guards if source is not None and not source.guard_free else None
    if isinstance(value, types.MethodType) and not getattr(value, "_kiln_disabled", False):
        inner = classify(value.__func__, None)
        if isinstance(inner, UserFunctionVariable):
            if guards is not None and source is not None:
                guards.type_is(source, value)
                guards.identity(AttrSource(source, "__func__"), value.__func__)
            receiver_source = AttrSource(source, "__self__") if source is not None else None
            return BoundMethodVariable(inner, output.wrap_value(value.__self__, receiver_source))
    if source is not None and _made_at_each_read(value):
        return _wrap_bound_method(output, value, source)
    if type(value) is functools.partial:
        return _wrap_partial(output, value, source)
    if isinstance(value, GradModeRestorer):
        # Made anew by each run of the code before a break inside a grad-mode with-block: guarded by
        # what it restores, not by identity (which recompiled the resume function on every call).
        if guards is not None and source is not None:
            guards.type_is(source, value)
            guards.equals(AttrSource(source, "previous"), value.previous)
        return WithExitVariable(value.previous)
    tracker = classify(value, source)
    if source is not None and isinstance(tracker, UserFunctionVariable) and made_per_call(value):
        return _wrap_function_by_parts(output, value, source)
    if guards is not None and source is not None:
        if isinstance(tracker, PythonObjectVariable) and not isinstance(value, (types.ModuleType, type)):
            guards.type_is(source, value)
        else:
            guards.identity(source, value)
    return tracker


def made_per_call(value: Any) -> bool:
    """A plain nested function or lambda (``def act(t): ...`` inside a forward, ``lambda t: t * s`` passed in):
    made anew on each call of the function defining it, so guarding it by identity recompiles on every call."""
    return type(value) is types.FunctionType and "<locals>" in value.__qualname__ and not value.__dict__


def _wrap_function_by_parts(output: OutputGraph, value: types.FunctionType, source: Source) -> VariableTracker:
    """A nested function guarded through what it is made of: its type, code and globals by identity, no function
    attributes (a decorator's ``__wrapped__``); its defaults when a call uses them and its closure cells' contents
    when read (`UserFunctionVariable.closure_cells`; the cells themselves `ALIASED`/`DISTINCT` as they are shared)."""
    if not source.guard_free:
        guards = output.guards
        guards.type_is(source, value)
        guards.identity(AttrSource(source, "__code__"), value.__code__)
        guards.identity(AttrSource(source, "__globals__"), value.__globals__)
        expr = f"{source.expr()}.__dict__"
        guards.add("FUNCTION_ATTRIBUTES", source, f"not {expr}", f"{source.expr()} has no attributes")
    return UserFunctionVariable(value, source, by_parts=True)


_BUILTIN_BOUND_TYPES = (types.BuiltinMethodType, types.MethodWrapperType)


def _made_at_each_read(value: Any) -> bool:
    """A bound method: Python makes a new one at each read of ``obj.method`` (``log.append``, ``self.helper``,
    ``d.get``, ``x.__add__``), so it is guarded through what it is made of, never by identity. Builtins of a
    module (``math.sqrt``, ``len``: ``__self__`` is the module) are stored objects, guarded by identity."""
    if isinstance(value, types.MethodType):
        return True
    if isinstance(value, _BUILTIN_BOUND_TYPES):
        return not isinstance(getattr(value, "__self__", None), (types.ModuleType, type(None)))
    return False


def _wrap_bound_method(output: OutputGraph, value: Any, source: Source) -> VariableTracker:
    """A bound method that is not a user function's (those are `BoundMethodVariable`s above) at `source`: guarded
    by its type, its function (``__func__`` by identity; a builtin's ``__name__`` on its receiver's type) and its
    receiver (``__self__`` wrapped through its source: a list's type, not its length; a module's identity)."""
    guards = output.guards if not source.guard_free else None
    receiver_source = AttrSource(source, "__self__")
    if guards is not None:
        guards.type_is(source, value)
    receiver = value.__self__
    if isinstance(value, types.MethodType):
        function = value.__func__
        if guards is not None:
            guards.identity(AttrSource(source, "__func__"), function)
        tracker = classify(value, source)
        if isinstance(tracker, SkippedFunctionVariable):
            # A break when called (the call runs the method of this call's receiver): its type is enough.
            if guards is not None:
                guards.type_is(receiver_source, receiver)
        elif isinstance(receiver, torch.nn.Module) and isinstance(tracker, BoundMethodVariable):
            tracker = BoundMethodVariable(tracker.function, output.wrap_value(receiver, receiver_source))
        elif guards is not None:
            guards.identity(receiver_source, receiver)  # a graph node holding the bound method holds its receiver
        return tracker
    name = value.__name__
    if guards is not None:
        guards.equals(AttrSource(source, "__name__"), name)
    if (type(receiver) is list and name in LIST_METHODS) or (type(receiver) is dict and name in DICT_METHODS):
        container = output.wrap_value(receiver, receiver_source)  # guards the type (and dict keys), not a length
        if isinstance(container, (ListVariable, DictVariable)):
            return upcalls.container_method(container, name)
    tracker = classify(value, source)
    if guards is not None:
        if isinstance(tracker, SkippedFunctionVariable):
            guards.type_is(receiver_source, receiver)
        else:
            guards.identity(receiver_source, receiver)
    return tracker


def _wrap_partial(output: OutputGraph, value: functools.partial[Any], source: Source | None) -> VariableTracker:
    """An existing ``functools.partial`` (``partial(F.gelu, approximate="tanh")`` kept on a module): its
    function, arguments and keywords are read through their own sources, so each is guarded as it is used."""
    guards = output.guards if source is not None and not source.guard_free else None
    if guards is not None and source is not None:
        guards.type_is(source, value)

    def part(name: str, item: Any) -> VariableTracker:
        return output.wrap_value(item, AttrSource(source, name) if source is not None else None)

    args = part("args", value.args)
    keywords = part("keywords", dict(value.keywords) if source is None else value.keywords)
    if not isinstance(args, TupleVariable) or not isinstance(keywords, DictVariable):
        return SkippedFunctionVariable(value, f"call to {_name(value)} with unsupported bound arguments", source)
    return PartialVariable(part("func", value.func), list(args.items), dict(keywords.items), source)


def classify(value: Any, source: Source | None) -> VariableTracker:
    """The tracker kind for a callable or object (no guards)."""
    if getattr(value, "_kiln_graph_break", False):
        return SkippedFunctionVariable(value, "capture.graph_break() called", source)
    original = getattr(value, "_kiln_original", None)
    if getattr(value, "_kiln_disabled", False):
        return SkippedFunctionVariable(value, "call to a function marked with capture.disable", source)
    if original is not None:
        return classify(original, source)
    if isinstance(value, torch.jit.ScriptFunction):
        return _scripted(value, source)
    if isinstance(value, torch._library.custom_ops.CustomOpDef):
        # `torch.library.custom_op` functions: calling one calls its operator, which is the graph node.
        return TorchFunctionVariable(value._opoverload, source)
    if MARKS.is_disallowed(value):
        return SkippedFunctionVariable(value, f"call to {_name(value)}, marked with disallow_in_graph", source)
    if MARKS.is_allowed(value):
        return TorchFunctionVariable(value, source)
    try:
        is_builtin = value in BUILTIN_HANDLERS or value in BREAKING_BUILTINS
    except TypeError:
        is_builtin = False
    if is_builtin:
        return BuiltinVariable(value)
    try:
        if value in OPERATOR_FUNCTIONS:
            return BuiltinVariable(value)
    except TypeError:
        pass
    if isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) == "builtins" \
            and getattr(builtins, value.__name__, None) is value:
        return BuiltinVariable(value)
    special = _special_callable(value)
    if special is not None:
        return special
    if isinstance(value, GradModeRestorer):
        return WithExitVariable(value.previous)
    if isinstance(value, type):
        if value in _TORCH_CLASSES_CALLABLE or issubclass(value, torch.nn.Module):
            return TorchFunctionVariable(value, source)
        if value.__module__ == "builtins" and getattr(builtins, value.__name__, None) is value:
            return BuiltinVariable(value)
        return PythonObjectVariable(value, source)
    if isinstance(value, types.ModuleType):
        return PythonObjectVariable(value, source)
    if isinstance(value, types.FunctionType):
        module = getattr(value, "__module__", "") or ""
        if (module == "torch" or module.startswith("torch.")) and not _is_torch_class_function(value):
            return TorchFunctionVariable(value, source)
        if f"{module}.{value.__qualname__}" in TRACE_TIME_FUNCTIONS:
            return SkippedFunctionVariable(value, f"call to {module}.{value.__qualname__} with traced arguments",
                                           source)
        if is_stdlib_or_skipped(value):
            return SkippedFunctionVariable(value, f"call to non-PyTorch function {module}.{value.__qualname__}",
                                           source)
        return UserFunctionVariable(value, source)
    if isinstance(value, types.MethodType):
        receiver = value.__self__
        if isinstance(receiver, torch.nn.Module):
            return BoundMethodVariable(classify(value.__func__, None), NNModuleVariable(receiver, None))
        inner = classify(value.__func__, None)
        if isinstance(inner, UserFunctionVariable):
            return BoundMethodVariable(inner, PythonObjectVariable(receiver, None))
        return SkippedFunctionVariable(value, f"call to method {_name(value)}", source)
    call_method = class_attribute(type(value), "__call__")
    if isinstance(call_method, types.FunctionType) and not isinstance(value, type):
        if not is_stdlib_or_skipped(call_method) and not (type(value).__module__ or "").startswith("torch"):
            return PythonObjectVariable(value, source)
    if callable(value):
        module = getattr(value, "__module__", None) or getattr(type(value), "__module__", "") or ""
        if module == "torch" or module.startswith("torch.") or _is_torch_builtin(value):
            return TorchFunctionVariable(value, source)
        return SkippedFunctionVariable(value, f"call to non-PyTorch function {_name(value)}", source)
    return PythonObjectVariable(value, source)


def _is_torch_class_function(value: types.FunctionType) -> bool:
    """A torch function a graph node cannot name: a static method of a torch class (an options object's
    ``_resolve_auto_acc_dtype``), a nested function, or one whose module path is shadowed (``_interleave`` of
    ``torch._higher_order_ops.associative_scan``, a module its package hides behind a function of that name).
    FX spells a target by module and name, which would not find it; it is traced into like user code.
    Tensor's own Python methods stay calls."""
    if value.__qualname__.split(".")[0] in ("Tensor", "TensorBase"):
        return False
    parts = value.__module__.split(".")
    found: Any = sys.modules.get(parts[0])
    for part in [*parts[1:], value.__name__]:
        found = getattr(found, part, None)
    return found is not value


def _scripted(value: Any, source: Source | None) -> VariableTracker:
    """A TorchScript function is traced through the Python function it was scripted from (kept by
    ``torch.jit.script`` as ``_torchdynamo_inline``); it cannot be a graph node itself (FX would
    write it as a call of its class). Without its Python source it runs as a graph break."""
    python_function = getattr(value, "_torchdynamo_inline", None)
    if isinstance(python_function, types.FunctionType):
        return UserFunctionVariable(python_function, None)
    return SkippedFunctionVariable(value, f"call to the TorchScript {type(value).__name__} {_name(value)}", source)


def _special_callable(value: Any) -> VariableTracker | None:
    import functools
    import itertools
    import typing

    known = library_callable(value)  # collections types, contextlib, checkpoint, vmap, itertools
    if known is not None:
        return known

    if any(value is known for known in (functools.partial, functools.reduce, itertools.chain, map, filter,
                                         typing.cast)):
        return FunctionalVariable(value)
    return None


def _is_torch_builtin(value: Any) -> bool:
    owner = getattr(value, "__self__", None)
    return owner is torch or owner is torch._C._VariableFunctions or owner is torch.Tensor or \
        isinstance(value, torch._ops.OpOverload) or isinstance(value, torch._ops.OpOverloadPacket)


def _name(value: Any) -> str:
    module = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or type(value).__name__
    return f"{module}.{name}" if module else str(name)
