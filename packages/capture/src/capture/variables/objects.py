"""Torch functions, nn.Modules, `os.environ` reads and other Python objects seen by the trace."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Sized
from typing import TYPE_CHECKING, Any, cast

import torch

from capture.libraries import SKIPPED_LIBRARIES, is_stdlib_or_skipped
from capture.sources import AttrSource, ItemSource, Source
from capture.variables import upcalls
from capture.variables.autocast import RECURRENT_UNDER_CPU_AUTOCAST, cpu_autocast_enabled, make_autocast
from capture.variables.base import (
    ConstantVariable,
    ExceptionVariable,
    Unsupported,
    VariableTracker,
    class_attribute,
    is_constant_value,
)
from capture.variables.containers import (
    IteratorVariable,
    ListVariable,
    TupleVariable,
    is_plain_value,
    plain_value,
)
from capture.variables.context_managers import GradModeVariable
from capture.variables.data_checked import data_checked_call
from capture.variables.functions import BoundMethodVariable, UserFunctionVariable
from capture.variables.model_output import ModelOutputVariable, is_model_output_class
from capture.variables.recurrent import long_recurrence
from capture.variables.sizes import SizeVariable
from capture.variables.sym_values import call_builtin
from capture.variables.tensor import TensorVariable
from capture.variables.user_objects import construct_user_object

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

# Torch callables that answer from trace-time state instead of becoming graph nodes.
_FOLDABLE_TORCH = {torch.is_tensor, torch.is_floating_point, torch.get_default_dtype, torch.is_grad_enabled,
                   torch.cuda.is_available, torch.device, torch.Size, torch.finfo, torch.iinfo}


_IS_EXPORTING = getattr(torch.compiler, "is_exporting", None)
_COMPILING_QUERIES = {f for f in (getattr(torch.compiler, "is_compiling", None),
                                  getattr(torch.compiler, "is_dynamo_compiling", None), _IS_EXPORTING) if f}


def is_fixed_library_attribute(module: types.ModuleType, value: object) -> bool:
    """Whether `module.<attr>` (= `value`) is read without a guard: functions, classes, submodules and
    constants of torch, NumPy and the standard library (`torch.float32`, `math.pi`) do not change
    between calls. torch's Python scalars are flags that do (``torch.backends.cudnn.enabled``), and
    everything in the user's own modules (a config module's ``scale``, a function monkeypatched later)
    is guarded."""
    root = (getattr(module, "__name__", None) or "").split(".")[0]
    if isinstance(value, torch.Tensor):
        return False
    if root == "torch":
        return not isinstance(value, (bool, int, float, complex, str, bytes))
    return root in sys.stdlib_module_names or root in SKIPPED_LIBRARIES


# Recurrent layers: under CPU autocast eager runs them as one oneDNN kernel (torch 2.11 returns
# bfloat16, later versions may refuse), which no trace of their decomposition reproduces.
_RECURRENT = frozenset({torch.lstm, torch.gru, torch.rnn_tanh, torch.rnn_relu})


def _packed_recurrent(args: list[VariableTracker]) -> bool:
    """Whether a `torch.lstm`-style call is the packed-sequence overload (data, batch_sizes, ...)."""
    second = args[1] if len(args) > 1 else None
    return isinstance(second, TensorVariable) and second.example.dim() == 1


class TorchFunctionVariable(VariableTracker):
    """A callable recorded as one `call_function` node (torch.* and allow_in_graph functions)."""

    def __init__(self, fn: Any, source: Source | None = None) -> None:
        self.fn = fn
        self.source = source

    def python_type(self) -> type:
        return type(self.fn)

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        fn = self.fn
        if fn is torch.is_grad_enabled:
            return ConstantVariable(tx.grad_enabled)
        if fn is torch.Size and len(args) <= 1 and not kwargs:
            return SizeVariable(args[0].iterate(tx) if args else [])
        if fn in _COMPILING_QUERIES:
            # Code under capture is being compiled; libraries use this to pick compile-friendly paths.
            return ConstantVariable(tx.output.export if fn is _IS_EXPORTING else True)
        if fn in (torch.is_tensor,) and len(args) == 1:
            return ConstantVariable(isinstance(args[0], TensorVariable))
        if fn in (torch.from_numpy, torch.as_tensor, torch.tensor, torch.asarray) and args:
            converted = upcalls.torch_from_ndarray(tx, fn, args, kwargs)  # a NumPy value of the region back to torch
            if converted is not None:
                return converted
        if fn is torch.set_grad_enabled and len(args) == 1 and not kwargs:
            enabled = bool(args[0].as_constant())
            previous = tx.grad_enabled
            tx.set_grad_enabled(enabled)
            return GradModeVariable(enabled, already_entered_from=previous)
        if fn in (torch.no_grad, torch.enable_grad) and not args and not kwargs:
            return GradModeVariable(fn is torch.enable_grad)
        if fn is torch.autocast:
            return make_autocast(args, kwargs)
        if fn is torch.inference_mode:
            # Traced as no_grad: the region's results are the same, though not marked as inference tensors.
            mode = (args[0] if args else kwargs.get("mode", ConstantVariable(True))).as_constant()
            return GradModeVariable(False if mode else tx.grad_enabled)
        if fn in _FOLDABLE_TORCH and all(a.is_constant() for a in [*args, *kwargs.values()]):
            value = fn(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
            return ConstantVariable(value)
        if isinstance(fn, type) and issubclass(fn, torch.nn.Module):
            return construct_module(tx, fn, args, kwargs)
        if fn in _RECURRENT and cpu_autocast_enabled(tx):
            raise Unsupported(RECURRENT_UNDER_CPU_AUTOCAST.format(f"torch.{fn.__name__}"))
        if fn in _RECURRENT and args and not _packed_recurrent(args):
            first = args[8] if len(args) > 8 else kwargs.get("batch_first")
            reason = long_recurrence(f"torch.{fn.__name__}", args[0], bool(first is not None and first.as_constant()))
            if reason is not None:
                raise Unsupported(reason)
        traced = data_checked_call(tx, fn, args, kwargs)
        if traced is not None:
            return traced

        if isinstance(fn, types.FunctionType) and upcalls.has_opaque_argument([*args, *kwargs.values()]):
            return UserFunctionVariable(fn).call(tx, args, kwargs)  # `nn.LayerNorm.forward(self, x)`: traced
        return tx.output.call_graph("call_function", fn, args, kwargs)

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        value = getattr(self.fn, name)
        return tx.output.wrap_value(value, None)

    def __repr__(self) -> str:
        return f"TorchFunctionVariable({getattr(self.fn, '__qualname__', self.fn)})"


def construct_module(tx: Tracer, cls: type, args: list[VariableTracker],
                     kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`nn.SomeModule(consts...)` inside the region: built once at trace time, then traced.

    Only stateless modules (no parameters or buffers, e.g. `nn.ReLU()`): eager builds a new module on every
    call, whose parameters would be new random values each time.
    """
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported(f"constructing {cls.__name__} with non-constant arguments")
    with torch.random.fork_rng(devices=[]):  # building it here must not consume the program's random numbers
        try:
            module = cls(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
    if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
        raise Unsupported(f"constructing {cls.__name__} (a module with parameters or buffers) inside the region")
    return NNModuleVariable(module, None)


class SkippedFunctionVariable(VariableTracker):
    """A callable capture does not trace into (numpy, scipy, the stdlib, disabled functions)."""

    def __init__(self, fn: Any, reason: str, source: Source | None = None) -> None:
        self.fn = fn
        self.reason = reason
        self.source = source

    def python_type(self) -> type:
        return type(self.fn)

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        folded = _fold_introspection(self.fn, args, kwargs)
        if folded is not None:
            return folded
        constant_foldable = getattr(self.fn, "__module__", None) in ("math", "operator", "_operator")
        if constant_foldable:
            symbolic = call_builtin(tx, self.fn, args, kwargs)  # math.sqrt(x.shape[-1]) on a dynamic size
            if symbolic is not None:
                return symbolic
        if constant_foldable and all(is_plain_value(a) for a in [*args, *kwargs.values()]):
            try:
                value = self.fn(*[plain_value(a) for a in args], **{k: plain_value(v) for k, v in kwargs.items()})
            except Exception as error:
                raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
            return ConstantVariable(value)
        raise Unsupported(self.reason)

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        source = AttrSource(self.source, name) if self.source is not None else None
        return tx.output.wrap_value(getattr(self.fn, name), source)

    def __repr__(self) -> str:
        return f"SkippedFunctionVariable({getattr(self.fn, '__qualname__', self.fn)})"


TRACE_TIME_FUNCTIONS = frozenset({
    # Pure functions of a model configuration: evaluated while tracing (their result is fixed).
    "transformers.configuration_utils.PreTrainedConfig.get_text_config",
    # Idempotent set-up that eager runs on the first call too (installs output-recording hooks once).
    "transformers.utils.output_capturing.maybe_install_capturing_hooks",
    # Logs a message at most once per process (lru_cache): emitted while tracing, as eager's first call does.
    "transformers.utils.logging.warning_once",
})


def _fold_introspection(fn: Any, args: list[VariableTracker],
                        kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """`inspect.signature(f)` of a function whose identity is fixed at trace time: computed once."""
    import inspect

    function = getattr(fn, "__func__", fn)
    if f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}" in TRACE_TIME_FUNCTIONS:
        values = [*args, *kwargs.values()]
        if all(v.is_constant() or isinstance(v, (PythonObjectVariable, NNModuleVariable)) for v in values):
            def real(v: VariableTracker) -> Any:
                if isinstance(v, NNModuleVariable):
                    return v.module
                return v.as_constant() if v.is_constant() else cast(PythonObjectVariable, v).value

            result = fn(*[real(a) for a in args], **{k: real(v) for k, v in kwargs.items()})
            return ConstantVariable(result) if is_constant_value(result) else PythonObjectVariable(result, None)
    if fn is not inspect.signature or len(args) != 1 or kwargs:
        return None
    target = args[0]
    if isinstance(target, UserFunctionVariable):
        return PythonObjectVariable(inspect.signature(target.fn), None)
    if isinstance(target, BoundMethodVariable) and isinstance(target.function, UserFunctionVariable):
        signature = inspect.signature(target.function.fn)
        return PythonObjectVariable(signature.replace(parameters=list(signature.parameters.values())[1:]), None)
    return None


class NNModuleVariable(VariableTracker):
    """An nn.Module instance: torch.nn leaf modules become `call_module` nodes, others are inlined."""

    def __init__(self, module: torch.nn.Module, source: Source | None,
                 child_sources: tuple[Source | None, ...] | None = None) -> None:
        self.module = module
        self.source = source
        # A slice of a guarded container (`self.layers[:n]`) is a new object on every call: it has no
        # source of its own, its children keep their sources in the parent (`layers[0]`, ...).
        self.child_sources = child_sources

    def python_type(self) -> type:
        return type(self.module)

    def truth(self, tx: Tracer) -> bool:
        """`if self.norm:`: a module is true unless its class defines `__bool__` or `__len__` (containers)."""
        module, cls = self.module, type(self.module)
        if class_attribute(cls, "__bool__") is None and class_attribute(cls, "__len__") is None:
            return True  # object's default truth; the module's identity is already guarded
        if class_attribute(cls, "__bool__") is None and isinstance(module, _SIZED_CONTAINERS):
            if self.source is not None and not self.source.guard_free and self.child_sources is None:
                expr = self.source.expr()  # emptied or filled later: recompile
                tx.output.guards.add("LENGTH", self.source, f"len({expr}) == {len(module)}",
                                     f"len({expr}) == {len(module)}")
            return len(module) > 0
        raise Unsupported(f"truth value of {self}: {cls.__name__} defines __bool__ or __len__")

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        module = self.module
        source = AttrSource(self.source, name) if self.source is not None else None
        if name == "training":
            return ConstantVariable(module.training)
        if name in MODULE_ITERATION_METHODS and name not in module.__dict__ and \
                getattr(type(module), name, None) is getattr(torch.nn.Module, name, None):
            return ModuleIterationVariable(self, name)
        if name in module.__dict__.get("_parameters", {}) or name in module.__dict__.get("_buffers", {}):
            value = getattr(module, name)
            if value is None:
                return ConstantVariable(None)
            return tx.output.module_tensor(value, source, name)
        if name in module.__dict__.get("_modules", {}):
            sub = module._modules[name]
            return tx.output.wrap_value(sub, source)
        try:
            static = type(module).__dict__.get(name) if name not in module.__dict__ else None
            if static is None:
                for klass in type(module).__mro__:
                    if name in klass.__dict__:
                        static = klass.__dict__[name]
                        break
        except Exception:  # pragma: no cover - defensive
            static = None
        if name not in module.__dict__ and callable(static) and hasattr(static, "__code__"):
            if self.source is not None and not self.source.guard_free:
                tx.output.guards.absent_attribute(self.source, name)  # `module.name = ...` later must recompile
            return BoundMethodVariable(UserFunctionVariable(static), self)
        try:
            value = getattr(module, name)
        except AttributeError as error:
            raise Unsupported(str(error), user_error=True) from error
        return tx.output.wrap_value(value, source)

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        module = self.module
        if self.source is not None and not self.source.guard_free:
            # Iteration depends on which entries exist: an appended layer must recompile.
            expr = self.source.expr()
            if isinstance(module, torch.nn.ModuleDict):
                keys = list(module.keys())
                tx.output.guards.add("DICT_KEYS", self.source, f"list({expr}.keys()) == {keys!r}",
                                     f"keys of {expr} are {keys!r}")
            elif isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ParameterList)):
                tx.output.guards.add("LENGTH", self.source, f"len({expr}) == {len(module)}",
                                     f"len({expr}) == {len(module)}")
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            items = []
            for index, sub in enumerate(module._modules.values()):
                source = self.child_source(index)
                items.append(tx.output.wrap_value(sub, source))
            return items
        if isinstance(module, torch.nn.ModuleDict):
            return [ConstantVariable(key) for key in module._modules]
        if isinstance(module, (torch.nn.ParameterList,)):
            return [tx.output.module_tensor(p, ItemSource(self.source, i) if self.source else None, f"p{i}")
                    for i, p in enumerate(module)]
        raise Unsupported(f"iteration over module {type(module).__name__}")

    def child_source(self, index: int) -> Source | None:
        """The source of child number ``index`` (``index`` already normalized to be non-negative)."""
        if self.child_sources is not None:
            return self.child_sources[index]
        return ItemSource(self.source, index) if self.source is not None else None

    def sliced(self, tx: Tracer, key: slice) -> NNModuleVariable:
        """``module[key]`` of a ModuleList or Sequential: guards the parent's length, never the new object."""
        module = cast(Sized, self.module)
        if self.source is not None and not self.source.guard_free and self.child_sources is None:
            expr = self.source.expr()
            tx.output.guards.add("LENGTH", self.source, f"len({expr}) == {len(module)}", f"len({expr}) == {len(module)}")
        selected = cast(Any, module)[key]
        tx.output.keepalive.append(selected)
        indices = range(len(module))[key]
        return NNModuleVariable(selected, None, tuple(self.child_source(i) for i in indices))

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return tx.call_module(self, args, kwargs)

    def __repr__(self) -> str:
        return f"NNModuleVariable({type(self.module).__name__})"


_SIZED_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict, torch.nn.ParameterList,
                     torch.nn.ParameterDict)
MODULE_ITERATION_METHODS = {"children", "named_children", "modules", "named_modules", "parameters",
                            "named_parameters", "buffers", "named_buffers"}


def _path_source(base: Source | None, dotted: str) -> Source | None:
    if base is None:
        return None
    source = base
    for part in dotted.split(".") if dotted else []:
        source = AttrSource(source, part)
    return source


class ModuleIterationVariable(VariableTracker):
    """`module.children()`, `.named_parameters()`, ...: answered from the real module at trace time."""

    def __init__(self, module_var: NNModuleVariable, name: str) -> None:
        self.module_var = module_var
        self.name = name

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        const_args = [a.as_constant() for a in args]
        const_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
        module, base = self.module_var.module, self.module_var.source
        named = self.name.startswith("named_")
        method = self.name if named else f"named_{self.name}"
        if method == "named_children" and (const_args or const_kwargs):
            raise Unsupported("children() takes no arguments", user_error=True)
        items: list[VariableTracker] = []
        for qualified, value in getattr(module, method)(*const_args, **const_kwargs):
            source = _path_source(base, qualified)
            tracker: VariableTracker
            if isinstance(value, torch.Tensor):
                tracker = tx.output.module_tensor(value, source, qualified.replace(".", "_") or "p")
            elif value is module:
                tracker = self.module_var
            else:
                tracker = tx.output.wrap_value(value, source)
            items.append(TupleVariable([ConstantVariable(qualified), tracker]) if named else tracker)
        return IteratorVariable(items)


class PythonObjectVariable(VariableTracker):
    """Any other Python object reached through a source: attributes are read for real, and guarded."""

    def __init__(self, value: Any, source: Source | None) -> None:
        self.value = value
        self.source = source

    def python_type(self) -> type:
        return type(self.value)

    def as_collection(self, tx: Tracer) -> VariableTracker | None:
        """This object as a container tracker, when it is an existing deque, OrderedDict, defaultdict or Counter."""
        return upcalls.existing_collection(tx, self)

    def truth(self, tx: Tracer) -> bool:
        collection = self.as_collection(tx)
        if collection is not None:
            return collection.truth(tx)
        return bool(self.value)

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        import types

        collection = self.as_collection(tx)
        if collection is not None:
            return collection.getattr(tx, name)
        try:
            value = getattr(self.value, name)
        except AttributeError as error:
            raise Unsupported(str(error), user_error=True) from error
        if self.value is os.environ and name in ("get", "__getitem__"):
            return EnvironReadVariable(name)
        if name == "apply" and isinstance(self.value, type) and issubclass(self.value, torch.autograd.Function):
            return upcalls.autograd_function_apply(self.value)
        unguarded = isinstance(self.value, types.ModuleType) and is_fixed_library_attribute(self.value, value)
        source = AttrSource(self.source, name, of_python_module=unguarded) if self.source is not None else None
        if isinstance(value, types.MethodType) and value.__self__ is self.value:
            # Guarded through the instance: a function stored on it later (or on its class) recompiles.
            # (Never on the bound method itself: each attribute read makes a new one. Its function may be
            # any callable, as transformers' `logger.warning_once`, an lru_cache wrapper.)
            function_source = AttrSource(source, "__func__") if source is not None else None
            return BoundMethodVariable(tx.output.wrap_value(value.__func__, function_source), self)
        return tx.output.wrap_value(value, source)

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        import collections.abc
        import enum
        import types

        collection = self.as_collection(tx)
        if collection is not None:
            return collection.iterate(tx)
        value, source = self.value, self.source
        method = getattr(type(value), "__iter__", None)
        if isinstance(method, types.FunctionType) and not is_stdlib_or_skipped(method):
            return UserFunctionVariable(method).call(tx, [self], {}).iterate(tx)
        if isinstance(value, enum.EnumMeta):
            # The members of an Enum class (fixed once the class exists; the class itself is guarded).
            return [tx.output.wrap_value(member, AttrSource(source, member.name) if source is not None else None)
                    for member in cast(Any, value)]
        if source is not None and isinstance(value, (collections.abc.Sequence, collections.abc.Mapping)):
            # Read through the source item by item, guarding the length (or the keys).
            expr = source.expr()
            if isinstance(value, collections.abc.Mapping):
                keys = list(value.keys())
                if not all(is_constant_value(k) for k in keys):
                    raise Unsupported(f"iteration over a {type(value).__name__} with non-constant keys")
                tx.output.guards.add("MAPPING_KEYS", source, f"list({expr}.keys()) == {keys!r}",
                                     f"keys of {expr} are {keys!r}")
                return [ConstantVariable(k) for k in keys]
            length = len(value)
            tx.output.guards.add("LENGTH", source, f"len({expr}) == {length}", f"len({expr}) == {length}")
            return [tx.output.wrap_value(value[i], ItemSource(source, i)) for i in range(length)]
        raise Unsupported(f"iteration over {type(value).__name__} object")

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        import types

        call_method = class_attribute(type(self.value), "__call__")
        if isinstance(call_method, types.FunctionType) and not isinstance(self.value, type):
            return UserFunctionVariable(call_method).call(tx, [self, *args], kwargs)
        if isinstance(self.value, type) and issubclass(self.value, BaseException):
            if not all(a.is_constant() for a in [*args, *kwargs.values()]):
                raise Unsupported(f"{self.value.__name__}(...) with non-constant arguments")
            return ExceptionVariable(self.value(*[a.as_constant() for a in args],
                                                **{k: v.as_constant() for k, v in kwargs.items()}))
        import enum

        if isinstance(self.value, enum.EnumMeta) and all(a.is_constant() for a in [*args, *kwargs.values()]):
            try:  # `Color(2)`: the member with that value
                member = self.value(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
            except Exception as error:
                raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
            return tx.output.wrap_value(member, None)
        if isinstance(self.value, type):
            if is_model_output_class(self.value):
                return ModelOutputVariable.construct(self.value, args, kwargs)

            return construct_user_object(tx, self, args, kwargs)
        raise Unsupported(f"call to {type(self.value).__name__} object {_describe(self.value)}")

    def __repr__(self) -> str:
        return f"PythonObjectVariable({_describe(self.value)})"


class EnvironReadVariable(VariableTracker):
    """`os.environ.get(key, default)`, `os.getenv(...)`, `os.environ[key]`: read now, guarded on every call."""

    def __init__(self, method: str) -> None:
        self.method = method

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if kwargs or not args or not all(a.is_constant() for a in args):
            raise Unsupported("reading os.environ with non-constant arguments")
        key, *default = [a.as_constant() for a in args]
        present = key in os.environ
        if self.method == "__getitem__" and not present:
            raise Unsupported(f"KeyError: {key!r}", user_error=True) from KeyError(key)
        value = os.environ[key] if present else (default[0] if default else None)
        name = tx.output.guards.constant(os.environ)
        tx.output.guards.add("ENVIRONMENT", name, f"{name}.get({key!r}) == {os.environ.get(key)!r}",
                             f"os.environ.get({key!r}) == {os.environ.get(key)!r}")
        return ConstantVariable(value)


def _describe(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    module = getattr(value, "__module__", None)
    if name:
        return f"{module}.{name}" if module else str(name)
    return type(value).__name__


@upcalls.wrap_constant_attribute.provide
def wrap_constant_attribute(value: Any) -> VariableTracker:
    """Attribute of a constant (e.g. `torch.float32.is_floating_point`): constant or bound builtin."""
    if is_constant_value(value):
        return ConstantVariable(value)
    if callable(value):
        return ConstantMethodVariable(value)
    raise Unsupported(f"attribute value {value!r}")


class ConstantMethodVariable(VariableTracker):
    """A bound method of a constant (e.g. `"a,b".split`): folded when its arguments are constants."""

    def __init__(self, method: Any) -> None:
        self.method = method

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if not all(is_plain_value(a) for a in [*args, *kwargs.values()]):
            raise Unsupported(f"{self.method!r} with non-constant arguments")
        try:
            value = self.method(*[plain_value(a) for a in args], **{k: plain_value(v) for k, v in kwargs.items()})
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        if not is_constant_value(value) and not isinstance(value, list):
            raise Unsupported(f"{self.method!r} returned {type(value).__name__}")
        if isinstance(value, list):
            return ListVariable([ConstantVariable(v) for v in value])
        return ConstantVariable(value)
