"""The processes of the distributed tests: each function runs in one of two gloo ranks on the CPU.

`test_distributed.py` starts them with `torch.multiprocessing.spawn`, which imports this module
in each child (its folder is on the parent's ``sys.path``). A failed check raises in the child;
spawn re-raises it in the test with the child's traceback. Results the test checks as well are
written as JSON to ``<out>/rank<r>.json``.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2
MIB = 1024 * 1024
PLANS = {8192: 3, 12288: 2}
"""Bucket capacity (bytes) -> subgraphs of `make_model`. Walking back from the output, a bucket closes once it
holds its capacity (a 32x32 linear layer with its bias is 4224 bytes, the last 1056, the first 2176):
8192 gives {l6, l5, l4}, {l3, l2}, {l1}; 12288 gives {l6, l5, l4, l3}, {l2, l1}."""


def free_port() -> int:
    """A TCP port nothing listens on now (for the rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(fn: Callable[..., None], *args: Any) -> None:
    """Run ``fn(rank, port, *args)`` in WORLD processes; a failure in any raises here."""
    mp.spawn(fn, args=(free_port(), *args), nprocs=WORLD, join=True)


def _init(rank: int, port: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)  # two ranks share the test machine's cores
    # A rank that fails leaves the other waiting in a collective: give up after a minute, not 30.
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=120))


def make_model() -> nn.Module:
    """Six linear layers (16 -> 32, four 32 -> 32, 32 -> 8) with ReLUs, seeded."""
    torch.manual_seed(0)
    sizes = [16, 32, 32, 32, 32, 32, 8]
    layers: list[nn.Module] = []
    for i in range(6):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < 5:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _record_allreduces(ddp: DDP, events: list[str]) -> None:
    """A comm hook noting ``allreduce <bucket>`` as DDP launches each bucket's all-reduce."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def hook(state, bucket):  # type: ignore[no-untyped-def]  (DDP checks real annotations; these would be strings)
        events.append(f"allreduce {bucket.index()}")
        return allreduce_hook(None, bucket)  # type: ignore[arg-type]

    ddp.register_comm_hook(None, hook)


def _recording(name: str, events: list[str]) -> Callable[..., Any]:
    """Backend `name`, noting ``backward <k>`` when the gradient reaches the outputs of the k-th graph compiled."""
    from frontend.backends.registry import lookup_backend

    inner = lookup_backend(name)
    compiled_count = [0]

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any], context: Any) -> Callable[..., Any]:
        compiled = inner(gm, example_inputs, context)
        index = compiled_count[0]
        compiled_count[0] += 1

        def run(*args: Any) -> Any:
            outputs = compiled(*args)
            for value in outputs:
                if isinstance(value, torch.Tensor) and value.requires_grad:
                    value.register_hook(lambda grad: events.append(f"backward {index}"))
            return outputs

        return run

    return backend


def _train_side_by_side(rank: int, model: nn.Module, kiln: nn.Module, compiled: Any, eager: nn.Module,
                        params: Callable[[nn.Module], list[tuple[str, torch.Tensor]]],
                        full: Callable[[torch.Tensor], torch.Tensor], events: list[str] | None = None) -> None:
    """3 SGD steps (momentum) of eager and compiled on this rank's batches; gradients and parameters equal."""
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (eager, kiln)]
    generator = torch.Generator().manual_seed(100 + rank)  # each rank its own batch
    for step in range(3):
        x = torch.randn(8, 16, generator=generator)
        target = torch.randn(8, 8, generator=generator)
        if events is not None:
            events.clear()
        for net, optimizer in zip((eager, compiled), optimizers, strict=True):
            optimizer.zero_grad(set_to_none=True)
            F.mse_loss(net(x), target).backward()
        for (name, a), (_, b) in zip(params(eager), params(kiln), strict=True):
            assert b.grad is not None, f"step {step}: {name} has no gradient"
            torch.testing.assert_close(full(b.grad), full(a.grad), rtol=1e-5, atol=1e-6,
                                       msg=lambda m, n=name, s=step: f"step {s}, gradient of {n}: {m}")
        for optimizer in optimizers:
            optimizer.step()
    for (name, a), (_, b) in zip(params(eager), params(kiln), strict=True):
        torch.testing.assert_close(full(b), full(a), rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"parameter {n}: {m}")


def ddp_run(rank: int, backend: str, cap_bytes: int, options: dict[str, Any]) -> dict[str, Any]:
    """Eager DDP against compiled DDP on this rank; what the test checks besides equal gradients and parameters.

    Gradients after each of 3 SGD steps and the final parameters must equal eager DDP's, and the
    parameters must be equal across ranks (else this raises).
    """
    import frontend

    model = make_model()
    eager = DDP(copy.deepcopy(model), bucket_cap_mb=cap_bytes / MIB)
    kiln = DDP(copy.deepcopy(model), bucket_cap_mb=cap_bytes / MIB)
    events: list[str] = []
    _record_allreduces(kiln, events)
    compiled = frontend.compile(kiln, backend=_recording(backend, events), options=options)
    _train_side_by_side(rank, model, kiln, compiled, eager, lambda m: list(m.module.named_parameters()),
                        lambda t: t, events)
    # Parameters agree across ranks too: gradients were all-reduced, not only computed locally.
    flat = torch.cat([p.detach().reshape(-1) for p in kiln.module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    for other in gathered[1:]:
        torch.testing.assert_close(other, gathered[0], rtol=0, atol=0)
    return {"graphs_compiled": compiled.kiln_context.graphs_compiled, "events": list(events)}


def _bad_bucket_cap() -> str:
    """A DDP module with bucket_cap_mb=-1: frontend.compile raises; with optimize_ddp off it compiles."""
    import frontend
    from frontend.distributed import InvalidBucketCapError

    ddp = DDP(make_model(), bucket_cap_mb=-1)
    try:
        frontend.compile(ddp, backend="aot_eager")
    except InvalidBucketCapError as error:
        message = str(error)
    else:
        raise AssertionError("compiling a DDP module with bucket_cap_mb=-1 did not raise")
    compiled = frontend.compile(ddp, backend="aot_eager", options={"optimize_ddp": False})
    compiled(torch.randn(4, 16)).sum().backward()
    return message


def _fsdp2_run(rank: int, per_layer: bool) -> dict[str, Any]:
    """fully_shard (FSDP2) on the root, or on each linear layer and the root: eager against compiled."""
    from torch.distributed.fsdp import fully_shard

    import frontend

    def build() -> nn.Module:
        model = make_model()
        if per_layer:
            for layer in model:
                if isinstance(layer, nn.Linear):
                    fully_shard(layer)
        fully_shard(model)
        return model

    eager, kiln = build(), build()
    compiled = frontend.compile(kiln, backend="aot_eager")
    _train_side_by_side(rank, kiln, kiln, compiled, eager, lambda m: list(m.named_parameters()),
                        lambda t: t.full_tensor())
    context = compiled.kiln_context
    return {"graphs_compiled": context.graphs_compiled, "graph_breaks": context.graph_breaks}


def run_scenarios(rank: int, port: int, out: str) -> None:
    """Every distributed scenario of the tests, in one pair of processes (starting them costs most)."""
    import frontend

    frontend.config.cache_dir = Path(out, f"cache{rank}")  # cold, as on a fresh machine
    _init(rank, port)
    try:
        scenarios: dict[str, Callable[[], Any]] = {
            "split": lambda: ddp_run(rank, "aot_eager", 8192, {}),
            "whole": lambda: ddp_run(rank, "aot_eager", 8192, {"optimize_ddp": False}),
            "bad_cap_message": _bad_bucket_cap,
            "fsdp2_root": lambda: _fsdp2_run(rank, per_layer=False),
            "fsdp2_per_layer": lambda: _fsdp2_run(rank, per_layer=True),
        }
        results: dict[str, Any] = {"seconds": {}}
        for name, scenario in scenarios.items():
            started = time.perf_counter()
            results[name] = scenario()
            results["seconds"][name] = round(time.perf_counter() - started, 2)
        Path(out, f"rank{rank}.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()
