"""In-place writes into tensors whose elements share memory (`x.expand(2, 3).zero_()`).

Functionalization assumes each element of a written tensor is its own: it turns the write into an
out-of-place op and folds the result back into the base through each view's inverse. For an
`expand` that inverse sums the changes of every copy into the one element they share, so a write
that changes every copy (`zero_`, `masked_fill_`) would come out as the sum of the changes (eager:
`0`; functionalized: `-x`). A write through a view without overlap changes each shared element at
most once, and the sum is right. So:

* eager's ops that accept an overlapping destination and write one value per memory location
  (`zero_`, `fill_`, `masked_fill_`) are rewritten onto the view with one copy per location (each
  stride-0 dim narrowed to size 1; for `masked_fill_` the mask is any-reduced over those dims, as
  eager fills a location when any of its copies is masked). Where the written tensor is an `expand`
  output, that view is taken of the expand's source instead (unsqueezed), so that functionalization
  folds the write back through plain views: the fold through an `expand` is `base + sum(new - base)`,
  NaN where an infinite element is overwritten (`inf + (100 - inf)`) and rounded elsewhere;
* the others, which eager refuses ("more than one element of the written-to tensor refers to a
  single memory location"), raise that same error (`OverlappingWriteError`) when the compiled
  graph runs;
* a write into a view of an `expand` output that touches each location once (`e.narrow(0, 1, 1).add_(1)`),
  and a fill through a view of one, are made, with gradients off, into an `as_strided` view of the
  memory's owner: folded back through the expand it would be `base + sum(new - base)` too. Where
  that memory is an input's (the write must stay an input mutation, and an `as_strided` view of the
  input would bake in its storage offset), the write is made into a clone of the input, copied back;
* such a write where a gradient flows through it (an `as_strided` view gets a wrong gradient) is made
  into a plain view of the expand's source where the written view holds exactly the source's
  elements (`s.expand(3, -1).narrow(0, 0, 1)`): exact, with eager's gradient. A floating-point write
  into only part of them raises `EagerOnlyWriteError` (the fold would round); an integer one stays;
* an `expand` that repeats nothing (`x.expand(-1, -1)`) is traced as a `view`, whose fold is exact;
* a write through an `unfold` view whose windows do not overlap (also through an `expand` of one,
  a fill writing one copy of each location) is made, where no gradient flows through it, into an
  `as_strided` view of the memory's owner: functionalization folds a write through `unfold` back
  with `unfold_backward`, which zeroes every element no window covers, and refuses any write
  through an `unfold` whose step is shorter than its size. Where that memory is an input's, the
  write is made into a clone of the input, copied back (an `as_strided` view of the input would
  bake in its storage offset);
* writes into tensors that may overlap without a stride-0 dim (`unfold`, `as_strided` views; eager
  writes those element by element, in its own loop order) raise `EagerOnlyWriteError`: the graph
  runs eagerly, whatever `fallback_to_eager` says (the program is valid; only eager defines it).
  With symbolic sizes, a view of dense memory is trusted to be distinct, but not one of an `unfold`
  whose step is shorter than its size: its windows overlap at most sizes.

`OverlapChecks` does this in the two-pass trace (it sees the in-place ops; the one-pass trace sees
them only after functionalization, so `OverlapWatch` sends such functions to the two-pass trace).
Inputs that overlap themselves (an expanded tensor passed in) are traced through their distinct
elements (`distinct_elements`), expanded again inside the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from aotgrad.errors import AotGradError, EagerOnlyWriteError, location_from_current_stack
from aotgrad.tracing.single_pass import SinglePassUnsupported

aten = torch.ops.aten

EAGER_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory "
    "location. Please clone() the tensor before performing the operation."
)

_FILLS = frozenset({aten.zero_.default, aten.fill_.Scalar})
_MASKED_FILLS = frozenset({aten.masked_fill_.Scalar, aten.masked_fill_.Tensor})
# Not pointwise-tagged, but refused by eager on an overlapping destination too (TensorIterator's check).
_REFUSED = frozenset(
    {
        "copy_", "masked_scatter_", "index_copy_", "put_", "scatter_", "scatter_add_", "scatter_reduce_",
        "uniform_", "normal_", "bernoulli_", "random_", "exponential_", "cauchy_", "log_normal_", "geometric_",
    }
)  # op names; and `fill_.Tensor` (`fill_.Scalar` is accepted)


class OverlappingWriteError(AotGradError):
    """An in-place op writes a tensor with several elements in one memory location, which eager
    refuses with this message; the compiled graph raises it when run."""

    def __init__(self, op: str, user_location: str | None) -> None:
        self.op = op
        self.user_location = user_location
        where = f" (`{op}` at {user_location})" if user_location else f" (`{op}`)"
        super().__init__(EAGER_MESSAGE + where)


def _size_over_one(size: Any) -> bool:
    # A symbolic size is >= 2: torch's ShapeEnv specializes 0 and 1.
    return isinstance(size, torch.SymInt) or size > 1


def repeated_dims(t: torch.Tensor) -> list[int]:
    """Dims of `t` along which every element is the same memory location (stride 0, size > 1).
    Empty for a tensor without elements: eager writes into it whatever its strides."""
    if _no_elements(t):
        return []
    return [d for d in range(t.dim()) if isinstance(t.stride(d), int) and t.stride(d) == 0 and _size_over_one(t.shape[d])]


def _no_elements(t: torch.Tensor) -> bool:
    # A symbolic size is never 0 (specialized), so a concrete 0 is the only way to be empty.
    return any(isinstance(size, int) and size == 0 for size in t.shape)


def provably_distinct(t: torch.Tensor, skip: Sequence[int] = (), symbolic: bool = True) -> bool:
    """Whether no two elements of `t` (ignoring dims `skip`) share memory: each stride passes the
    extent of the smaller ones. Symbolic sizes or strides: `symbolic` (True: trusted, views of
    dense tensors; False for a view of an `unfold` whose windows may overlap)."""
    if _no_elements(t):
        return True
    dims = [d for d in range(t.dim()) if d not in skip and not (isinstance(t.shape[d], int) and t.shape[d] <= 1)]
    if any(not isinstance(t.stride(d), int) or not isinstance(t.shape[d], int) for d in dims):
        return symbolic
    extent = 0
    for d in sorted(dims, key=lambda d: t.stride(d)):
        if t.stride(d) <= extent:
            return False
        extent += (t.shape[d] - 1) * t.stride(d)
    return True


def distinct_elements(t: torch.Tensor, dims: Sequence[int] | None = None) -> torch.Tensor:
    """The view of `t` with one copy of each repeated element: `dims` (default `repeated_dims`)
    narrowed to size 1. Expanding it to `t.shape` gives `t`'s layout back."""
    for d in repeated_dims(t) if dims is None else dims:
        t = t.narrow(d, 0, 1)
    return t


def _written_tensors(func: torch._ops.OpOverload, args: Sequence[Any], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    schema = func._schema
    written = []
    for i, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = args[i] if i < len(args) else kwargs.get(argument.name)
        if isinstance(value, torch.Tensor):
            written.append(value)
    return written


class OverlapChecks(TorchDispatchMode):
    """Handles in-place ops on tensors whose elements share memory, during the two-pass trace's
    first pass (see the module docstring)."""

    def __init__(self, inputs: Sequence[Any] = ()) -> None:
        super().__init__()
        # The traced function's inputs: a write into their memory stays a write through views (it
        # becomes an input mutation, which `as_strided` on the input would not).
        self._inputs = [t for t in inputs if isinstance(t, torch.Tensor)]
        # id of an `expand` output -> (that output, its source); the output is kept so ids stay unique.
        self._expand_sources: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        # id of an `expand` output or of a view of one -> (that tensor, the expand's source).
        self._over_expand: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        # id of an `unfold` output or of a view (or `expand`) of one -> (that tensor, the unfolded
        # tensor, whether windows of an unfold on the way may overlap: a step shorter than the size).
        self._over_unfold: dict[int, tuple[torch.Tensor, torch.Tensor, bool]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is aten.expand.default:
            out = func(*args, **kwargs)
            over_unfold = self._over_unfold_entry(args[0])
            if _repeats_nothing(args[0], out):
                # Folded back through an `expand`, a write would come out `base + (new - base)`
                # (rounded: 1e30 + (1 - 1e30) is 0); through a `view` it is exact.
                out = aten.view.default(args[0], list(out.shape))
                if over_unfold is not None:
                    self._over_unfold[id(out)] = (out, *over_unfold)
                return out
            if over_unfold is not None:
                # memory of an `unfold`: a write into it must not go through the unfold (see
                # `_through_unfolded`), so it is tracked as such, not as an expand's
                self._over_unfold[id(out)] = (out, *over_unfold)
                return out
            self._expand_sources[id(out)] = (out, args[0])
            self._over_expand[id(out)] = (out, args[0])
            return out
        if func is aten.unfold.default:
            out = func(*args, **kwargs)
            size = args[2] if len(args) > 2 else kwargs["size"]
            step = args[3] if len(args) > 3 else kwargs["step"]
            earlier = self._over_unfold_entry(args[0])
            may_overlap = step < size or (earlier is not None and earlier[1])
            self._over_unfold[id(out)] = (out, args[0], may_overlap)
            return out
        if getattr(func, "is_view", False) and args and (over_unfold := self._over_unfold_entry(args[0])) is not None:
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                self._over_unfold[id(out)] = (out, *over_unfold)
            return out
        if getattr(func, "is_view", False) and args and (source := self._expanded(args[0])) is not None:
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                self._over_expand[id(out)] = (out, source)
            return out
        if isinstance(func, torch._ops.OpOverload) and func._schema.is_mutable:
            for written in _written_tensors(func, args, kwargs):
                repeated = repeated_dims(written)
                over_unfold = self._over_unfold_entry(written)
                if over_unfold is not None:
                    return self._through_unfolded(func, args, kwargs, written, repeated, *over_unfold)
                if repeated:
                    return self._repeated(func, args, kwargs, written, repeated)
                source = self._source_of(written)
                if source is not None and args and args[0] is written and provably_distinct(written) \
                        and not _gradient_flows(args, kwargs):
                    return self._through_source(func, args, kwargs, written, source)
                owner = self._input_owner(written)
                if owner is not None and args and args[0] is written and provably_distinct(written) \
                        and not _gradient_flows(args, kwargs):
                    _write_through_copy(func, written, args[1:], kwargs, owner)
                    return written
                source = self._expanded(written)
                if source is not None and provably_distinct(written):
                    return _through_plain_views(func, args, kwargs, written, source)
                if not provably_distinct(written):
                    raise EagerOnlyWriteError(
                        f"`{func}` writes in place into a tensor whose elements may overlap in memory (an "
                        "`unfold` or `as_strided` view); eager writes it element by element, in an order "
                        "no functional graph can express, so this graph runs eagerly. To compile it, "
                        "write into a `clone()`.",
                        location_from_current_stack(),
                    )
        return func(*args, **kwargs)

    def _over_unfold_entry(self, t: Any) -> tuple[torch.Tensor, bool] | None:
        """(the tensor unfolded, whether windows may overlap) where `t` is an `unfold` output or a
        view or `expand` of one; else None."""
        entry = self._over_unfold.get(id(t))
        return (entry[1], entry[2]) if entry is not None and entry[0] is t else None

    def _through_unfolded(
        self, func: Any, args: Any, kwargs: dict[str, Any], written: torch.Tensor, repeated: list[int],
        unfolded: torch.Tensor, may_overlap: bool,
    ) -> Any:
        """A write into the memory of an `unfold` view (the view, a view of it, or an `expand` of
        either), made into the same memory locations as an `as_strided` view of the memory's owner
        (for an input's memory: of a clone of the input, copied back). Through the `unfold` itself,
        functionalization would fold the write back with `unfold_backward`, which zeroes every
        element no window covers, and it refuses a write through an `unfold` whose step is shorter
        than its size. Where elements overlap (eager writes them element by element; symbolic sizes
        of such an `unfold`: they may), where a gradient flows through the write, or where the
        written tensor is not the first argument, the graph runs eagerly (`EagerOnlyWriteError`);
        a write into repeated elements (stride 0) is one into a single copy of each, as for an
        `expand` (`_repeated`)."""
        if repeated and not (func in _FILLS or func in _MASKED_FILLS):
            return self._repeated(func, args, kwargs, written, repeated)  # refused, or eager only
        if not provably_distinct(written, repeated, symbolic=not may_overlap):
            raise EagerOnlyWriteError(
                f"`{func}` writes in place into a tensor whose elements may overlap in memory (an "
                "`unfold` view); eager writes it element by element, in an order no functional graph "
                "can express, so this graph runs eagerly. To compile it, write into a `clone()`.",
                location_from_current_stack(),
            )
        if _gradient_flows(args, kwargs) or not args or args[0] is not written:
            raise EagerOnlyWriteError(
                f"`{func}` writes in place through an `unfold` view; with gradients on, aotgrad cannot "
                "express that write, so this graph runs eagerly. To compile it, write into a `clone()`.",
                location_from_current_stack(),
            )
        rest = tuple(args[1:])
        if repeated and func in _MASKED_FILLS:
            mask = args[1].expand(written.shape)
            for d in repeated:
                mask = mask.any(d, keepdim=True)
            rest = (mask, *args[2:])
        target = distinct_elements(written, repeated)
        owner = unfolded._base if unfolded._base is not None else unfolded
        inputs = [x for x in self._inputs if owner is x or owner is x._base]
        if inputs:
            # an `as_strided` view of the input would bake in its storage offset
            if len(inputs) != 1 or not inputs[0].is_contiguous():
                raise EagerOnlyWriteError(
                    f"`{func}` writes in place through an `unfold` view of an input that is not "
                    "contiguous; aotgrad cannot express that write, so this graph runs eagerly. To "
                    "compile it, write into a `clone()`.",
                    location_from_current_stack(),
                )
            _write_through_copy(func, target, rest, kwargs, inputs[0])
        else:
            func(_storage_view(unfolded, target), *rest, **kwargs)
        return written

    def _expanded(self, t: Any) -> torch.Tensor | None:
        """The `expand` source `t` is a view of (through the expand), or None."""
        entry = self._over_expand.get(id(t))
        return entry[1] if entry is not None and entry[0] is t else None

    def _source_of(self, t: Any) -> torch.Tensor | None:
        """`_expanded(t)`, but None where that memory belongs to an input of the traced function."""
        source = self._expanded(t)
        if source is None:
            return None
        owner = source._base if source._base is not None else source
        if any(owner is t or owner is t._base for t in self._inputs):
            return None
        return source

    def _input_owner(self, t: Any) -> torch.Tensor | None:
        """The traced function's input whose memory `t` (an `expand` output or a view of one) is in,
        where that input is contiguous (a clone of it lays its elements out alike) and the only
        candidate; else None."""
        source = self._expanded(t)
        if source is None:
            return None
        owner = source._base if source._base is not None else source
        candidates = [x for x in self._inputs if owner is x or owner is x._base]
        if len(candidates) != 1 or not candidates[0].is_contiguous():
            return None
        return candidates[0]

    @staticmethod
    def _through_source(func: Any, args: Any, kwargs: dict[str, Any], written: torch.Tensor, source: torch.Tensor) -> Any:
        """A write into a view of an `expand` output that touches each memory location once, made
        into the same locations as an `as_strided` view of the expand's source: functionalization
        folds it back exactly, where through the expand it would fold ``base + sum(new - base)``
        (NaN over an infinite element, rounded elsewhere). Only where no gradient flows: traced with
        gradients, the write through `as_strided` got a wrong gradient (16 where eager gives 12
        for ``(w * 2).expand(2, n)[0].mul_(3)``), so there the fold through the expand stays."""
        func(_storage_view(source, written), *args[1:], **kwargs)
        return written

    def _repeated(self, func: Any, args: Any, kwargs: dict[str, Any], written: torch.Tensor, repeated: list[int]) -> Any:
        tolerated = func in _FILLS or func in _MASKED_FILLS  # eager accepts these
        if tolerated and args and args[0] is written and provably_distinct(written, repeated):
            rest = args[1:]
            if func in _MASKED_FILLS:
                mask = args[1].expand(written.shape)
                for d in repeated:
                    mask = mask.any(d, keepdim=True)
                rest = (mask, *args[2:])
            # An `expand` output itself is written through plain views of its source (`_distinct_view`).
            owner = None if id(written) in self._expand_sources else self._input_owner(written)
            if owner is not None and not _gradient_flows(args, kwargs):
                _write_through_copy(func, distinct_elements(written, repeated), rest, kwargs, owner)
            else:
                func(self._distinct_view(written, repeated), *rest, **kwargs)
            return written
        refused = func._schema.name.split("::")[-1] in _REFUSED or func is aten.fill_.Tensor
        if not tolerated and (torch.Tag.pointwise in func.tags or refused):
            raise OverlappingWriteError(str(func), location_from_current_stack())
        raise EagerOnlyWriteError(
            f"`{func}` writes in place into a tensor whose elements share memory (an `expand`ed view); "
            "aotgrad cannot express that write, so this graph runs eagerly. To compile it, write into a "
            "`clone()`.",
            location_from_current_stack(),
        )

    def _distinct_view(self, written: torch.Tensor, repeated: list[int]) -> torch.Tensor:
        """`distinct_elements(written, repeated)`, as a view of the `expand`'s source (itself
        through its distinct elements) where `written` is an `expand` output."""
        narrowed = distinct_elements(written, repeated)
        expanded = self._expand_sources.get(id(written))
        if expanded is None or expanded[0] is not written:
            source = self._source_of(written)
            if source is not None and not torch.is_grad_enabled():  # a view of an expand output
                return _storage_view(source, narrowed)
            return narrowed
        source = expanded[1]
        view = self._distinct_view(source, repeated_dims(source))
        for _ in range(written.dim() - view.dim()):
            view = view.unsqueeze(0)
        return view if view.shape == narrowed.shape else narrowed


def _through_plain_views(func: Any, args: Any, kwargs: dict[str, Any], written: torch.Tensor, source: torch.Tensor) -> Any:
    """A write into a view of an `expand` output that touches each memory location once, where the
    `as_strided` rewrites above do not apply (a gradient flows through it, or the memory is an input's
    that a clone cannot stand for). Folded back through the expand it would be ``base + sum(new -
    base)``: rounded in floating point (a bfloat16 ``copy_`` did not give the copied value, fuzz
    9581baeba1), NaN over an infinite element. Where the view holds exactly the source's elements
    (``s.expand(3, -1).narrow(0, 0, 1)`` is ``s.unsqueeze(0)``) the write is made into that plain view
    of the source, whose fold is exact and whose gradient is eager's (eager's write through the expand
    is one into the same elements of the source's memory). Otherwise an integer write stays (its fold
    is exact); a floating one raises `EagerOnlyWriteError`, so the graph runs eagerly."""
    view = _plain_view(source, written)
    if view is not None and args and args[0] is written:
        func(view, *args[1:], **kwargs)
        return written
    if written.is_floating_point() or written.is_complex():
        raise EagerOnlyWriteError(
            f"`{func}` writes in place through a view of an `expand`ed {written.dtype} tensor into part of "
            "its memory; a functional graph folds that write back as `base + sum(new - base)`, which "
            "rounds, so this graph runs eagerly. To compile it, write into a `clone()` of the expanded tensor.",
            location_from_current_stack(),
        )
    return func(*args, **kwargs)


def _plain_view(source: torch.Tensor, written: torch.Tensor) -> torch.Tensor | None:
    """`source` viewed as `written` (dims of size 1 added or dropped) when `written` holds exactly
    its elements, in the same layout: the same storage offset and the same (size, stride) of every
    dim longer than 1, in order. Else None."""

    def layout(t: torch.Tensor) -> list[tuple[Any, Any]]:
        return [(t.shape[d], t.stride(d)) for d in range(t.dim()) if not statically_known_true(t.shape[d] == 1)]

    mine, theirs = layout(written), layout(source)
    same = len(mine) == len(theirs) and statically_known_true(written.storage_offset() == source.storage_offset())
    if not same or not all(
        statically_known_true(a == b) and statically_known_true(s == t) for (a, s), (b, t) in zip(mine, theirs)
    ):
        return None
    return source.view(written.shape)


def _repeats_nothing(source: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether `out = source.expand(...)` only adds leading dims of size 1: a view, no copies."""
    lead = out.dim() - source.dim()
    return all(statically_known_true(n == 1) for n in out.shape[:lead]) and all(
        statically_known_true(a == b) for a, b in zip(out.shape[lead:], source.shape)
    )


def _gradient_flows(args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether a write with these arguments is traced with gradients (one of them requires grad)."""
    return torch.is_grad_enabled() and any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in pytree.tree_leaves((args, kwargs))
    )


def _write_through_copy(
    func: Any, target: torch.Tensor, rest: Sequence[Any], kwargs: dict[str, Any], owner: torch.Tensor
) -> None:
    """`func(target, *rest)` where `target` (no two elements in one memory location) is a view of an
    `expand` over the memory of `owner`, an input of the traced function: made on the same elements
    of a clone of `owner`, which is then copied into it. Through the expand, functionalization would
    fold the write back as `base + sum(new - base)` (rounded, NaN over an infinite element, failing
    for narrow integers); an `as_strided` view of the input itself would bake in its storage offset,
    which the compiled region is not specialized on. The offset into the clone is relative."""
    copy = owner.clone()  # contiguous, as `owner` is, from offset 0
    offset = target.storage_offset() - owner.storage_offset()
    func(copy.as_strided(target.shape, target.stride(), offset), *rest, **kwargs)
    owner.copy_(copy)


def _storage_view(source: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """The elements of `like` (a view sharing `source`'s memory) as an `as_strided` view of the
    tensor owning that memory: functionalization accepts `as_strided` only first in a view chain."""
    owner = source._base if source._base is not None else source
    return owner.as_strided(like.shape, like.stride(), like.storage_offset())


_INPLACE_DUNDERS = frozenset({"__setitem__"})
_EXPANDS = frozenset({"expand", "expand_as", "broadcast_to", "broadcast_tensors"})


class OverlapWatch(TorchFunctionMode):
    """For the one-pass trace: gives up (`SinglePassUnsupported`) at an in-place call on a tensor
    with repeated elements, which only the two-pass trace sees as in place, and at one after an
    `expand` (a write through it, even where it repeats nothing, needs `OverlapChecks`)."""

    def __init__(self) -> None:
        super().__init__()
        self._saw_repeated = False  # a tensor with repeated elements exists: views of it may be written
        self._saw_unfold = False  # an `unfold` view exists: a write through it needs the two-pass trace
        self._saw_expand = False  # an `expand` exists: `OverlapChecks` makes one repeating nothing a view

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        in_place = (
            (name.endswith("_") and not name.startswith("__"))
            or name in _INPLACE_DUNDERS
            or (name.startswith("__i") and name.endswith("__"))
            or kwargs.get("inplace") is True
        )
        targets = [kwargs.get("out")] if "out" in kwargs else ([args[0]] if in_place and args else [])
        for target in targets:
            for t in target if isinstance(target, (tuple, list)) else [target]:
                if isinstance(t, torch.Tensor) and (
                    self._saw_repeated or self._saw_unfold or self._saw_expand or repeated_dims(t)
                    or not provably_distinct(t)
                ):
                    raise SinglePassUnsupported(f"in-place `{name}` on a tensor whose elements overlap, or after one exists")
        if name == "unfold":
            self._saw_unfold = True
        if name in _EXPANDS:
            self._saw_expand = True
        out = func(*args, **kwargs)
        if not self._saw_repeated and isinstance(out, torch.Tensor) and repeated_dims(out):
            self._saw_repeated = True
        return out
