"""Running a workload for one task, the same way for eager and compiled callables.

Inference is a forward pass under `torch.no_grad()`. Training is an optimizer-free step: zero the
gradients, forward, a scalar loss, backward. The loss is the sum of each output times a fixed random
cotangent (so every output element gets a different, non-uniform gradient; a plain `sum()` would
give softmax and normalization layers an all-zero or uniform gradient that hides errors). A captured
result holds the outputs, and for training the loss, every parameter's and input's gradient and the
updated floating-point buffers (BatchNorm running statistics).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tools.bench.accuracy import PERTURBATION, Result, flatten_tensors
from tools.bench.registry import Workload

Inputs = tuple[Any, ...]


def check_inputs_random(inputs: Inputs) -> None:
    """Raise if a tensor input is constant (all zeros, or all one value): measurements need real data."""
    for index, tensor in enumerate(x for x in inputs if isinstance(x, torch.Tensor)):
        if tensor.numel() > 1 and bool((tensor == tensor.reshape(-1)[0]).all()):
            raise ValueError(f"input {index} is constant; benchmark inputs must be random")


class TaskRunner:
    """Runs one workload's task ("inference" or "training") through any callable.

    `cotangents` are drawn on first use from the shapes of eager's outputs and reused for every
    later call, eager or compiled, so both compute the same loss.
    """

    def __init__(self, workload: Workload, task: str, device: str, seed: int) -> None:
        self.workload = workload
        self.task = task
        self.device = device
        self.seed = seed
        self.cotangents: list[torch.Tensor] | None = None
        self.before_call: Callable[[], None] | None = None

    def prepare(self, model: torch.nn.Module, inputs: Inputs) -> Inputs:
        """Set the model's mode for the task; make float inputs gradient leaves where the workload asks."""
        model.train(self.task == "training")
        if self.task != "training" or not self.workload.inputs_require_grad:
            return inputs
        return tuple(
            x.detach().requires_grad_(True) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
        )

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.workload.autocast is not None and self.device == "cuda":
            return torch.autocast("cuda", dtype=self.workload.autocast)
        return contextlib.nullcontext()

    def _float_outputs(self, outputs: Any) -> list[torch.Tensor]:
        return [t for _, t in flatten_tensors(outputs) if t.is_floating_point()]

    def _loss(self, outputs: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        floats = self._float_outputs(outputs)
        if self.cotangents is None:
            generator = torch.Generator().manual_seed(self.seed + 7919)
            self.cotangents = [torch.randn(t.shape, generator=generator).to(t.device) for t in floats]
        if [t.shape for t in floats] != [c.shape for c in self.cotangents]:
            shapes = [tuple(t.shape) for t in floats]
            raise ValueError(f"output shapes {shapes} differ from eager's {[tuple(c.shape) for c in self.cotangents]}")
        return sum(((t.to(dtype) * c.to(dtype)).sum() for t, c in zip(floats, self.cotangents)), torch.zeros((), dtype=dtype, device=floats[0].device))

    def step(self, fn: Callable[..., Any], model: torch.nn.Module, inputs: Inputs, dtype: torch.dtype = torch.float32) -> Any:
        """One inference call or training step of `fn` (which computes `model`); returns (outputs, loss)."""
        if self.before_call is not None and fn is not model:
            self.before_call()
        if self.task == "inference":
            with torch.no_grad(), self._autocast():
                return fn(*inputs), None
        model.zero_grad(set_to_none=True)
        for x in inputs:
            if isinstance(x, torch.Tensor):
                x.grad = None
        with self._autocast():
            outputs = fn(*inputs)
        loss = self._loss(outputs, dtype)
        loss.backward()
        return outputs, loss

    def result(self, fn: Callable[..., Any], model: torch.nn.Module, inputs: Inputs, dtype: torch.dtype = torch.float32) -> Result:
        """One step, captured: cloned outputs, and for training the gradients and float buffers.

        The loss itself is not compared: it is a random projection of the outputs (compared tensor by
        tensor), and as one scalar sum of terms of both signs it is ill-conditioned: its relative error
        swings with how much the terms cancel (GPT-2 under bf16 autocast on the H200: eager's own loss
        was 3.5e-2 from float64, over the 3e-2 tolerance).
        """
        outputs, loss = self.step(fn, model, inputs, dtype)
        captured: Result = {name: t.detach().clone() for name, t in flatten_tensors(outputs)}
        if loss is None:
            return captured
        for name, tensor in self._gradient_sources(model, inputs):
            captured[name] = tensor.detach().clone()
        return captured

    def _gradient_sources(self, model: torch.nn.Module, inputs: Inputs) -> Iterator[tuple[str, torch.Tensor]]:
        # A parameter the loss does not reach (BERT's pooler) has no gradient: it is left out, and a
        # result that has a gradient where eager has none (or the reverse) fails as a different result.
        for name, parameter in model.named_parameters():
            if parameter.grad is not None:
                yield f"grad.{name}", parameter.grad
        for index, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.grad is not None:
                yield f"input_grad.{index}", x.grad
        for name, buffer in model.named_buffers():
            if buffer.is_floating_point():
                yield f"buffer.{name}", buffer

    def fp64_result(
        self, model: torch.nn.Module, state: dict[str, torch.Tensor], inputs: Inputs, perturb_seed: int | None = None
    ) -> Result:
        """The same step on a float64 copy of `model` in `state`, without autocast: the precise reference.

        With `perturb_seed`, every float input, parameter and buffer is first multiplied by
        `1 + PERTURBATION * noise` (standard normal noise from that seed): how far the reference moves
        under rounding-sized changes (see `accuracy.verdict`).
        """
        reference = copy.deepcopy(model)
        reference.load_state_dict(state)
        reference.double()
        generator = torch.Generator().manual_seed(perturb_seed) if perturb_seed is not None else None
        inputs64 = tuple(
            _perturbed(x.detach().double(), generator).requires_grad_(x.requires_grad)
            if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in inputs
        )
        if generator is not None:
            with torch.no_grad():
                for tensor in [*reference.parameters(), *reference.buffers()]:
                    if tensor.is_floating_point():
                        tensor.copy_(_perturbed(tensor, generator))
        saved, self.workload.autocast = self.workload.autocast, None
        try:
            return self.result(reference, reference, self.prepare(reference, inputs64), torch.float64)
        finally:
            self.workload.autocast = saved


def _perturbed(tensor: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    if generator is None:
        return tensor
    noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float64).to(tensor.device)
    return tensor * (1 + PERTURBATION * noise)


def snapshot_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of the model's parameters and buffers."""
    return {name: t.detach().clone() for name, t in model.state_dict().items()}
