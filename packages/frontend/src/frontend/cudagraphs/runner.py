"""Replaying a compiled graph as CUDA graphs: one recording per input signature.

How a call is served:
1. The first call with a new signature (shapes, strides, dtypes, devices) runs the graph normally
   (a warm-up: lazy kernel compilation and allocator growth happen outside any recording) and notes
   each input's address.
2. The second call records a CUDA graph. Inputs whose address did not change since the warm-up
   (parameters, buffers) are read in place; the others are copied into static input buffers.
3. Later calls copy the changing inputs into the static buffers and replay. An input read in place
   whose address changed makes that position a copied one and triggers a new recording.

Outputs are copied out of the graph's static output buffers on every replay, so a caller may keep
them across calls: a later replay never overwrites a tensor the caller holds. With
``cudagraph_copy_outputs=False`` they are the graph's own buffers instead (no copies), and using one
after a later replay raises `CudaGraphOutputOverwrittenError` naming the fix (see
`frontend.cudagraphs.outputs`). If recording fails
(a graph that synchronizes with the CPU, an op not allowed during capture), the graph runs without
replay from then on, and the reason is logged under the ``fallbacks`` event.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from frontend.context import CompileContext
from frontend.cudagraphs.outputs import ReplayCounter, guard_outputs
from frontend.errors import describe_error

Signature = tuple[Any, ...]


def _signature(args: Sequence[Any]) -> Signature:
    parts: list[Any] = [torch.is_grad_enabled()]
    for arg in args:
        if isinstance(arg, torch.Tensor):
            parts.append((tuple(arg.shape), arg.stride(), arg.dtype, arg.device, arg.storage_offset()))
        else:
            parts.append(("value", arg))
    return tuple(parts)


def _copy_out(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_out(v) for v in value)
    return value


class GraphRecorder(Protocol):
    """Records a callable once and replays it: CUDA graphs in production, a simulation in tests."""

    def handles(self, tensors: Sequence[torch.Tensor]) -> bool:
        """Whether calls with these tensor inputs can be recorded."""
        ...

    def record(self, run: Callable[..., Any], static_inputs: list[Any]) -> tuple[Callable[[], None], Any]:
        """Record ``run(*static_inputs)``; return (replay, outputs), replay rewriting outputs in place."""
        ...


class CudaGraphRecorder:
    """Records with `torch.cuda.CUDAGraph` after one warm-up run on a side stream."""

    def handles(self, tensors: Sequence[torch.Tensor]) -> bool:
        """All inputs on CUDA, and not already inside someone else's stream capture."""
        return all(t.is_cuda for t in tensors) and not torch.cuda.is_current_stream_capturing()

    def record(self, run: Callable[..., Any], static_inputs: list[Any]) -> tuple[Callable[[], None], Any]:
        """Warm up on a side stream (lazy initialization stays out of the graph), then capture."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            run(*static_inputs)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = run(*static_inputs)
        return graph.replay, outputs


@dataclass
class _Recording:
    """One recorded graph, its static inputs and outputs."""

    replay_graph: Callable[[], None]
    static_inputs: list[Any]
    in_place: frozenset[int]
    addresses: dict[int, int]
    outputs: Any
    counter: ReplayCounter
    copy_outputs: bool = True

    def replay(self, args: Sequence[Any]) -> Any:
        for index, arg in enumerate(args):
            if index not in self.in_place and isinstance(arg, torch.Tensor):
                self.static_inputs[index].copy_(arg)
        self.replay_graph()
        self.counter.replays += 1
        if self.copy_outputs:
            return _copy_out(self.outputs)
        return guard_outputs(self.outputs, self.counter)


@dataclass
class _SignatureState:
    warm_addresses: dict[int, int] | None = None
    recordings: list[_Recording] = field(default_factory=list)


class CudaGraphRunner:
    """Calls `run` through CUDA graph replay when every tensor input is on a CUDA device."""

    def __init__(
        self,
        run: Callable[..., Any],
        context: CompileContext,
        which: str = "graph",
        recorder: GraphRecorder | None = None,
    ) -> None:
        self._run = run
        self._recorder: GraphRecorder = recorder or CudaGraphRecorder()
        self._context = context
        self._which = which
        self._states: dict[Signature, _SignatureState] = {}
        self._copied_positions: set[int] = set()
        self._disabled_reason: str | None = None
        self.recordings_made = 0
        self.replays = 0

    def __call__(self, *args: Any) -> Any:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if self._disabled_reason is not None or not tensors or not self._recorder.handles(tensors):
            return self._run(*args)
        key = _signature(args)
        state = self._states.get(key)
        if state is None:
            if len(self._states) >= self._context.config.cudagraph_max_shapes:
                return self._run(*args)
            state = self._states[key] = _SignatureState()
        if state.warm_addresses is None:
            state.warm_addresses = self._addresses(args)
            return self._run(*args)
        recording = self._matching_recording(state, args)
        if recording is None:
            recording = self._record(state, args)
            if recording is None:
                return self._run(*args)
        self.replays += 1
        return recording.replay(args)

    @staticmethod
    def _addresses(args: Sequence[Any]) -> dict[int, int]:
        return {i: a.data_ptr() for i, a in enumerate(args) if isinstance(a, torch.Tensor)}

    def _matching_recording(self, state: _SignatureState, args: Sequence[Any]) -> _Recording | None:
        for recording in state.recordings:
            if all(args[i].data_ptr() == address for i, address in recording.addresses.items()):
                return recording
        if state.recordings:
            # An input read in place moved: copy it from now on.
            for recording in state.recordings:
                self._copied_positions |= {
                    i for i, address in recording.addresses.items() if args[i].data_ptr() != address
                }
            state.recordings.clear()
        return None

    def _record(self, state: _SignatureState, args: Sequence[Any]) -> _Recording | None:
        assert state.warm_addresses is not None
        current = self._addresses(args)
        in_place = frozenset(
            i for i, address in current.items()
            if state.warm_addresses.get(i) == address and i not in self._copied_positions
        )
        static_inputs = [
            arg if (i in in_place or not isinstance(arg, torch.Tensor)) else _static_copy(arg)
            for i, arg in enumerate(args)
        ]
        try:
            with self._context.stage("cudagraphs"):
                replay_graph, outputs = self._recorder.record(self._run, static_inputs)
        except Exception as error:
            self._disabled_reason = describe_error(error)
            self._context.events.emit(
                "fallbacks",
                f"{self._context.label}: the {self._which} graph runs without CUDA graph replay: "
                f"recording failed ({self._disabled_reason})",
            )
            return None
        recording = _Recording(
            replay_graph,
            static_inputs,
            in_place,
            {i: current[i] for i in in_place},
            outputs,
            ReplayCounter(f"{self._which} graph of {self._context.label}"),
            self._context.config.cudagraph_copy_outputs,
        )
        state.recordings.append(recording)
        self.recordings_made += 1
        return recording


def _static_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A buffer with `tensor`'s size, strides and contents that the CUDA graph reads from."""
    buffer = torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype, device=tensor.device)
    with torch.no_grad():
        buffer.copy_(tensor)
    return buffer
