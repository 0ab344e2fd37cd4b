"""Compiling under torch.distributed: DDP graphs cut at gradient buckets, FSDP2 modules (CPU, gloo).

The unit tests plan and split captured graphs in this process; one trains compiled DDP (C++
kernels) against eager DDP in a gloo group of this process alone. The others run every scenario of
`distributed_workers.run_scenarios` once, in two gloo processes on the CPU (starting them is most
of the cost), and check what each rank reported; gradients and parameters are compared with eager
DDP inside the workers, after each of 3 SGD steps.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

import frontend
from frontend.distributed import (
    BucketCaps,
    BucketedGraph,
    BucketSplittingBackend,
    InvalidBucketCapError,
    plan_buckets,
    split_graph,
    subgraph_example_inputs,
)
from frontend.errors import InvalidOptionError

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
import distributed_workers as workers  # noqa: E402  (a helper beside this file, also imported by the processes)

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built")


def _captured(model: nn.Module, x: torch.Tensor) -> tuple[torch.fx.GraphModule, list[Any]]:
    """The graph capture gives a backend for `model(x)`, and its example inputs."""
    graphs: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    frontend.compile(model, backend=keep)(x)
    assert len(graphs) == 1
    return graphs[0]


def _names(model: nn.Module) -> dict[int, str]:
    return {id(p): name for name, p in model.named_parameters()}


@pytest.mark.parametrize("cap_bytes", sorted(workers.PLANS))
def test_plan_closes_buckets_at_their_capacity_walking_back_from_the_output(fresh_cache: None, cap_bytes: int) -> None:
    model = workers.make_model()
    gm, inputs = _captured(model, torch.randn(4, 16))
    plan = plan_buckets(gm, inputs, BucketCaps(first=cap_bytes, rest=cap_bytes), _names(model))
    assert len(plan) == workers.PLANS[cap_bytes]
    # The last bucket in graph order is DDP's bucket 0: the output layer's parameters come first.
    assert plan.buckets[-1].parameters[:2] == ("10.weight", "10.bias")
    assert plan.buckets[0].parameters[-2:] == ("0.weight", "0.bias")
    assert sum(b.nbytes for b in plan.buckets) == sum(p.numel() * 4 for p in model.parameters())
    every = [name for bucket in plan.buckets for name in bucket.nodes]
    assert every == [n.name for n in gm.graph.nodes if n.op in ("call_module", "call_function", "call_method")]


def test_plan_first_bucket_has_its_own_capacity(fresh_cache: None) -> None:
    model = workers.make_model()
    gm, inputs = _captured(model, torch.randn(4, 16))
    plan = plan_buckets(gm, inputs, BucketCaps(first=1024, rest=1 << 20), _names(model))
    assert [b.parameters for b in reversed(plan.buckets)] == [
        ("10.weight", "10.bias"),
        ("8.weight", "8.bias", "6.weight", "6.bias", "4.weight", "4.bias", "2.weight", "2.bias", "0.weight", "0.bias"),
    ]
    assert "bucket 0:" in plan.describe() and "bucket 1:" in plan.describe()


def test_parameters_ddp_ignores_do_not_fill_buckets(fresh_cache: None) -> None:
    model = workers.make_model()
    gm, inputs = _captured(model, torch.randn(4, 16))
    managed = {key: name for key, name in _names(model).items() if not name.startswith(("8.", "6."))}
    plan = plan_buckets(gm, inputs, BucketCaps(first=8192, rest=8192), managed)
    assert [b.parameters for b in reversed(plan.buckets)] == [
        ("10.weight", "10.bias", "4.weight", "4.bias", "2.weight", "2.bias"), ("0.weight", "0.bias")]


def test_graph_changing_grad_mode_is_not_split(fresh_cache: None) -> None:
    model = workers.make_model()

    def f(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            y = model[0](x)
        return model[2:](y)

    graphs: list[tuple[torch.fx.GraphModule, list[Any]]] = []
    frontend.compile(f, backend=lambda gm, inputs: graphs.append((gm, inputs)) or gm.forward)(torch.randn(4, 16))
    gm, inputs = graphs[0]
    plan = plan_buckets(gm, inputs, BucketCaps(first=0, rest=0), _names(model))
    assert len(plan) == 1 and "grad mode" in plan.reason


@pytest.mark.parametrize("cap_bytes", [0, 8192])
def test_split_graph_runs_like_the_graph_forward_and_backward(fresh_cache: None, cap_bytes: int) -> None:
    torch.manual_seed(1)
    model = workers.make_model()
    x = torch.randn(4, 16, requires_grad=True)
    gm, inputs = _captured(model, x)
    plan = plan_buckets(gm, inputs, BucketCaps(first=cap_bytes, rest=cap_bytes), _names(model))
    assert len(plan) == (6 if cap_bytes == 0 else 3)  # capacity 0: a bucket per layer, as DDP makes one per gradient
    subgraphs = split_graph(gm, plan)
    for subgraph in subgraphs:
        examples = subgraph_example_inputs(gm, subgraph, inputs)
        assert [e.shape for e in examples] == [n.meta["example_value"].shape for n in subgraph.inputs]
        assert all(e.requires_grad for e in examples if e is not x)  # activations of layers with parameters
    bucketed = BucketedGraph(gm, plan, subgraphs, [s.module.forward for s in subgraphs])
    (expected,) = gm(x)
    expected_grads = torch.autograd.grad(expected.sum(), [x, *model.parameters()])
    (actual,) = bucketed(x)
    actual_grads = torch.autograd.grad(actual.sum(), [x, *model.parameters()])
    torch.testing.assert_close(actual, expected)
    for a, e in zip(actual_grads, expected_grads, strict=True):
        torch.testing.assert_close(a, e)


def test_graphs_outside_ddp_are_compiled_whole(fresh_cache: None) -> None:
    calls: list[torch.fx.GraphModule] = []
    backend = BucketSplittingBackend(lambda gm, inputs: calls.append(gm) or gm.forward)
    model = workers.make_model()
    x = torch.randn(4, 16)
    torch.testing.assert_close(frontend.compile(model, backend=backend)(x), model(x))
    assert len(calls) == 1


@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, math.inf])
def test_bad_bucket_capacity_says_what_is_wrong_and_what_to_do(bad: float) -> None:
    with pytest.raises(InvalidBucketCapError, match=r"bucket_cap_mb=.*finite number of MiB >= 0.*optimize_ddp"):
        BucketCaps.from_mb(bad)


def test_optimize_ddp_is_a_typed_option() -> None:
    assert frontend.config.optimize_ddp is True
    with frontend.config.patch(optimize_ddp=False):
        assert frontend.config.snapshot().optimize_ddp is False
    with pytest.raises(InvalidOptionError, match="optimize_ddp"):
        frontend.config.with_options({"optimize_ddp": "no"})


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """What each of the two gloo ranks reported after running every distributed scenario."""
    out = tmp_path_factory.mktemp("distributed")
    workers.spawn(workers.run_scenarios, str(out))
    return [json.loads(Path(out, f"rank{rank}.json").read_text()) for rank in range(workers.WORLD)]


@pytest.fixture
def one_process_group(tmp_path: Path, fresh_cache: None) -> Iterator[None]:
    """A gloo group of this process alone (an in-process store), and a fresh cache folder."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with frontend.config.patch(cache_dir=tmp_path):
            yield
    finally:
        dist.destroy_process_group()


def test_compiled_ddp_with_kernels_trains_like_eager_ddp(one_process_group: None) -> None:
    # The inductor backend (C++ kernels) in one process: DDP's reducer, buckets and hooks run as
    # with more ranks; ddp_run checks gradients after each of 3 SGD steps and the final parameters.
    result = workers.ddp_run(0, "inductor", 12288, {})
    assert result["graphs_compiled"] == workers.PLANS[12288]
    assert result["events"] == ["backward 1", "allreduce 0", "backward 0", "allreduce 1"]


def test_compiled_ddp_trains_like_eager_ddp_one_subgraph_per_bucket(ranks: list[dict[str, Any]]) -> None:
    # Two ranks, each on its own batches: gradients after each of 3 SGD steps and the final
    # parameters equal eager DDP's (checked in each rank, which fails otherwise), and equal across ranks.
    for rank in ranks:
        assert rank["split"]["graphs_compiled"] == workers.PLANS[8192]


def test_each_bucket_is_all_reduced_before_earlier_subgraphs_run_backward(ranks: list[dict[str, Any]]) -> None:
    for rank in ranks:
        assert rank["split"]["events"] == [
            "backward 2", "allreduce 0", "backward 1", "allreduce 1", "backward 0", "allreduce 2"]


def test_optimize_ddp_off_compiles_one_graph_reduced_after_its_backward(ranks: list[dict[str, Any]]) -> None:
    for rank in ranks:
        assert rank["whole"]["graphs_compiled"] == 1
        assert rank["whole"]["events"] == ["backward 0", "allreduce 0", "allreduce 1", "allreduce 2"]


def test_negative_bucket_cap_mb_fails_at_compile(ranks: list[dict[str, Any]]) -> None:
    for rank in ranks:
        assert rank["bad_cap_message"].startswith("DistributedDataParallel(bucket_cap_mb=-1): ")
        assert "optimize_ddp" in rank["bad_cap_message"]


def test_fsdp2_modules_train_like_eager(ranks: list[dict[str, Any]]) -> None:
    # fully_shard on the root only: the whole forward is one graph (FSDP2's hooks gather the
    # parameters before it and free them after, eagerly). On each layer too: every sharded layer's
    # call is a graph break (its hooks take keyword arguments and run eagerly) and each layer's
    # forward is a graph of its own; the code between them (here the ReLUs) runs eagerly.
    for rank in ranks:
        assert rank["fsdp2_root"] == {"graphs_compiled": 1, "graph_breaks": 0}
        assert rank["fsdp2_per_layer"]["graphs_compiled"] == 6
        assert rank["fsdp2_per_layer"]["graph_breaks"] >= 1


def test_submodules_with_keyword_hooks_run_them_eagerly_around_their_own_graph(fresh_cache: None) -> None:
    # FSDP2's hooks take keyword arguments (with_kwargs=True); here a hook scales the input and one the output.
    torch.manual_seed(2)
    model = workers.make_model()
    calls: list[str] = []

    def pre(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        calls.append("pre")
        return (args[0] * 2,), kwargs

    def post(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: torch.Tensor) -> torch.Tensor:
        return output - 1

    for layer in (model[2], model[6]):
        layer.register_forward_pre_hook(pre, with_kwargs=True)
        layer.register_forward_hook(post, with_kwargs=True)
    graphs: list[torch.fx.GraphModule] = []
    compiled = frontend.compile(model, backend=lambda gm, inputs: graphs.append(gm) or gm.forward)
    x = torch.randn(4, 16)
    expected = model(x)
    assert calls == ["pre", "pre"]
    torch.testing.assert_close(compiled(x), expected)
    assert calls == ["pre"] * 4 and len(graphs) == 2  # one graph per hooked layer; the rest ran eagerly
    assert "forward" not in model[2].__dict__  # the captured forward is installed only during a call


class _Bottleneck(nn.Module):
    """A residual block as torchvision's ResNets write it: ``out += identity`` on the last layer's output."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second, self.downsample = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.second(torch.relu(self.first(x)))
        out += self.downsample(x)
        return torch.relu_(out)


def test_a_cut_never_separates_a_value_from_its_in_place_update(one_process_group: None) -> None:
    # With a bucket per layer the plan would cut between `second` and the `+=` on its output: the
    # later subgraph would update its own input in place, which aotgrad does not trace for an input
    # that requires grad (the subgraph would run eagerly). Such a cut moves instead.
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = nn.Sequential(_Bottleneck(), _Bottleneck())
    eager = DDP(copy.deepcopy(model), bucket_cap_mb=0)
    compiled_ddp = DDP(copy.deepcopy(model), bucket_cap_mb=0)
    compiled = frontend.compile(compiled_ddp, backend="aot_eager", options={"fallback_to_eager": False})
    x = torch.randn(4, 16)
    expected, actual = eager(x), compiled(x)
    torch.testing.assert_close(actual, expected)
    expected.square().sum().backward()
    actual.square().sum().backward()
    for a, e in zip(compiled_ddp.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(a.grad, e.grad)
    assert compiled.kiln_context.graphs_compiled >= 2


class _ScaledFirst(nn.Module):
    """Ops before the first parameter (their own bucket, merged into the next one), then three layers."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(torch.tanh(x * 2))


def test_ops_before_the_first_parameter_join_the_first_subgraph(fresh_cache: None) -> None:
    torch.manual_seed(0)
    model = _ScaledFirst()
    x = torch.randn(4, 16, requires_grad=True)
    gm, inputs = _captured(model, x)
    plan = plan_buckets(gm, inputs, BucketCaps(first=0, rest=0), _names(model))
    assert len(plan) == 3 and plan.buckets[0].nodes[:2] == ("mul", "tanh")
    subgraphs = split_graph(gm, plan)
    bucketed = BucketedGraph(gm, plan, subgraphs, [s.module.forward for s in subgraphs])
    (expected,) = gm(x)
    (actual,) = bucketed(x)
    torch.testing.assert_close(actual, expected)
    for a, e in zip(torch.autograd.grad(actual.sum(), [x, *model.parameters()]),
                    torch.autograd.grad(expected.sum(), [x, *model.parameters()]), strict=True):
        torch.testing.assert_close(a, e)
