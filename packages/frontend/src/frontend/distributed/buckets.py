"""The bucket plan: which nodes of a captured graph feed which of DDP's gradient buckets.

DDP all-reduces gradients bucket by bucket, the first bucket holding the parameters whose
gradients become ready first in backward, i.e. those used last in forward. A captured graph run
as one autograd node hands autograd every gradient at once, at the very end of its backward, so
no all-reduce can start early. The plan walks the graph from its output back to its inputs,
counting the bytes of the DDP-managed parameters each node uses for the first time, and closes a
bucket once it holds its capacity (DDP's ``bucket_cap_mb``; the first bucket's is DDP's first
bucket cap); then each bucket's nodes are compiled as a subgraph of their own (`split`).

A boundary is moved (two buckets merged) where cutting would not work: a bucket that uses no
parameter at all (ops before the first parameter), a boundary that a non-tensor value (a
symbolic size) would cross, a bucket none of whose values is used later, a boundary between a
value and a later in-place update of it (``out += identity`` in a residual block). A graph that changes
grad mode or autocast state is never split (its state would have to cross subgraphs).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.amp import autocast_mode
from torch.multiprocessing.reductions import StorageWeakRef

from frontend.errors import KilnError

_MIB = 1024 * 1024

_GLOBAL_STATE_TARGETS = frozenset({torch._C._set_grad_enabled, autocast_mode._enter_autocast, autocast_mode._exit_autocast})
"""Graph calls that change process state later nodes depend on: such a graph is not split."""


class InvalidBucketCapError(KilnError, ValueError):
    """A DDP module's bucket capacity (``bucket_cap_mb``) cannot describe gradient buckets."""


@dataclass(frozen=True)
class BucketCaps:
    """The capacities of DDP's gradient buckets, in bytes.

    Attributes:
        first: the capacity of the first bucket (the gradients ready first in backward).
        rest: the capacity of every later bucket.
        per_bucket: DDP's explicit per-bucket capacities (``bucket_cap_mb_list``), when given; the
            last one repeats.
    """

    first: int
    rest: int
    per_bucket: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name, value in (("first", self.first), ("rest", self.rest)) + tuple(
                (f"per_bucket[{i}]", v) for i, v in enumerate(self.per_bucket)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidBucketCapError(
                    f"a gradient bucket's capacity must be a whole number of bytes >= 0, got {name}={value!r}")

    def cap(self, index: int) -> int:
        """The capacity of bucket `index` (0: the first bucket DDP all-reduces)."""
        if self.per_bucket:
            return self.per_bucket[min(index, len(self.per_bucket) - 1)]
        return self.first if index == 0 else self.rest

    @classmethod
    def of(cls, ddp: torch.nn.Module) -> BucketCaps:
        """The capacities `ddp` (a `DistributedDataParallel`) buckets its gradients with.

        Raises:
            InvalidBucketCapError: DDP was given a negative, infinite or NaN ``bucket_cap_mb``.
        """
        cap = getattr(ddp, "bucket_bytes_cap", None)
        _check_cap("bucket_cap_mb", cap)
        assert isinstance(cap, int)
        per_bucket = tuple(getattr(ddp, "bucket_bytes_cap_list", None) or ())
        for value in per_bucket:
            _check_cap("bucket_cap_mb_list", value, per_bucket)
        # DDP starts with a small first bucket (1 MiB) only when bucket_cap_mb was left at its default.
        first = cap
        if getattr(ddp, "bucket_bytes_cap_default", False) and torch.distributed.is_available():
            first = min(cap, int(getattr(torch.distributed, "_DEFAULT_FIRST_BUCKET_BYTES", cap)))
        return cls(first=first, rest=cap, per_bucket=per_bucket)

    @classmethod
    def from_mb(cls, bucket_cap_mb: float, first_bucket_mb: float | None = None) -> BucketCaps:
        """Capacities from MiB, as DDP's ``bucket_cap_mb`` is given (the first bucket too, unless named)."""
        _check_cap("bucket_cap_mb", bucket_cap_mb)
        rest = int(bucket_cap_mb * _MIB)
        if first_bucket_mb is None:
            return cls(first=rest, rest=rest)
        _check_cap("first_bucket_mb", first_bucket_mb)
        return cls(first=int(first_bucket_mb * _MIB), rest=rest)


def _check_cap(name: str, value: Any, in_list: Sequence[Any] | None = None) -> None:
    """Raise InvalidBucketCapError unless `value` is a finite number >= 0."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    if ok:
        return
    shown = f"{value / _MIB:g}" if isinstance(value, int) and not isinstance(value, bool) else repr(value)
    where = f"{name}={[v / _MIB for v in in_list]!r}" if in_list is not None else f"{name}={shown}"
    raise InvalidBucketCapError(
        f"DistributedDataParallel({where}): a gradient bucket's capacity must be a finite number of MiB >= 0 "
        f"(DDP's default is 25). Pass a valid bucket_cap_mb to DistributedDataParallel, or compile with "
        f"options={{'optimize_ddp': False}} to compile the wrapped module as one graph without bucket splitting.")


@dataclass(frozen=True)
class Bucket:
    """One subgraph of the plan.

    Attributes:
        nodes: the names of the graph nodes computed in this subgraph, in graph order.
        parameters: the DDP-managed parameters it uses first (walking back from the output), by name.
        nbytes: their size in bytes.
    """

    nodes: tuple[str, ...]
    parameters: tuple[str, ...]
    nbytes: int


@dataclass(frozen=True)
class BucketPlan:
    """How one captured graph is cut: its buckets in graph (forward) order.

    The last bucket's gradients are ready first in backward: it is DDP's bucket 0.

    Attributes:
        buckets: the subgraphs, in forward order.
        caps: the capacities the plan was made with.
        reason: why the graph is not split, when it is one bucket for a reason other than size.
    """

    buckets: tuple[Bucket, ...]
    caps: BucketCaps
    reason: str = ""

    def __len__(self) -> int:
        return len(self.buckets)

    def describe(self) -> str:
        """One line per bucket, in the order DDP all-reduces them (backward order)."""
        lines = []
        for index, bucket in enumerate(reversed(self.buckets)):
            lines.append(f"bucket {index}: {bucket.nbytes / _MIB:.3f} MiB (cap {self.caps.cap(index) / _MIB:.3f}), "
                         f"{len(bucket.nodes)} nodes, parameters {', '.join(bucket.parameters) or '-'}")
        if self.reason:
            lines.append(f"not split: {self.reason}")
        return "\n".join(lines)


@dataclass
class _Building:
    nodes: list[torch.fx.Node] = field(default_factory=list)
    parameters: list[str] = field(default_factory=list)
    nbytes: int = 0


def managed_parameters(ddp: torch.nn.Module) -> dict[int, str]:
    """``id(parameter) -> name`` for the parameters `ddp` all-reduces (requiring grad, not ignored)."""
    ignored = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    wrapped = getattr(ddp, "module", ddp)
    return {id(p): name for name, p in wrapped.named_parameters()
            if p.requires_grad and name not in ignored and not getattr(p, "_ddp_ignored", False)}


def plan_buckets(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], caps: BucketCaps,
                 managed: Mapping[int, str]) -> BucketPlan:
    """Cut `gm`'s nodes into DDP-sized buckets (see the module's docstring).

    Args:
        gm: a captured graph.
        example_inputs: its inputs, in placeholder order (a parameter passed in counts as used there).
        caps: the bucket capacities (`BucketCaps.of(ddp)`).
        managed: the parameters that count (`managed_parameters(ddp)`), by ``id``.

    Returns:
        The plan; one bucket when the graph should not (or need not) be split.
    """
    compute = [node for node in gm.graph.nodes if node.op in ("call_function", "call_method", "call_module")]
    if any(node.op == "call_function" and node.target in _GLOBAL_STATE_TARGETS for node in compute):
        return _single(compute, caps, "the graph changes grad mode or autocast state")
    inputs = {node: value for node, value in zip(
        (n for n in gm.graph.nodes if n.op == "placeholder"), example_inputs, strict=False)}
    building = [_Building()]
    seen: set[int] = set()
    for node in reversed(compute):
        current = building[-1]
        if current.parameters and current.nbytes >= caps.cap(len(building) - 1):
            current = _Building()
            building.append(current)
        for parameter in _parameters_used(gm, node, inputs):
            name = managed.get(id(parameter))
            if name is None or id(parameter) in seen:
                continue
            seen.add(id(parameter))
            current.parameters.append(name)
            current.nbytes += parameter.numel() * parameter.element_size()
        current.nodes.append(node)
    groups = [list(reversed(b.nodes)) for b in reversed(building)]  # forward order
    infos = list(reversed(building))
    _merge_uncuttable(gm, groups, infos)
    buckets = tuple(Bucket(tuple(n.name for n in nodes), tuple(info.parameters), info.nbytes)
                    for nodes, info in zip(groups, infos, strict=True))
    return BucketPlan(buckets, caps)


def _single(compute: list[torch.fx.Node], caps: BucketCaps, reason: str) -> BucketPlan:
    return BucketPlan((Bucket(tuple(n.name for n in compute), (), 0),), caps, reason)


def _merge_uncuttable(gm: torch.fx.GraphModule, groups: list[list[torch.fx.Node]], infos: list[_Building]) -> None:
    """Merge neighbouring buckets (in place) where a cut between them cannot be made."""

    def merge(index: int) -> None:  # bucket `index` joins bucket `index + 1`
        moved = groups.pop(index)  # (popped first: bucket `index + 1` is then at `index`)
        groups[index][:0] = moved
        info = infos.pop(index)
        infos[index].parameters[:0] = info.parameters
        infos[index].nbytes += info.nbytes

    if len(groups) > 1 and not infos[0].parameters:
        merge(0)  # ops before the first parameter: no gradient bucket of their own
    index = 0
    while index < len(groups) - 1:
        members = set(groups[index])
        crossing = [n for n in groups[index] if any(user not in members for user in n.users)]
        if (not crossing or any(not _is_tensor_value(n) for n in crossing)
                or _storages(crossing) & _written_storages(gm, (node for group in groups[index + 1:] for node in group))):
            merge(index)
        else:
            index += 1


_IN_PLACE_OPERATORS = frozenset({
    operator.iadd, operator.isub, operator.imul, operator.imatmul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
    operator.setitem,
})


def _written_arguments(gm: torch.fx.GraphModule, node: torch.fx.Node) -> list[Any]:
    """The arguments `node` writes in place: ``x += y``, ``x[i] = y``, ``x.add_(y)``, ``torch.relu_(x)``,
    ``F.relu(x, inplace=True)``, a module built with ``inplace=True``, ``out=``."""
    written = [node.kwargs["out"]] if "out" in node.kwargs else []
    first = node.args[0] if node.args else None
    if node.op == "call_function":
        name = getattr(node.target, "__name__", "")
        in_place = node.target in _IN_PLACE_OPERATORS or (name.endswith("_") and not name.startswith("_"))
    elif node.op == "call_method":
        name = str(node.target)
        in_place = name.endswith("_") and not name.startswith("_")
    elif node.op == "call_module":
        in_place = getattr(gm.get_submodule(str(node.target)), "inplace", False) is True
    else:
        in_place = False
    if in_place or node.kwargs.get("inplace") is True:
        written.append(first)
    return written


def _storage_of(node: Any) -> Any:
    """A key equal for every node whose example value shares its memory (views included); None if not a tensor."""
    value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor):
        return None
    return StorageWeakRef(value.untyped_storage())


def _storages(nodes: Iterable[torch.fx.Node]) -> set[Any]:
    return {key for key in map(_storage_of, nodes) if key is not None}


def _written_storages(gm: torch.fx.GraphModule, nodes: Iterable[torch.fx.Node]) -> set[Any]:
    """The memory `nodes` write in place (a cut must not separate a value from such a write: the later
    subgraph would update its own input, which requires grad, in place)."""
    return {key for node in nodes for key in map(_storage_of, _written_arguments(gm, node)) if key is not None}


def _is_tensor_value(node: torch.fx.Node) -> bool:
    value = node.meta.get("example_value")
    return isinstance(value, torch.Tensor)


def _parameters_used(gm: torch.fx.GraphModule, node: torch.fx.Node,
                     inputs: Mapping[torch.fx.Node, Any]) -> Iterator[torch.nn.Parameter]:
    """The parameters `node` reads: a called module's, attributes it takes, parameters passed in."""
    if node.op == "call_module":
        yield from gm.get_submodule(str(node.target)).parameters()
    arguments: list[torch.fx.Node] = []
    torch.fx.node.map_arg((node.args, node.kwargs), arguments.append)
    for argument in arguments:
        if argument.op == "get_attr":
            value = operator.attrgetter(str(argument.target))(gm)
        elif argument.op == "placeholder":
            value = inputs.get(argument)
        else:
            continue
        if isinstance(value, torch.nn.Parameter):
            yield value
