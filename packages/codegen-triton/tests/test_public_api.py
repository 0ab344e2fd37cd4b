"""Pins the public symbols of `codegen_triton`: a change here is an API change."""

import codegen_triton

PUBLIC = ["RandomFallbackRequired", "TritonBackend", "TritonConfig", "TritonKernelCall", "TritonKernelSource", "__version__"]


def test_version_is_single_sourced() -> None:
    from codegen_triton._version import __version__

    assert codegen_triton.__version__ == __version__


def test_all_names_exist() -> None:
    for name in codegen_triton.__all__:
        assert hasattr(codegen_triton, name), name


def test_public_names_are_pinned() -> None:
    assert sorted(codegen_triton.__all__) == sorted(PUBLIC)


def test_backend_satisfies_the_kernel_backend_protocol() -> None:
    from inductor_ir import KernelBackend

    assert isinstance(codegen_triton.TritonBackend(), KernelBackend)
    assert codegen_triton.TritonBackend().device_type == "cuda"


def test_entry_point_names_the_backend() -> None:
    from importlib.metadata import entry_points

    points = {p.name: p.value for p in entry_points(group="kiln.kernel_backends")}
    assert points.get("cuda") == "codegen_triton:TritonBackend"
