"""The compiled backward of a call where autograd gives some outputs no gradient (None).

The autograd.Function does not materialize gradients (`ctx.set_materialize_grads(False)`): an output
the loss never reached gets None. Eager autograd never runs that output's backward, and an input
reached only through it gets no gradient. So the general compiled backward (which takes every
tangent) is not called with zeros for it (a zero times a saved infinity is NaN, added into the real
gradients): a backward in which those tangents are structural zeros is derived from the backward
graph (`partition/absent_tangents.py`), compiled by the same backward compiler, once per pattern of
absent tangents, on first use. Gradients that come out zero are None, as in eager.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from aotgrad.partition.absent_tangents import without_absent_tangents
from aotgrad.runtime.boxed import call_boxed

__all__ = ["AbsentTangentBackwards", "TangentMeta"]

log = logging.getLogger("aotgrad")

TangentMeta = tuple[torch.Size, torch.dtype, torch.device]
"""A differentiable output's shape, dtype and device: what a tangent given as zeros is made of."""


@dataclasses.dataclass(frozen=True)
class _Variant:
    """One pattern's backward: ``(*saved, *tangents at fed) -> gradients``; None where all are None."""

    backward: Callable[..., Any] | None
    fed: tuple[int, ...]


@dataclasses.dataclass
class AbsentTangentBackwards:
    """A region's backward for calls where some tangents are absent, one per pattern of absent tangents.

    Attributes:
        graph: the backward graph the compiled backward was compiled from, ``(*saved, *tangents) ->
            (*gradients)`` (after the saved values' placeholders got the compiled forward's strides);
            None where it is not at hand (see `graph_source`).
        num_saved: how many of its inputs are saved values.
        compile: compiles a backward graph as the region's backward was (the backward compiler).
        num_grads: how many gradients the backward returns.
        graph_source: makes the backward graph on first need where `graph` is None (a region restored
            from a plan), given the region's inputs (None where not kept), the saved values and the
            tangents' metadata; it returns None where it cannot (then zeros are given for the absent
            tangents, logged), and is None where no graph can be had at all.
    """

    graph: torch.fx.GraphModule | None
    num_saved: int
    compile: Callable[[torch.fx.GraphModule], Callable[..., Any]]
    num_grads: int
    graph_source: Callable[
        [Sequence[Any] | None, Sequence[Any], Sequence[TangentMeta]], torch.fx.GraphModule | None
    ] | None = None
    variants: dict[tuple[bool, ...], _Variant] = dataclasses.field(default_factory=dict, repr=False)

    def run(
        self,
        args: list[Any],
        tangents: Sequence[torch.Tensor | None],
        metas: Sequence[TangentMeta],
        fallback: Callable[..., Any],
        region_inputs: Sequence[Any] | None = None,
    ) -> list[Any]:
        """The gradients (None where zero) for saved values `args` and `tangents` (None where absent).

        Args:
            args: the saved values (a boxed backward may empty the list).
            tangents: one per differentiable output, None for an output that got no gradient.
            metas: per differentiable output, what a zero tangent is made of.
            fallback: the region's compiled backward, taking every tangent (zeros where absent) when
                no backward graph can be had.
            region_inputs: the region's inputs (where kept), for `graph_source`.
        """
        absent = tuple(t is None for t in tangents)
        variant = self.variants.get(absent)
        if variant is None:
            variant = self.variants[absent] = self._variant(absent, fallback, region_inputs, args, metas)
        if variant.backward is None:
            return [None] * self.num_grads
        for index in variant.fed:
            tangent = tangents[index]
            if tangent is None:
                shape, dtype, device = metas[index]
                args.append(torch.zeros(shape, dtype=dtype, device=device))
            else:
                args.append(tangent.contiguous())
        return list(call_boxed(variant.backward, args))

    def _variant(
        self,
        absent: tuple[bool, ...],
        fallback: Callable[..., Any],
        region_inputs: Sequence[Any] | None,
        saved: Sequence[Any],
        metas: Sequence[TangentMeta],
    ) -> _Variant:
        graph = self.graph
        if graph is None and self.graph_source is not None:
            graph = self.graph = self.graph_source(region_inputs, saved, metas)
            self.num_saved = len(saved)
            if graph is not None or region_inputs is not None:
                self.graph_source = None  # traced once, whatever came of it (a later call may keep its inputs)
        if graph is None:
            return _zero_filled(fallback, absent, "their backward graph is not at hand: a region loaded from a saved plan")
        try:
            derived = without_absent_tangents(graph, self.num_saved, absent)
        except Exception as error:  # a bug of the derivation: the general backward still runs
            return _zero_filled(fallback, absent, f"deriving its backward failed: {type(error).__name__}: {error}")
        if derived.gm is None:
            return _Variant(None, ())
        return _Variant(self.compile(derived.gm), derived.fed_tangents)


def _zero_filled(backward: Callable[..., Any], absent: tuple[bool, ...], why: str) -> _Variant:
    """The general backward given zeros for the absent tangents (logged: `why` no variant was derived)."""
    log.warning(
        "aotgrad: a compiled backward gets zeros for the outputs the loss did not reach (%s); its gradients may "
        "differ from eager's where it multiplies them by infinite saved values",
        why,
    )
    return _Variant(backward, tuple(range(len(absent))))
