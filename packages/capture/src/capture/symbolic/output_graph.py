"""The graph under construction: FX nodes, fake-tensor propagation, graph inputs, guards, side effects."""

from __future__ import annotations

import contextlib
import re
import types
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

from capture.config import CaptureConfig
from capture.errors import UserLocation
from capture.guards import GuardSet
from capture.sources import AttrSource, ObjectSource, Source
from capture.symbolic import data_dependent
from capture.symbolic.eager_checks import EagerChecks
from capture.symbolic.elementwise_strides import with_eager_strides
from capture.symbolic.meta_failures import quiet_meta_failures
from capture.symbolic.run_time_values import run_time_argument
from capture.symbolic.shapes import ShapePolicy, SymbolTable, new_shape_env
from capture.variables.base import (
    ConstantVariable,
    Unsupported,
    VariableTracker,
    graph_constant,
    is_constant_value,
    numpy_scalar,
)
from capture.variables.builder import wrap_existing
from capture.variables.containers import DictVariable, ListVariable, TupleVariable
from capture.variables.functions import RealCellVariable, cell_expression
from capture.variables.objects import NNModuleVariable, PythonObjectVariable, TorchFunctionVariable
from capture.variables.sym_values import (
    SYMBOLIC_NODE,
    SymNodeVariable,
    SymSliceVariable,
    concrete,
    is_symbolic,
    wrap_symbolic,
)
from capture.variables.tensor import TensorVariable

_DATA_DEPENDENT_ERRORS: tuple[type[BaseException], ...] = ()
try:
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )

    _DATA_DEPENDENT_ERRORS = (DataDependentOutputException, DynamicOutputShapeException, UnsupportedOperatorException)
except ImportError:  # pragma: no cover - older torch
    pass
_DATA_DEPENDENT_ERRORS += data_dependent.GUARD_ERRORS


@dataclass
class GraphInput:
    """A placeholder of the graph and the source its value is read from on every call."""

    node: torch.fx.Node
    source: Source
    value: torch.Tensor
    fake: torch.Tensor | None = None  # with symbolic sizes: an untouched fake for the backend


@dataclass
class SideEffects:
    """Python-visible mutations made by the traced region, replayed after the graph runs."""

    attribute_stores: list[tuple[VariableTracker, str, VariableTracker]] = field(default_factory=list)
    global_stores: dict[str, VariableTracker] = field(default_factory=dict)
    containers: list[VariableTracker] = field(default_factory=list)
    cells: list[VariableTracker] = field(default_factory=list)

    def track_container(self, container: VariableTracker) -> None:
        """Remember a mutated list/dict that existed before the region."""
        if all(c is not container for c in self.containers):
            self.containers.append(container)

    def store_attribute(self, owner: VariableTracker, name: str, value: VariableTracker) -> None:
        """Record `owner.name = value`."""
        self.attribute_stores.append((owner, name, value))

    def pending_attribute(self, owner: VariableTracker, name: str) -> VariableTracker | None:
        """The value last stored to `owner.name` in the region, if any."""
        for stored_owner, stored_name, value in reversed(self.attribute_stores):
            if stored_name == name and _same_object(stored_owner, owner):
                return value
        return None


def _same_object(a: VariableTracker, b: VariableTracker) -> bool:
    if a is b:
        return True
    va, vb = getattr(a, "module", getattr(a, "value", None)), getattr(b, "module", getattr(b, "value", None))
    return va is not None and va is vb


def _sanitize(name: str) -> str:
    name = re.sub(r"[^0-9a-zA-Z_]+", "_", name).strip("_") or "x"
    if name[0].isdigit():
        name = "_" + name
    return name


class OutputGraph:
    """Owns the FX graph of one capture pass and everything the entry needs to rebuild state."""

    def __init__(self, config: CaptureConfig, f_globals: dict[str, Any], export: bool = False,
                 policy: ShapePolicy | None = None) -> None:
        self.config = config
        self.f_globals = f_globals
        self.export = export
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.policy = policy or ShapePolicy(dynamic=False)
        shape_env = new_shape_env(config.capture_scalar_outputs, config.capture_dynamic_output_shape_ops)
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=shape_env)
        self.symbols = SymbolTable(shape_env)
        self.guards = GuardSet()
        self.active_tx: Any = None  # the translator running the current instruction
        self.location_override: UserLocation | None = None
        self.guards.locate = self.user_location
        self.inputs: list[GraphInput] = []
        self.side_effects = SideEffects()
        self.eager_checks = EagerChecks()
        self.grad_enabled = torch.is_grad_enabled()
        self.initial_grad_enabled = self.grad_enabled
        self.guards.grad_mode(self.grad_enabled)
        self.guards.default_dtype()
        self.guards.autocast_mode()
        self.autocast_modes: list[tuple[str, torch.dtype, bool, bool]] = []  # open torch.autocast blocks
        self._tensors: dict[int, TensorVariable] = {}
        self._by_fake: dict[int, TensorVariable] = {}  # existing tensors by the id of their fake
        self._module_copies: dict[int, torch.nn.Module] = {}
        self._modules: dict[int, str] = {}
        self._wrapped: dict[tuple[int, str], VariableTracker] = {}
        self._by_id: dict[int, VariableTracker] = {}
        self._objects: dict[int, object] = {}  # the objects of `_by_id` made by `wrap_value`, by id
        self.keepalive: list[Any] = []
        # Paths of a resume function's arguments that hold run-time data, and those seen varying (ints):
        # `symbolic/run_time_values.py`.
        self.run_time_sources: frozenset[str] = frozenset()
        self.varying_sources: frozenset[str] = frozenset()
        self.number_sources: frozenset[str] = frozenset()  # automatic dynamic numbers (a subset of both)
        self.number_symbols: dict[Any, str] = {}  # the unbacked symbols read from them, to their paths
        self._run_time: dict[str, VariableTracker] = {}

    # -- where the trace is -------------------------------------------------------------------
    def user_location(self) -> UserLocation | None:
        """The user's line being traced (for guards: where each one was installed)."""
        if self.location_override is not None:
            return self.location_override
        return self.active_tx.location() if self.active_tx is not None else None

    def stack_trace(self) -> str:
        """The user's frames at the instruction being traced, outermost first, in a traceback's
        format (``File "m.py", line 3, in forward`` and the line): FX's ``node.meta["stack_trace"]``,
        which aotgrad and inductor_ir read to name the user's line in their errors."""
        if self.location_override is not None:
            return f"  {self.location_override}\n"
        tx = self.active_tx
        if tx is None:
            return ""
        return "".join(f"  {frame}\n" for frame in tx.user_stack())

    def note_shape_guards(self, tx: Any) -> None:
        """Attribute ShapeEnv guards added by the instruction `tx` just ran to its line."""
        if len(self.symbols.shape_env.guards) != len(self.symbols.guard_locations):
            self.symbols.note_new_guards(tx.location())

    # -- graph inputs and attributes ----------------------------------------------------------
    def _unique_attr(self, hint: str) -> str:
        base = _sanitize(hint)
        name, n = base, 0
        while hasattr(self.root, name):
            n += 1
            name = f"{base}_{n}"
        return name

    def add_input(self, value: torch.Tensor, source: Source) -> TensorVariable:
        """A tensor read through `source`: a placeholder plus a tensor guard."""
        known = self._tensors.get(id(value))
        if known is not None:
            if known.source is not None and known.source.expr() != source.expr() and not source.guard_free:
                # One placeholder for both paths: valid only while they stay the same tensor.
                same = f"{source.expr()} is {known.source.expr()}"
                self.guards.add("DUPLICATE_INPUT", source, same, same)
            return known
        first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        name = _sanitize(source.name_hint())
        if first is None:
            node = self.graph.placeholder(name)
        else:
            with self.graph.inserting_before(first):
                node = self.graph.placeholder(name)
        dims = self.policy.dynamic_dims(value, source)
        if dims:
            context: Any = StatelessSymbolicContext(
                dynamic_sizes=[DimDynamic.DYNAMIC if d in dims else DimDynamic.STATIC for d in range(value.dim())])
            fake = self.fake_mode.from_tensor(value, symbolic_context=context)
        else:
            fake = self.fake_mode.from_tensor(value, static_shapes=True)
        node.meta["example_value"] = fake
        variable = TensorVariable(node, fake, source, value)
        self._tensors[id(value)] = variable
        self._by_fake[id(fake)] = variable
        symbolic = frozenset(d for d, n in enumerate(fake.shape) if is_symbolic(n))
        if symbolic:
            self.symbols.bind_tensor(fake, source.expr(), self.user_location())
        # A copy the trace never mutates, for the backend to trace again.
        self.inputs.append(GraphInput(node, source, value, self._fake_copy(fake, value) if symbolic else None))
        if not source.guard_free:
            self.guards.tensor(source, value, symbolic)
        return variable

    def _fake_copy(self, like: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        with self.fake_mode:
            copy = torch.empty_strided(like.shape, like.stride(), dtype=like.dtype, device=like.device)
        return copy.requires_grad_(value.requires_grad)

    def backend_example_inputs(self) -> list[torch.Tensor]:
        """What the backend is given: the real tensors, or with symbolic sizes fakes of this ShapeEnv.

        Fakes with sizes ``s0, s1, ...`` let a backend (aotgrad) compile one graph for all sizes.
        """
        if not self.is_dynamic:
            return [graph_input.value for graph_input in self.inputs]
        return [graph_input.fake if graph_input.fake is not None else self._fake_copy(graph_input.value, graph_input.value)
                for graph_input in self.inputs]

    def tensor_metadata(self, tensor: TensorVariable, method: str, *args: int) -> VariableTracker:
        """`tensor.size(d)`, `.stride(d)` or `.numel()`: a constant, or a SymInt node for a symbolic size."""
        value = getattr(tensor.example, method)(*args)
        if not is_symbolic(value):
            return ConstantVariable(int(value))
        # A node per read (not cached: an in-place `unsqueeze_` changes the sizes); unused ones are removed.
        return wrap_symbolic(self, self.graph.call_method(method, (tensor.node, *args)), value)

    def remove_dead_size_nodes(self) -> None:
        """Erase symbolic-number nodes nothing in the graph uses (their values are rebuilt from sizes)."""
        for node in reversed(list(self.graph.nodes)):
            if not node.users and node.meta.get(SYMBOLIC_NODE, False):
                self.graph.erase_node(node)

    @property
    def is_dynamic(self) -> bool:
        """True when some input has symbolic sizes."""
        return bool(self.symbols.sources)

    def module_tensor(self, value: torch.Tensor, source: Source | None, hint: str) -> TensorVariable:
        """A parameter, buffer or constant tensor: a `get_attr` node on the graph's root."""
        if source is not None and not source.guard_free:
            self.guards.module_tensor(source, value)
        known = self._tensors.get(id(value))
        if known is not None:
            return known
        name = self._unique_attr(source.name_hint() if source is not None else hint)
        if isinstance(value, torch.nn.Parameter):
            self.root.register_parameter(name, value)
        else:
            self.root.register_buffer(name, value)
        node = self.graph.get_attr(name)
        fake = self.fake_mode.from_tensor(value, static_shapes=True)
        node.meta["example_value"] = fake
        variable = TensorVariable(node, fake, source, value)
        self._tensors[id(value)] = variable
        self._by_fake[id(fake)] = variable
        return variable

    def register_module(self, module: torch.nn.Module, source: Source | None) -> str:
        """Qualified name of `module` on the graph's root (registered once)."""
        known = self._modules.get(id(module))
        if known is not None:
            return known
        if source is not None and not source.guard_free:
            # The backend may read (or lift) these tensors once: replacing one must recompile.
            for dotted, tensor in [*module.named_parameters(), *module.named_buffers()]:
                path: Source = source
                for part in dotted.split("."):
                    path = AttrSource(path, part)
                self.guards.module_tensor(path, tensor)
        name = self._unique_attr(source.name_hint() if source is not None else type(module).__name__.lower())
        self.root.add_module(name, module)
        self._modules[id(module)] = name
        return name

    # -- wrapping real values -----------------------------------------------------------------
    def wrap_value(self, value: Any, source: Source | None) -> VariableTracker:
        """A tracker for an existing Python value, adding the guards its use needs."""
        if self.run_time_sources and source is not None and source.expr() in self.run_time_sources:
            run_time = self._run_time_value(value, source)
            if run_time is not None:
                return run_time
        # One tracker per mutable object, so a mutation made through one path is seen through all.
        memoizable = isinstance(value, (list, dict, torch.nn.Module)) or (
            not is_constant_value(value) and not isinstance(value, (tuple, torch.Tensor, types.FunctionType))
            and not callable(value))
        if memoizable:
            known = self._by_id.get(id(value))
            if known is not None:
                self._guard_same_container(known, source)
                return known
        if source is None and _needs_reference(value):
            source = ObjectSource(self.guards.constant(value), type(value).__name__.lower())
        tracker = wrap_existing(self, value, source)
        if memoizable and isinstance(tracker, (ListVariable, DictVariable, NNModuleVariable, PythonObjectVariable)):
            self._by_id[id(value)] = tracker
            self._objects[id(value)] = value
            self.keepalive.append(value)
        return tracker

    def _run_time_value(self, value: Any, source: Source) -> VariableTracker | None:
        """The one tracker of a value at a run-time data path (each read of a cell's contents gets the same)."""
        expr = source.expr()
        known = self._run_time.get(expr)
        if known is None:
            known = run_time_argument(self, value, source, expr in self.varying_sources)
            if known is not None:
                self._run_time[expr] = known
        return known

    def _guard_same_container(self, known: VariableTracker, source: Source | None) -> None:
        """A list, dict or object reached through a second path is the one tracker of the first: its mutations
        are replayed, and its contents and attributes read and guarded, through the first path, so the second
        must keep naming the same object (``fn(x, log.append)`` of a function that also reads ``LOG``;
        ``fn(x, o, o)`` that stores ``a.v`` and reads ``b.v``)."""
        first = getattr(known, "source", None)
        if isinstance(known, PythonObjectVariable) and isinstance(known.value, (types.ModuleType, type)):
            return  # guarded by identity through each path
        if not isinstance(known, (ListVariable, DictVariable, PythonObjectVariable)) or source is None or \
                first is None or source.guard_free:
            return
        if isinstance(source, ObjectSource) or isinstance(first, ObjectSource) or source.expr() == first.expr():
            return
        self.guards.add("ALIASED", source, f"{source.expr()} is {first.expr()}", f"{source.expr()} is {first.expr()}")

    def guard_distinct_objects(self) -> None:
        """Guard that existing objects the trace saw as distinct stay distinct (`DISTINCT`), where it matters.

        Each existing list, dict or object is one tracker per object *at trace time*: a region that mutates
        ``a`` and reads ``b`` (``a.append(1); len(b)``, ``o1.v = 5; o2.v``) assumes ``b`` unaffected, which is
        wrong when a later call passes the same object twice. Only pairs of which one was mutated (a container
        written, or an object whose attribute was stored) and the other read or mutated are checked, and only
        pairs of one type (each path's type is guarded: objects of two types are never the same); lists the
        region only appended to are not paired with each other (their appends replay in order either way).
        Many pairs of one type are checked at once, by the number of distinct ids.
        """
        effects = self.side_effects
        self._guard_distinct_cells()
        mutated = {id(c) for c in effects.containers}
        mutated.update(id(owner) for owner, _, _ in effects.attribute_stores
                       if isinstance(owner, PythonObjectVariable))
        if not mutated:
            return
        # (source, mutated, only appended to) of each existing object the trace used, grouped by type.
        groups: dict[type, dict[str, tuple[Source, bool, bool]]] = {}

        def add(tracker: VariableTracker, kind: type) -> None:
            source = getattr(tracker, "source", None)
            if not isinstance(source, Source) or source.guard_free:
                return
            written = id(tracker) in mutated
            if not written and ((isinstance(tracker, ListVariable) and tracker.is_unread) or
                                (isinstance(tracker, DictVariable) and not tracker.was_read)):
                return  # neither read nor written: nothing assumed about it
            unread = isinstance(tracker, ListVariable) and tracker.is_unread
            groups.setdefault(kind, {}).setdefault(source.expr(), (source, written, unread))

        for key, tracker in self._by_id.items():
            value = self._objects.get(key)
            if value is None or isinstance(tracker, NNModuleVariable) or isinstance(value, (types.ModuleType, type)):
                continue  # cells; modules and classes are guarded by identity
            add(tracker, type(value))
        for container in effects.containers:  # written containers not reached through `wrap_value`
            add(container, container.python_type())
        for kind, members in groups.items():
            entries = list(members.values())
            pairs = [(a, b) for i, a in enumerate(entries) for b in entries[i + 1:]
                     if (a[1] or b[1]) and not (a[2] and b[2])
                     and not (isinstance(a[0], ObjectSource) and isinstance(b[0], ObjectSource))]
            if not pairs:
                continue
            if len(pairs) <= 8:
                for (first, _, _), (second, _, _) in pairs:
                    check = f"{first.expr()} is not {second.expr()}"
                    self.guards.add("DISTINCT", first, check, check, subjects=(first.expr(), second.expr()))
                continue
            exprs = sorted({s.expr() for pair in pairs for s, _, _ in pair})
            listed = ", ".join(exprs)
            self.guards.add("DISTINCT", exprs[0], f"len({{id(__o) for __o in ({listed},)}}) == {len(exprs)}",
                            f"{listed} are distinct {kind.__qualname__} objects", subjects=tuple(exprs))

    def _guard_distinct_cells(self) -> None:
        """`DISTINCT` for closure cells: a cell the region assigned (``nonlocal c; c += 1`` in a closure it called)
        and another it read or assigned were two cells at trace time, so must be on later calls (the read would
        not see the write). Cells reached through two paths are one tracker, guarded `ALIASED` (`cell_tracker`)."""
        written = [cell for cell in self.side_effects.cells if isinstance(cell, RealCellVariable)]
        if not written:
            return
        used = [tracker for tracker in self._by_id.values() if isinstance(tracker, RealCellVariable)
                and (tracker.was_read or tracker.pending is not None)]
        seen: set[tuple[str, str]] = set()
        for cell in written:
            for other in used:
                first, second = cell.cell_expr(), other.cell_expr()
                if other is cell or first is None or second is None or (second, first) in seen:
                    continue
                seen.add((first, second))
                check = f"{first} is not {second}"
                self.guards.add("DISTINCT", first, check, check, subjects=(first, second))

    # -- recording calls ----------------------------------------------------------------------
    def call_graph(self, kind: str, target: Any, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """Record a call into the graph, propagating fake tensors to learn the result's metadata."""
        rewritten = data_dependent.rewrite(self, kind, target, args, kwargs)  # torch.equal, tensor_split(x, t)
        if rewritten is not None:
            return rewritten
        node_args, fake_args = _unpack(list(args))
        node_kwargs, fake_kwargs = _unpack(dict(kwargs))
        self.eager_checks.check(kind, target, fake_args, fake_kwargs)  # errors fake tensors do not raise
        try:
            with self.fake_execution():
                if kind == "call_function":
                    result = target(*fake_args, **fake_kwargs)
                elif kind == "call_method":
                    result = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    result = self._fake_module_call(self.root.get_submodule(target), fake_args, fake_kwargs)
                restrided = self.root.get_submodule(target) if kind == "call_module" else target
                result = with_eager_strides(kind, restrided, fake_args, fake_kwargs, result)
        except Unsupported:
            raise
        except _DATA_DEPENDENT_ERRORS as error:
            raise Unsupported(f"{_target_name(target)} depends on run-time data ({type(error).__name__})") from error
        except Exception as error:
            if _FAKE_DATA_READ in str(error):  # `torch.tensor_split(x, indices)` reads the indices' values
                raise Unsupported(f"{_target_name(target)} reads the values of a tensor argument (depends on "
                                  "run-time data)") from error
            failure = Unsupported(f"{type(error).__name__}: {error}", user_error=True)
            failure.from_tensor_op = True  # type: ignore[attr-defined]  # fake tensors' messages may differ
            raise failure from error
        self.eager_checks.agree(_target_name(target), result)
        if _unique_indices_not_int64(target, result):
            raise Unsupported(f"{_target_name(target)}: this torch's fake kernel gives the inverse indices and "
                              "counts the input's dtype where the real one gives int64 (fixed in later torch); "
                              "the call runs eagerly")
        if _has_numpy_scalar([fake_args, fake_kwargs]):
            node_kwargs = self._numpy_scalar_arguments(kind, target, fake_args, fake_kwargs, result, node_kwargs)
        node = self.graph.create_node(kind, target, tuple(node_args), node_kwargs)
        stack_trace = self.stack_trace()
        if stack_trace:
            node.meta["stack_trace"] = stack_trace
        if kind == "call_function" and result is not None and is_constant_value(result) \
                and all(a.is_constant() for a in [*args, *kwargs.values()]):
            # No tensor went in, so the answer comes from global state (the deterministic-algorithms
            # flag, the thread count): it becomes a constant, guarded by asking again.
            self.guards.call_result(target, tuple(fake_args), dict(fake_kwargs), result)
        return self._wrap_result(node, result)

    def _numpy_scalar_arguments(self, kind: str, target: Any, fake_args: Any, fake_kwargs: Any, result: Any,
                                node_kwargs: dict[str, Any]) -> dict[str, Any]:
        """The node's keyword arguments when numpy scalars were passed: the node gets Python numbers
        (`_unpack`), so the op must give the same dtypes with them; a tensor constructor inferring its
        dtype from the numpy type (`torch.tensor(np.float64(2.0))`) gets that dtype spelled out."""
        with self.fake_execution():
            args, kwargs = graph_constant(list(fake_args)), graph_constant(dict(fake_kwargs))
            if kind == "call_function":
                again = target(*args, **kwargs)
            elif kind == "call_method":
                again = getattr(args[0], target)(*args[1:], **kwargs)
            else:
                again = self._fake_module_call(self.root.get_submodule(target), args, kwargs)
        dtypes = [[t.dtype for t in pytree.tree_leaves(r) if isinstance(t, torch.Tensor)]
                  for r in (result, again)]
        if dtypes[0] == dtypes[1]:
            return node_kwargs
        if target in _DTYPE_INFERRING_CONSTRUCTORS and "dtype" not in node_kwargs and isinstance(result, torch.Tensor):
            return {**node_kwargs, "dtype": result.dtype}
        raise Unsupported(f"{_target_name(target)} treats a numpy scalar argument unlike a Python number")

    def _fake_module_call(self, module: torch.nn.Module, args: Any, kwargs: Any) -> Any:
        """Run `module.forward` on fakes, with its parameters and buffers swapped for fakes too.

        Running it on its real state would mutate that state (BatchNorm's running statistics). The
        swap is made on a copy of the module (`detached_copy`), never on the user's object, which
        other threads may be running.
        """
        from torch.nn.utils.stateless import _reparametrize_module

        copy = self._module_copies.get(id(module))
        if copy is None:
            copy = self._module_copies[id(module)] = detached_copy(module)
        state: dict[str, torch.Tensor] = {name: self.fake_mode.from_tensor(t, static_shapes=True) for name, t in
                 [*module.named_parameters(), *module.named_buffers()]}
        with _reparametrize_module(copy, state):
            return type(module).forward(copy, *args, **kwargs)

    def call_module_without_hooks(self, module: torch.nn.Module, target: str, args: list[VariableTracker],
                                  kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """A module call whose hooks were inlined around it: the node must not run them again."""
        node_args, fake_args = _unpack(list(args))
        node_kwargs, fake_kwargs = _unpack(dict(kwargs))
        try:
            with self.fake_execution():
                result = self._fake_module_call(module, fake_args, fake_kwargs)
        except _DATA_DEPENDENT_ERRORS as error:
            raise Unsupported(f"{type(module).__name__} depends on run-time data ({type(error).__name__})") from error
        except Exception as error:
            failure = Unsupported(f"{type(error).__name__}: {error}", user_error=True)
            failure.from_tensor_op = True  # type: ignore[attr-defined]  # fake tensors' messages may differ
            raise failure from error
        module_node = self.graph.get_attr(target)
        node = self.graph.call_function(forward_without_hooks, (module_node, *node_args), node_kwargs)
        return self._wrap_result(node, result)

    def _wrap_result(self, node: torch.fx.Node, result: Any) -> VariableTracker:
        import operator

        node.meta["example_value"] = result
        if isinstance(result, torch.Tensor):
            return self._tensor_result(node, result)
        if result is None:
            return ConstantVariable(None)
        if isinstance(result, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return wrap_symbolic(self, node, result)
        if isinstance(result, (tuple, list)):
            items: list[VariableTracker] = []
            for index, item in enumerate(result):
                if isinstance(item, torch.Tensor):
                    child = self.graph.call_function(operator.getitem, (node, index))
                    child.meta["example_value"] = item
                    items.append(self._tensor_result(child, item))
                elif is_symbolic(item):
                    child = self.graph.call_function(operator.getitem, (node, index))
                    items.append(wrap_symbolic(self, child, item))
                elif isinstance(item, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                    items.append(ConstantVariable(concrete(item)))
                elif is_constant_value(item):
                    items.append(ConstantVariable(item))
                elif type(item) in (tuple, list):  # nested, as nn.LSTM's `(out, (h, c))`
                    child = self.graph.call_function(operator.getitem, (node, index))
                    items.append(self._wrap_result(child, item))
                else:
                    raise Unsupported(f"{_target_name(node.target)} returned a {type(item).__name__}")
            if isinstance(result, list):
                return ListVariable(items)
            cls = type(result) if type(result) is not tuple else None
            return TupleVariable(items, cls=cls)
        if is_constant_value(result):
            # Fake tensors raise for data-dependent scalars, so a plain value here is static metadata.
            self.graph.erase_node(node)
            return ConstantVariable(result)
        self.graph.erase_node(node)
        raise Unsupported(f"{_target_name(node.target)} returned a Python {type(result).__name__} "
                          "computed from tensor data")

    def _tensor_result(self, node: torch.fx.Node, fake: torch.Tensor) -> TensorVariable:
        """A tensor an op returned: a new one, or (as `x.add_(1)` returns `x`) an existing tensor again."""
        known = self._by_fake.get(id(fake))
        if known is None:
            return TensorVariable(node, fake)
        return TensorVariable(node, fake, None, known.value, known.value_source)

    def cell_tracker(self, cell: Any, source: Source | None) -> VariableTracker:
        """The one tracker of an existing closure cell (so a write through one path is seen by all)."""
        known = self._by_id.get(id(cell))
        if isinstance(known, RealCellVariable):
            first, second = known.cell_expr(), cell_expression(source) if source is not None else None
            if first is not None and second is not None and first != second and source is not None and \
                    not source.guard_free:
                # One tracker for both paths (a closure's cell that is also this frame's): valid while they stay one.
                self.guards.add("ALIASED", source, f"{second} is {first}", f"{second} is {first}")
            return known
        tracker = RealCellVariable(cell, source)
        self._by_id[id(cell)] = tracker
        self.keepalive.append(cell)
        return tracker

    def fake_execution(self) -> contextlib.ExitStack:
        """The modes fake propagation runs under: the traced grad mode, open autocast blocks, fakes.

        With symbolic sizes also torch's Python dispatcher: composite ops such as `baddbmm`, `F.pad` and
        `interpolate` reach C++ kernels that need concrete sizes unless their Python decompositions and
        meta functions (which take SymInts) run instead. Static traces skip it, as it is slower.
        """
        stack = contextlib.ExitStack()
        stack.enter_context(torch.set_grad_enabled(self.grad_enabled))
        for device, dtype, enabled, cache_enabled in self.autocast_modes:
            stack.enter_context(torch.autocast(device, dtype, enabled, cache_enabled))
        if self.is_dynamic:
            stack.enter_context(enable_python_dispatcher())
        stack.enter_context(self.fake_mode)
        stack.enter_context(quiet_meta_failures())  # a failing op is the user's error, raised eagerly
        # Unbacked symbols made here (`nonzero`'s size) belong to this graph's example values: left
        # pending, the backend's trace with this ShapeEnv would look for them among its own outputs.
        stack.callback(data_dependent.forget_pending_symbols, self.symbols.shape_env)
        return stack

    def set_grad_enabled(self, enabled: bool) -> None:
        """Switch grad mode: recorded as a graph node so the compiled graph does the same."""
        if enabled == self.grad_enabled:
            return
        self.graph.call_function(torch._C._set_grad_enabled, (enabled,))
        self.grad_enabled = enabled

    def has_ops(self) -> bool:
        """True when the graph does any work (grad-mode switches alone are none: the entry sets the final mode)."""
        return any(n.op in ("call_function", "call_method", "call_module") and n.target is not torch._C._set_grad_enabled
                   for n in self.graph.nodes)


def _needs_reference(value: Any) -> bool:
    """Objects whose attributes or items may change between calls (so reads of them need guards)."""
    if isinstance(value, (list, dict, type)):
        return True
    if is_constant_value(value) or isinstance(value, (tuple, torch.Tensor, torch.nn.Module, types.ModuleType)):
        return False
    return not callable(value)


def detached_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A new object of each module in `module`'s tree, sharing every tensor and attribute value, with
    registration dicts (`_parameters`, `_buffers`, `_modules`) of its own.

    Swapping tensors in the copy (what `torch.func.functional_call` does) leaves the user's module
    untouched. Submodules shared inside the tree stay shared in the copy.
    """
    copies: dict[int, torch.nn.Module] = {}

    def copy(original: torch.nn.Module) -> torch.nn.Module:
        known = copies.get(id(original))
        if known is not None:
            return known
        new = copies[id(original)] = object.__new__(type(original))
        state = dict(original.__dict__)
        for slot in ("_parameters", "_buffers"):
            if slot in state:
                state[slot] = type(state[slot])(state[slot])
        if "_modules" in state:
            children = state["_modules"]
            state["_modules"] = type(children)((name, None if child is None else copy(child))
                                               for name, child in children.items())
        object.__setattr__(new, "__dict__", state)
        return new

    return copy(module)


def forward_without_hooks(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """Graph target for a module call whose hooks were captured around it."""
    return type(module).forward(module, *args, **kwargs)


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    return f"{module}.{name}" if module and module not in ("builtins", "_operator") else str(name)


def _unpack(value: Any) -> tuple[Any, Any]:
    """Trackers -> (FX argument, fake argument), recursively."""
    if isinstance(value, (TensorVariable, SymNodeVariable)):
        return value.node, value.example if isinstance(value, TensorVariable) else value.value
    if isinstance(value, ConstantVariable):
        return graph_constant(value.value), value.value
    if isinstance(value, SymSliceVariable):
        return value.unpack()
    if isinstance(value, (TupleVariable, ListVariable)):
        pairs = [_unpack(v) for v in value.items]
        kind = list if isinstance(value, ListVariable) else tuple
        return kind(p[0] for p in pairs), kind(p[1] for p in pairs)
    if isinstance(value, DictVariable):
        pairs_d = {k: _unpack(v) for k, v in value.items.items()}
        return {k: p[0] for k, p in pairs_d.items()}, {k: p[1] for k, p in pairs_d.items()}
    if isinstance(value, list):
        pairs = [_unpack(v) for v in value]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if isinstance(value, dict):
        pairs_d = {k: _unpack(v) for k, v in value.items()}
        return {k: p[0] for k, p in pairs_d.items()}, {k: p[1] for k, p in pairs_d.items()}
    if isinstance(value, VariableTracker):
        if isinstance(value, TorchFunctionVariable) and value.fn in (torch.float32,):
            return value.fn, value.fn
        raise Unsupported(f"passing {value} to a torch function")
    return value, value


# What an ATen kernel raises when it reads the data of a fake tensor (an op whose output depends on values).
_FAKE_DATA_READ = "data is not allocated yet"
_DTYPE_INFERRING_CONSTRUCTORS = (torch.tensor, torch.as_tensor, torch.asarray, torch.scalar_tensor)


def _has_numpy_scalar(value: Any) -> bool:
    return any(numpy_scalar(leaf) for leaf in pytree.tree_leaves(value)) or \
        any(isinstance(leaf, slice) and _has_numpy_scalar([leaf.start, leaf.stop, leaf.step])
            for leaf in pytree.tree_leaves(value))


def _unique_indices_not_int64(target: Any, result: Any) -> bool:
    """Whether `result` of a `unique` variant holds inverse indices or counts that are not int64: they
    always are in eager, but some torch releases' fake kernels give them the input's dtype, and code
    compiled from that reads int64 memory as floats."""
    name = target if isinstance(target, str) else getattr(target, "__name__", "")  # torch.unique's qualname is boolean_dispatch's
    if not isinstance(result, tuple) or "unique" not in f"{name} {_target_name(target)}":
        return False
    return any(isinstance(t, torch.Tensor) and t.dtype != torch.int64 for t in result[1:])


