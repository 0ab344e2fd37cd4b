"""The lean launch path: variants, direct launches, sharing identical kernels, parallel precompiling."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend, TritonConfig
from codegen_triton.runtime.fast_launch import make_variant


def test_variant_types_and_alignment() -> None:
    base = torch.randn(64)
    variant = make_variant([base, base[1:], torch.bfloat16, 7, 2**40], (128,), 4, 1)
    assert variant is not None
    assert variant.types == ("*fp32", "*fp32", "*bf16", "i32", "i64")
    # A view starting 4 bytes into its storage is not 16-byte aligned; a dtype stands for an aligned tensor.
    assert variant.aligned == (0, 2)
    assert variant.blocks == (128,)
    assert make_variant([base, 1.5], (128,), 4, 1) is None


def _two_identical_chains(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.sin(x) * 2 + 1, torch.sin(y) * 2 + 1


def test_identical_kernels_share_one_compiled_call(cpu_backend: TritonBackend) -> None:
    # Over 1024 elements each, so that the scheduler does not fuse the two chains side by side.
    x, y = torch.randn(33, 47), torch.randn(33, 47)
    gm = make_fx(_two_identical_chains)(x, y)
    compiled = inductor_ir.compile_graph(gm, [x, y], backends={"cpu": cpu_backend})
    assert len(compiled.sources) == 2
    calls = cpu_backend.compile(compiled.sources)
    assert calls[0] is calls[1]
    x, y = torch.randn(33, 47), torch.randn(33, 47)
    for got, want in zip(compiled(x, y), _two_identical_chains(x, y)):
        torch.testing.assert_close(got, want)


def _mixed(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = torch.relu(x @ w)
    return torch.softmax(h, -1), (h * 3).sum(0)


@pytest.mark.gpu
def test_direct_launch_matches_eager(kiln_cache: Path) -> None:
    backend = TritonBackend(config=TritonConfig(cache_dir=kiln_cache, compile_workers=4))
    x, w = torch.randn(300, 64, device="cuda"), torch.randn(64, 500, device="cuda")
    gm = make_fx(_mixed)(x, w)
    compiled = inductor_ir.compile_graph(gm, [x, w], backends={"cuda": backend})
    for _ in range(2):
        x, w = torch.randn(300, 64, device="cuda"), torch.randn(64, 500, device="cuda")
        for got, want in zip(compiled(x, w), _mixed(x, w)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    launchers = [call.launcher for call in backend._calls.values()]
    assert launchers and all(p.fast is not None for launcher in launchers for p in launcher._prepared.values())
    # Kernels with static sizes are then launched straight through Triton's launcher (on a host with
    # several GPUs too: each direct launch checks that its GPU is current).
    assert all(call._direct is not None for call in backend._calls.values() if call.finisher is None)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_direct_launch_on_the_second_gpu_while_the_first_is_current(kiln_cache: Path) -> None:
    backend = TritonBackend(config=TritonConfig(cache_dir=kiln_cache))
    x, w = torch.randn(300, 64, device="cuda:1"), torch.randn(64, 500, device="cuda:1")
    gm = make_fx(_mixed)(x, w)
    compiled = inductor_ir.compile_graph(gm, [x, w], backends={"cuda": backend})
    for current in (1, 0, 1, 0):  # each kernel's direct record is made on the first call
        with torch.cuda.device(current):
            x, w = torch.randn(300, 64, device="cuda:1"), torch.randn(64, 500, device="cuda:1")
            for got, want in zip(compiled(x, w), _mixed(x, w)):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert all(call._direct is not None for call in backend._calls.values() if call.finisher is None)


@pytest.mark.gpu
def test_misaligned_input_takes_the_checked_path(kiln_cache: Path) -> None:
    backend = TritonBackend(config=TritonConfig(cache_dir=kiln_cache))
    base = torch.randn(1025, device="cuda")
    gm = make_fx(lambda t: torch.cos(t) + 1)(base[1:])
    compiled = inductor_ir.compile_graph(gm, [base[1:]], backends={"cuda": backend})
    aligned = torch.randn(1024, device="cuda")
    torch.testing.assert_close(compiled(aligned), torch.cos(aligned) + 1)
    misaligned = torch.randn(1025, device="cuda")[1:]
    torch.testing.assert_close(compiled(misaligned), torch.cos(misaligned) + 1)


def _conv_net(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = torch.relu(torch.nn.functional.conv2d(x, w1, padding=1) * 2 + 1)
    z = torch.nn.functional.conv2d(y, w2, padding=1, groups=2)
    return torch.relu(z + y).mean((2, 3)) + bias, z


def _conv_net_inputs() -> list[torch.Tensor]:
    shapes = [(4, 8, 12, 12), (8, 8, 3, 3), (8, 4, 3, 3), (8,)]
    return [torch.randn(*shape, device="cuda") for shape in shapes]


def _compiled_conv_net(kiln_cache: Path, monkeypatch: pytest.MonkeyPatch) -> inductor_ir.CompiledGraph:
    """`_conv_net` compiled channels-last for CUDA (cuDNN without TF32, so it matches eager closely)."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    backend = TritonBackend(config=TritonConfig(cache_dir=kiln_cache))
    example = _conv_net_inputs()
    config = inductor_ir.InductorIRConfig(layout_optimization=True, check_ir=True)
    return inductor_ir.compile_graph(make_fx(_conv_net)(*example), example, backends={"cuda": backend}, config=config)


@pytest.mark.gpu
def test_channels_last_conv_graph_matches_eager(kiln_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _compiled_conv_net(kiln_cache, monkeypatch)
    assert any(s == (1152, 1, 96, 8) for b in compiled.program.buffers for s in [tuple(map(int, b.layout.stride))])
    fresh = _conv_net_inputs()
    got, want = compiled(*fresh), _conv_net(*fresh)
    for g, w in zip(got, want):
        assert g.stride() == w.stride()
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_channels_last_conv_weights_are_copied_by_the_graph(kiln_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A 3x3 weight stored NCHW beside a channels-last image: cuDNN would copy it with ATen on every
    # call; the graph copies it in a generated kernel instead (a 1x1 or depthwise weight needs none).
    compiled = _compiled_conv_net(kiln_cache, monkeypatch)
    convolutions = [
        b for b in compiled.program.buffers
        if isinstance(b, inductor_ir.ExternKernel) and b.op is torch.ops.aten.convolution.default
    ]
    assert len(convolutions) == 2
    for conv in convolutions:
        weight = conv.args[1]
        assert isinstance(weight, inductor_ir.ComputedBuffer) and int(weight.layout.stride[1]) == 1
    fresh = _conv_net_inputs()
    for _ in range(2):
        for g, w in zip(compiled(*fresh), _conv_net(*fresh)):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        fresh[1].mul_(-1.5)  # a weight changed in place between calls is copied again


def _project(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor]:
    return (a @ b,)


def test_a_kernel_over_no_elements_is_not_launched(cpu_backend: TritonBackend) -> None:
    # fuzz 6b516af374: one program was launched over an empty expanded input, and the interpreter
    # crashed reading it
    a, b = torch.randn(0, 1031, 1, 1).expand(0, 1031, 37, 1), torch.randn(1, 1)
    compiled = inductor_ir.compile_graph(make_fx(_project)(a, b), [a, b], backends={"cpu": cpu_backend})
    (got,) = compiled(a, b)
    assert got.shape == (0, 1031, 37, 1)


_POINTWISE = '''
import triton
import triton.language as tl


@triton.jit
def kernel(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr0 + xindex, tl.load(in_ptr0 + xindex, xmask) * 2, xmask)
'''


class _Compiled:
    """What the binary index reads of a compiled kernel."""

    def __init__(self, triton_hash: str) -> None:
        self.hash = triton_hash


def test_a_kernel_tuned_before_precompiles_only_its_winner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from codegen_triton.runtime import launcher as launcher_module
    from codegen_triton.runtime.autotune import LaunchConfig
    from codegen_triton.runtime.launcher import KernelSpec, TritonLauncher

    monkeypatch.setattr(launcher_module, "_device_name", lambda device: "Test GPU")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    choices = [LaunchConfig({"XBLOCK": block}, warps) for block, warps in ((256, 2), (1024, 4), (2048, 8))]
    monkeypatch.setattr(launcher_module, "candidate_configs", lambda *args, **kwargs: list(choices))
    spec = KernelSpec("kernel", _POINTWISE, "pointwise", ("in_ptr0", "out_ptr0", "xnumel"))
    example = [torch.float32, torch.float32, 100_000]
    fresh = TritonLauncher(spec, tmp_path)
    candidates = fresh.precompile_jobs(example)
    assert len(candidates) == 3  # not tuned yet: every candidate is compiled ahead
    winner = choices[1]
    bucket = (launcher_module.next_power_of_2(100_000), 1, 1)
    tuned = TritonLauncher(spec, tmp_path, tuned={("Test GPU", bucket): winner})
    (job,) = tuned.precompile_jobs(example)
    assert job.variant.blocks == tuned.block_values(winner) and job.variant.num_warps == winner.num_warps
    other_gpu = TritonLauncher(spec, tmp_path, tuned={("Another GPU", bucket): winner})
    assert len(other_gpu.precompile_jobs(example)) == len(candidates)


def test_a_variant_compiled_before_is_not_sent_to_the_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A warm start: a variant some launch compiled before is in Triton's disk cache and loads in
    # milliseconds in the launching process; sending it to a worker would make the launch wait.
    from codegen_triton.runtime import launcher as launcher_module
    from codegen_triton.runtime.autotune import LaunchConfig
    from codegen_triton.runtime.launcher import KernelSpec, TritonLauncher

    gpu = {"name": "Test GPU"}
    monkeypatch.setattr(launcher_module, "_device_name", lambda device: gpu["name"])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    choices = [LaunchConfig({"XBLOCK": block}, warps) for block, warps in ((256, 2), (1024, 4))]
    monkeypatch.setattr(launcher_module, "candidate_configs", lambda *args, **kwargs: list(choices))
    spec = KernelSpec("kernel", _POINTWISE, "pointwise", ("in_ptr0", "out_ptr0", "xnumel"))
    example = [torch.float32, torch.float32, 100_000]
    first = TritonLauncher(spec, tmp_path)
    jobs = first.precompile_jobs(example)
    assert len(jobs) == 2
    first._binaries().record(jobs[0].variant, _Compiled("ab" * 32))  # what a successful launch records
    (left,) = TritonLauncher(spec, tmp_path).precompile_jobs(example)
    assert left.variant == jobs[1].variant
    gpu["name"] = "Another GPU"  # compiled for another GPU: still compiled ahead
    assert len(TritonLauncher(spec, tmp_path).precompile_jobs(example)) == 2
