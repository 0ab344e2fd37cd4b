"""Pins the public symbols of `codegen_cpp`: a change here is an API change."""

import codegen_cpp

PUBLIC = {
    "CompileStats",
    "CppBackend",
    "CppCompileError",
    "CppCompilerNotFoundError",
    "CppConfig",
    "CppError",
    "CppKernelSource",
    "CppOpsHandler",
    "Toolchain",
    "__version__",
    "cpp_index",
    "default_cache_dir",
    "find_toolchain",
    "generate_kernel",
    "library_source",
}


def test_version_is_single_sourced() -> None:
    from codegen_cpp._version import __version__

    assert codegen_cpp.__version__ == __version__


def test_all_names_exist() -> None:
    for name in codegen_cpp.__all__:
        assert hasattr(codegen_cpp, name), name


def test_public_names_are_pinned() -> None:
    assert set(codegen_cpp.__all__) == PUBLIC


def test_backend_satisfies_the_kernel_backend_protocol() -> None:
    from inductor_ir import KernelBackend, verify_ops_handler

    assert isinstance(codegen_cpp.CppBackend(), KernelBackend)
    assert codegen_cpp.CppBackend.device_type == "cpu"
    verify_ops_handler(codegen_cpp.CppOpsHandler)


def test_entry_point_names_the_backend() -> None:
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="kiln.kernel_backends") if e.name == "cpu"]
    assert entry.load() is codegen_cpp.CppBackend
