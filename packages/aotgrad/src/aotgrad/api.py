"""The entry points: `aot_graph`, `aot_function`, `aot_module`, and the `aot_eager` backend."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
import torch.fx
from torch.utils import _pytree as pytree

from aotgrad.compile import CompilerFn, Compilers, Partitioner, compile_region
from aotgrad.config import AotConfig
from aotgrad.decompositions import DecompositionSource
from aotgrad.partition import min_cut
from aotgrad.runtime import RaisingRegion, Region
from aotgrad.runtime.boxed import boxed_graph_module
from aotgrad.runtime.dispatch import DispatchCache, StateReader
from aotgrad.tracing.locate import LocatingModule, detached_copy
from aotgrad.tracing.opaque import split_at_opaque_nodes

log = logging.getLogger("aotgrad")

DynamicDims = tuple[frozenset[int], ...]


def _region_key(flat_inputs: Sequence[Any], dynamic: DynamicDims = ()) -> tuple[Any, ...]:
    """What a compiled region is specialized on: the gradient pattern, each tensor's metadata, and
    the value of each non-tensor input (make_fx bakes those into the graph as constants).

    ``dynamic[i]`` lists the dims of input ``i`` compiled with symbolic sizes: those sizes (and the
    strides that depend on them) are not part of the key, so one region serves every size.
    """
    return (
        _gradient_key(flat_inputs),
        *(
            _signature(x, with_grad=False, dynamic=dynamic[i] if i < len(dynamic) else frozenset())
            for i, x in enumerate(flat_inputs)
        ),
    )


def _is_symbolic(value: Any) -> bool:
    return isinstance(value, torch.SymInt) and not isinstance(getattr(value.node, "expr", None), (int, sympy.Integer))


def dynamic_dims_of(flat_inputs: Sequence[Any]) -> DynamicDims:
    """Per input, the dims whose size is a symbol (fake tensors from a ShapeEnv); empty when static."""
    dims = tuple(
        frozenset(d for d, n in enumerate(x.shape) if _is_symbolic(n)) if isinstance(x, torch.Tensor) else frozenset()
        for x in flat_inputs
    )
    return dims if any(dims) else ()


def _gradient_key(flat_inputs: Sequence[Any]) -> tuple[bool, ...] | None:
    """None when no gradient is needed (grad mode off, or nothing requires grad), else the mask."""
    mask = tuple(
        isinstance(x, torch.Tensor) and x.requires_grad and (x.is_floating_point() or x.is_complex())
        for x in flat_inputs
    )
    return mask if torch.is_grad_enabled() and any(mask) else None


class AotCallable:
    """A compiled callable over the user's flat positional inputs (what `aot_graph` returns;
    with `in_spec`, the flat inputs are the leaves of the user's `(args, kwargs)`).

    It lifts the module's parameters and buffers into graph inputs, compiles one region per
    gradient pattern (inference, or which inputs require grad) and input signature (shapes,
    strides, dtypes, non-tensor values) on first use, and runs it.
    """

    def __init__(
        self,
        module: torch.nn.Module | None,
        fn: Callable[..., Any],
        compilers: Compilers,
        partition: Partitioner,
        decompositions: DecompositionSource | None,
        config: AotConfig,
        in_spec: pytree.TreeSpec | None = None,
    ) -> None:
        self._module = module
        self._in_spec = in_spec
        self._fn = fn
        self._compilers = compilers
        self._partition = partition
        self._decompositions = decompositions
        self._config = config
        self._regions: dict[tuple[Any, ...], Region | RaisingRegion | None] = {}
        # Per flat input, the dims compiled with symbolic sizes (set by `aot_graph` from fake inputs).
        self._dynamic: DynamicDims = ()
        self._locator = LocatingModule(module) if isinstance(module, torch.fx.GraphModule) else None
        self._state = StateReader(module)
        self._state_names: list[str] = self._state.names
        self._dispatch = DispatchCache(len(self._state_names), self._input_signature)

    def state_tensors(self) -> list[torch.Tensor]:
        """The module's parameters then buffers: the first graph inputs, read afresh on each call."""
        return self._state.read()

    def _input_signature(self, position: int, value: Any) -> Any:
        """Input ``position``'s part of the region key (without its requires_grad)."""
        dynamic = self._dynamic
        return _signature(value, with_grad=False, dynamic=dynamic[position] if position < len(dynamic) else frozenset())

    def _traceable(self) -> Callable[..., Any]:
        """The user's computation as a function of (*state, *inputs), for tracing."""
        count = len(self._state_names)
        # `functional_call` swaps tensors inside the module it is given: trace a fresh copy, never the
        # caller's module, which other threads may be running meanwhile.
        if self._locator is not None:
            assert isinstance(self._module, torch.fx.GraphModule)
            locator = self._locator = LocatingModule(detached_copy(self._module))
            names = ["graph." + n for n in self._state_names]
            return lambda *flat: torch.func.functional_call(locator, dict(zip(names, flat[:count])), flat[count:])
        if self._module is not None:
            module, names = detached_copy(self._module), self._state_names
            return lambda *flat: torch.func.functional_call(
                module, dict(zip(names, flat[:count])), *self._unflatten(flat[count:])
            )
        return self._fn

    def _unflatten(self, leaves: Sequence[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The user's (args, kwargs) from the flat inputs."""
        if self._in_spec is None:
            return tuple(leaves), {}
        args, kwargs = pytree.tree_unflatten(list(leaves), self._in_spec)
        return tuple(args), dict(kwargs)

    def _current_node(self) -> torch.fx.Node | None:
        return self._locator.current if self._locator is not None else None

    def region_for(self, flat_inputs: Sequence[Any]) -> Region | RaisingRegion | None:
        """The compiled region for these inputs' gradient pattern (None: run eagerly)."""
        return self._region_and_key(flat_inputs)[0]

    def _region_and_key(self, flat_inputs: Sequence[Any]) -> tuple[Region | RaisingRegion | None, tuple[Any, ...]]:
        """The compiled region for these inputs, and the key it is kept under.

        Regions traced from the fake inputs of a graph with symbolic sizes are kept under keys that
        leave those sizes free. A region first needed at run time (another gradient pattern: a
        graph compiled under no_grad, called with grad enabled) is traced from the real inputs, at
        their sizes: it is kept under their full static key, so inputs of other sizes never reuse it.
        """
        key = _region_key(flat_inputs, self._dynamic)
        if key in self._regions:
            return self._regions[key], key
        if self._dynamic and not dynamic_dims_of(flat_inputs):
            key = _region_key(flat_inputs)
        if key not in self._regions:
            self._regions[key] = compile_region(
                self._traceable(),
                flat_inputs,
                key[0],
                compilers=self._compilers,
                partition=self._partition,
                decompositions=self._decompositions,
                config=self._config,
                current_node=self._current_node,
            )
        return self._regions[key], key

    def __call__(self, *args: Any) -> Any:
        """Run the compiled graph (or eager, for a graph that could not be traced)."""
        flat_inputs = self._state.read()
        flat_inputs += args
        # Fast path: the inputs look like the last call's in this grad mode (runtime/dispatch.py).
        entry = self._dispatch.lookup(flat_inputs)
        if entry is not None:
            region = entry.region
        else:
            region, key = self._region_and_key(flat_inputs)
            # A region kept under a static key is remembered for these exact shapes only.
            static = key != _region_key(flat_inputs, self._dynamic)
            dynamic = frozenset() if static else frozenset(position for position, dims in enumerate(self._dynamic) if dims)
            self._dispatch.remember(flat_inputs, region, dynamic)
        if region is None:
            call_args, call_kwargs = self._unflatten(args)
            return self._fn(*call_args, **call_kwargs)
        return region.unflatten(region(flat_inputs))


def aot_graph(
    gm: torch.nn.Module | Callable[..., Any],
    example_inputs: Sequence[Any],
    *,
    fw_compiler: CompilerFn,
    bw_compiler: CompilerFn | None = None,
    partition: Partitioner = min_cut,
    decompositions: DecompositionSource | None = None,
    config: AotConfig | None = None,
) -> Callable[..., Any]:
    """Compile an FX graph (or any module/callable over flat tensors) into forward/backward ATen graphs.

    With the compilers bound (`functools.partial(aot_graph, fw_compiler=...)`) this is a
    `CompilerFn`, the shape of a capture backend.

    Args:
        gm: a `torch.fx.GraphModule` (any `nn.Module` or callable also works); its parameters and
            buffers become graph inputs.
        example_inputs: the positional inputs it is compiled for (real or fake tensors).
        fw_compiler: `(aten_gm, fake_inputs) -> callable` for the forward graph.
        bw_compiler: the same for the backward graph; `fw_compiler` when None.
        partition: `save_all` or `min_cut` (default), or any `(JointGraph) -> (fw_gm, bw_gm)`.
        decompositions: the ATen decomposition table; `default_decompositions()` when None.
        config: `AotConfig()` when None.

    Returns:
        A callable taking the same positional inputs as `gm` and returning what it returns.
    """
    module = gm if isinstance(gm, torch.nn.Module) else None
    compilers = Compilers(fw_compiler, bw_compiler or fw_compiler)
    if isinstance(gm, torch.fx.GraphModule):
        # Custom autograd.Functions and tensor hooks run eagerly between compiled parts, each
        # part compiled on its first call (tracing/opaque.py).
        options = (compilers, partition, decompositions, config or AotConfig())
        split = split_at_opaque_nodes(gm, lambda part: AotCallable(part, part, *options))
        if split is not None:
            return split
    compiled = AotCallable(module, gm, compilers, partition, decompositions, config or AotConfig())
    flat_inputs = [*compiled.state_tensors(), *example_inputs]
    compiled._dynamic = dynamic_dims_of(flat_inputs)
    compiled.region_for(flat_inputs)
    return compiled


class _AotFunction:
    """`aot_function`'s result: compiles per input signature (pytree structure, shapes, dtypes)."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]) -> None:
        self._fn = fn
        self._options = options
        self._compiled: dict[Any, tuple[AotCallable, pytree.TreeSpec]] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, spec = pytree.tree_flatten((args, kwargs))
        key = (spec, tuple(_signature(x) for x in leaves))
        if key not in self._compiled:
            fn = self._fn

            def flat_fn(*flat: Any, _spec: pytree.TreeSpec = spec) -> Any:
                call_args, call_kwargs = pytree.tree_unflatten(list(flat), _spec)
                return fn(*call_args, **call_kwargs)

            self._compiled[key] = (AotCallable(None, flat_fn, **self._options), spec)
        return self._compiled[key][0](*leaves)


def _signature(value: Any, with_grad: bool = True, dynamic: frozenset[int] = frozenset()) -> Any:
    if isinstance(value, torch.Tensor):
        grad = value.requires_grad if with_grad else None
        if dynamic:
            # Sizes of dynamic dims are free; strides are kept only as the dims' memory order
            # (the compiled graph assumed that order, with symbolic strides).
            # Sizes 0 and 1 stay specialized (as torch's ShapeEnv does: a symbol is assumed >= 2).
            shape = tuple(None if d in dynamic and _size_hint(n) >= 2 else _size_hint(n) for d, n in enumerate(value.shape))
            order = tuple(sorted((d for d in range(value.dim()) if _size_hint(value.shape[d]) != 1), key=lambda d: (_stride_hint(value, d), d)))
            return (shape, order, value.dtype, value.device, grad)
        # A fake input's static sizes may still be SymInts whose symbol the capture specialized
        # (a recurrent layer guards its sequence length): unhashable, so keyed by their values.
        return (tuple(map(_size_hint, value.shape)), tuple(map(_size_hint, value.stride())), value.dtype, value.device, grad)
    if isinstance(value, torch.SymInt) and not _is_symbolic(value):
        return (int, _size_hint(value))
    return (type(value), value) if isinstance(value, (int, float, bool, str, type(None))) else type(value)


def _size_hint(value: Any) -> int:
    """An int, or a SymInt's hint: never ``int(sym_int)``, which would add a guard."""
    if isinstance(value, torch.SymInt):
        hint = getattr(value.node, "hint", None)
        return int(hint) if hint is not None else 2
    return int(value)


def _stride_hint(value: torch.Tensor, dim: int) -> int:
    return _size_hint(value.stride(dim))


def aot_function(
    fn: Callable[..., Any],
    *,
    fw_compiler: CompilerFn,
    bw_compiler: CompilerFn | None = None,
    partition: Partitioner = min_cut,
    decompositions: DecompositionSource | None = None,
    config: AotConfig | None = None,
) -> Callable[..., Any]:
    """Compile `fn` (any function of pytrees of tensors) through aotgrad, lazily on each new input
    signature (shapes, strides, dtypes, devices, requires_grad); arguments as for `aot_graph`.

    Example:
        >>> f = aot_function(lambda x: x.sin().sum(), fw_compiler=eager_compiler)
        >>> f(torch.randn(3, requires_grad=True)).backward()
    """
    options = {
        "compilers": Compilers(fw_compiler, bw_compiler or fw_compiler),
        "partition": partition,
        "decompositions": decompositions,
        "config": config or AotConfig(),
    }
    return _AotFunction(fn, options)


class AotModule(torch.nn.Module):
    """`aot_module`'s result: a module whose forward runs the compiled graphs of `module`.

    It shares `module`'s parameters and buffers (optimizers and state dicts see the same tensors).
    """

    def __init__(self, module: torch.nn.Module, options: dict[str, Any]) -> None:
        super().__init__()
        self.module = module
        self._options = options
        self._compiled: dict[Any, AotCallable] = {}

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the compiled module (arguments may be any pytrees of tensors and constants)."""
        leaves, spec = pytree.tree_flatten((args, kwargs))
        key = (spec, tuple(_signature(x) for x in leaves), self.module.training)
        if key not in self._compiled:
            self._compiled[key] = AotCallable(self.module, self.module, **self._options, in_spec=spec)
        return self._compiled[key](*leaves)


def aot_module(
    module: torch.nn.Module,
    *,
    fw_compiler: CompilerFn,
    bw_compiler: CompilerFn | None = None,
    partition: Partitioner = min_cut,
    decompositions: DecompositionSource | None = None,
    config: AotConfig | None = None,
) -> AotModule:
    """Compile `module` through aotgrad; its parameters and buffers become graph inputs.

    Arguments as for `aot_graph`; the module is compiled per input signature and train/eval mode.
    """
    options = {
        "compilers": Compilers(fw_compiler, bw_compiler or fw_compiler),
        "partition": partition,
        "decompositions": decompositions,
        "config": config or AotConfig(),
    }
    return AotModule(module, options)


def eager_compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """The "compiler" that runs a graph as it is, with torch.fx (used by `aot_eager`).

    The graph comes back boxed (`aotgrad.runtime.boxed`): it takes one list of inputs and frees
    each input after its last use, so a backward frees saved activations as it runs.
    """
    return boxed_graph_module(gm)


def aot_eager(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """The `aot_eager` backend: aotgrad with eager forward and backward (the FAQ's triage tool)."""
    return aot_graph(gm, example_inputs, fw_compiler=eager_compiler)
