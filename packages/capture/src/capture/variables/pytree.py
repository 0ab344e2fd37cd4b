"""`torch.utils._pytree` called on traced values: `tree_flatten`, `tree_leaves`, `tree_structure`,
`tree_unflatten`, `tree_map`, `tree_map_`, `tree_iter` and `TreeSpec.unflatten`.

The structure of a traced tree is known at trace time (lists, tuples, named tuples, dicts, OrderedDicts,
deques, None), so it is mirrored by a skeleton: the same containers with a `_Leaf` marker in place of each
leaf. The real pytree functions run on the skeleton, which gives the real `TreeSpec` (a constant of the
trace) and the leaves' order; the markers are then swapped back for the traced leaves. Trees holding a
container capture does not model as such (a registered custom node, a `torch.Size` with symbolic sizes)
are a graph break.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree

from capture.variables.base import ConstantVariable, Unsupported, VariableTracker, is_constant_value
from capture.variables.collections_types import DefaultDictVariable, DequeVariable, OrderedDictVariable
from capture.variables.common import Args, Kwargs
from capture.variables.containers import DictVariable, IteratorVariable, ListVariable, TupleVariable
from capture.variables.sizes import SizeVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

_MODELLED = ("tree_flatten", "tree_leaves", "tree_structure", "tree_unflatten", "tree_map", "tree_map_",
             "tree_iter")


class _Leaf:
    """Stands for leaf number `index` of a traced tree inside its skeleton (no pytree node type)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def pytree_callable(value: Any) -> VariableTracker | None:
    """The tracker of a modelled `torch.utils._pytree` function (or a spec's bound `unflatten`), or None."""
    name = getattr(value, "__name__", None)
    if name in _MODELLED and getattr(pytree, name, None) is value:
        return PytreeFunctionVariable(name)
    if value is pytree.TreeSpec.unflatten:
        return SpecUnflattenVariable()
    return None


class PytreeFunctionVariable(VariableTracker):
    """One of the modelled pytree functions, by name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def python_type(self) -> type:
        return type(getattr(pytree, self.name))

    def reconstruct(self, rebuild: Any) -> str:
        """The real pytree function."""
        return str(rebuild.constant(getattr(pytree, self.name)))

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        kwargs = dict(kwargs)
        if self.name == "tree_unflatten":
            leaves, spec = _bind(args, kwargs, ("leaves", "treespec"))
            return unflatten(tx, _items(tx, leaves), _spec(spec))
        if self.name in ("tree_map", "tree_map_"):
            if len(args) < 2:
                raise Unsupported(f"{self.name}() needs a function and a tree", user_error=True)
            return _tree_map(tx, args[0], args[1], list(args[2:]), _is_leaf(kwargs), in_place=self.name == "tree_map_")
        (tree,) = _bind(args, kwargs, ("tree",), optional=("is_leaf",))
        tree_leaves, tree_spec = flatten(tx, tree, _is_leaf(kwargs))
        if self.name == "tree_flatten":
            return TupleVariable([ListVariable(tree_leaves), _spec_tracker(tx, tree_spec)])
        if self.name == "tree_leaves":
            return ListVariable(tree_leaves)
        if self.name == "tree_iter":
            return IteratorVariable(tree_leaves)
        return _spec_tracker(tx, tree_spec)

    def __repr__(self) -> str:
        return f"PytreeFunctionVariable({self.name})"


class SpecUnflattenVariable(VariableTracker):
    """`TreeSpec.unflatten`, called with a real spec (`spec.unflatten(leaves)` binds it to the spec)."""

    def python_type(self) -> type:
        return type(pytree.TreeSpec.unflatten)

    def reconstruct(self, rebuild: Any) -> str:
        """The real function."""
        return str(rebuild.constant(pytree.TreeSpec.unflatten))

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        spec, leaves = _bind(args, dict(kwargs), ("self", "leaves"))
        return unflatten(tx, _items(tx, leaves), _spec(spec))


def flatten(tx: Tracer, tree: VariableTracker,
            is_leaf: VariableTracker | None = None) -> tuple[list[VariableTracker], pytree.TreeSpec]:
    """The traced leaves of `tree` in pytree order, and its real spec."""
    leaves: list[VariableTracker] = []
    skeleton = _skeleton(tx, tree, leaves, is_leaf)
    try:
        markers, spec = pytree.tree_flatten(skeleton)
    except Exception as error:
        raise Unsupported(f"tree_flatten of {tree}: {type(error).__name__}: {error}") from error
    return [leaves[m.index] if isinstance(m, _Leaf) else ConstantVariable(m) for m in markers], spec


def unflatten(tx: Tracer, leaves: list[VariableTracker], spec: pytree.TreeSpec) -> VariableTracker:
    """`tree_unflatten(leaves, spec)`: the traced containers of `spec`'s structure around `leaves`."""
    if len(leaves) != spec.num_leaves:
        message = f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to a " \
                  f"pytree that holds {spec.num_leaves} items ({spec})."
        raise Unsupported(f"ValueError: {message}", user_error=True, exception=ValueError(message))
    try:
        skeleton = pytree.tree_unflatten([_Leaf(i) for i in range(len(leaves))], spec)
    except Exception as error:  # a node type that cannot hold markers (torch.Size)
        raise Unsupported(f"tree_unflatten into {spec}: {type(error).__name__}: {error}") from error
    return _rebuild(tx, skeleton, leaves)


def _skeleton(tx: Tracer, node: VariableTracker, leaves: list[VariableTracker],
              is_leaf: VariableTracker | None) -> Any:
    """`node` as real containers with `_Leaf` markers (numbered into `leaves`) for its leaves."""
    def leaf() -> _Leaf:
        leaves.append(node)
        return _Leaf(len(leaves) - 1)

    if is_leaf is not None and is_leaf.call(tx, [node], {}).truth(tx):
        return leaf()

    def children(items: list[VariableTracker]) -> list[Any]:
        return [_skeleton(tx, item, leaves, is_leaf) for item in items]

    kind = type(node)
    if kind is ListVariable:
        return children(node.items)  # type: ignore[attr-defined]
    if kind is DequeVariable:
        return collections.deque(children(node.items), node.maxlen)  # type: ignore[attr-defined]
    if isinstance(node, SizeVariable):
        if not node.is_constant() and not all(item.is_constant() for item in node.items):
            raise Unsupported("pytree over a torch.Size with symbolic sizes")
        return torch.Size([item.as_constant() for item in node.items])  # its sizes come back as constants
    if isinstance(node, TupleVariable):
        items = children(node.items)
        if node.cls is None:
            return tuple(items)
        return node.cls(*items) if hasattr(node.cls, "_fields") else node.cls(items)  # structseqs take one tuple
    if kind in (DictVariable, OrderedDictVariable):
        entries = {key: _skeleton(tx, value, leaves, is_leaf) for key, value in node.items.items()}  # type: ignore[attr-defined]
        return entries if kind is DictVariable else collections.OrderedDict(entries)
    if kind is DefaultDictVariable and node.factory.is_constant():  # type: ignore[attr-defined]
        entries = {key: _skeleton(tx, value, leaves, is_leaf) for key, value in node.items.items()}  # type: ignore[attr-defined]
        return collections.defaultdict(node.factory.as_constant(), entries)  # type: ignore[attr-defined]
    if node.is_constant():
        value = node.as_constant()
        # None and constant containers are flattened by pytree itself (their leaves come back as constants).
        return value if value is None or not _is_leaf_type(type(value)) else leaf()
    try:
        kind_at_run_time = node.python_type()
    except Unsupported:
        kind_at_run_time = object
    if not _is_leaf_type(kind_at_run_time):
        raise Unsupported(f"pytree over a {kind_at_run_time.__qualname__} ({node}), a pytree node capture "
                          "does not model")
    return leaf()


def _is_leaf_type(kind: type) -> bool:
    """True when pytree treats values of `kind` as leaves (neither registered nor a named tuple)."""
    return kind not in pytree.SUPPORTED_NODES and not pytree.is_namedtuple_class(kind)


def _rebuild(tx: Tracer, value: Any, leaves: list[VariableTracker]) -> VariableTracker:
    """Trackers for a skeleton made by `tree_unflatten` on markers."""
    if isinstance(value, _Leaf):
        return leaves[value.index]
    kind = type(value)
    if kind is list:
        return ListVariable([_rebuild(tx, item, leaves) for item in value])
    if kind is collections.deque:
        return DequeVariable([_rebuild(tx, item, leaves) for item in value], value.maxlen)
    if isinstance(value, tuple) and (kind is tuple or hasattr(kind, "_fields") or hasattr(kind, "n_fields")):
        return TupleVariable([_rebuild(tx, item, leaves) for item in value], cls=None if kind is tuple else kind)
    if kind in (dict, collections.OrderedDict, collections.defaultdict):
        entries = {key: _rebuild(tx, item, leaves) for key, item in value.items()}
        if kind is dict:
            return DictVariable(entries)
        if kind is collections.OrderedDict:
            return OrderedDictVariable(entries)
        return DefaultDictVariable(tx.output.wrap_value(value.default_factory, None), entries)
    if is_constant_value(value):
        return ConstantVariable(value)
    raise Unsupported(f"tree_unflatten into a {kind.__qualname__}, a pytree node capture does not model")


def _tree_map(tx: Tracer, fn: VariableTracker, tree: VariableTracker, rests: list[VariableTracker],
              is_leaf: VariableTracker | None, *, in_place: bool) -> VariableTracker:
    leaves, spec = flatten(tx, tree, is_leaf)
    columns = [leaves]
    for rest in rests:
        rest_leaves, rest_spec = flatten(tx, rest, is_leaf)
        if rest_spec != spec:
            raise Unsupported("tree_map over trees of different structures (a prefix tree)")
        columns.append(rest_leaves)
    results = [fn.call(tx, list(row), {}) for row in zip(*columns)]
    return tree if in_place else unflatten(tx, results, spec)


def _spec_tracker(tx: Tracer, spec: pytree.TreeSpec) -> VariableTracker:
    tx.output.keepalive.append(spec)
    return tx.output.wrap_value(spec, None)


def _spec(value: VariableTracker) -> pytree.TreeSpec:
    spec = getattr(value, "value", None)
    if not isinstance(spec, pytree.TreeSpec):
        raise Unsupported(f"tree_unflatten with {value} as the spec (not one a traced tree_flatten made)")
    return spec


def _items(tx: Tracer, leaves: VariableTracker) -> list[VariableTracker]:
    return list(leaves.iterate(tx))


def _is_leaf(kwargs: Kwargs) -> VariableTracker | None:
    is_leaf = kwargs.pop("is_leaf", None)
    if kwargs:
        raise Unsupported(f"pytree call with unexpected keyword arguments {sorted(kwargs)}", user_error=True)
    if is_leaf is None or (is_leaf.is_constant() and is_leaf.as_constant() is None):
        return None
    return is_leaf


def _bind(args: Args, kwargs: dict[str, VariableTracker], names: tuple[str, ...],
          optional: tuple[str, ...] = ()) -> list[VariableTracker]:
    """The required arguments `names`, given by position or keyword; `optional` ones stay in `kwargs`."""
    values = list(args[:len(names)])
    for name in names[len(values):]:
        if name not in kwargs:
            raise Unsupported(f"missing argument {name!r}", user_error=True)
        values.append(kwargs.pop(name))
    for name, extra in zip(optional, args[len(names):]):
        kwargs[name] = extra
    if len(args) > len(names) + len(optional):
        raise Unsupported("too many positional arguments", user_error=True)
    return values
