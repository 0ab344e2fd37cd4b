"""C++/OpenMP vectorized kernel generator for Kiln's inductor-ir (CPUs).

:class:`CppBackend` implements ``inductor_ir.KernelBackend`` for ``cpu`` devices::

    from codegen_cpp import CppBackend
    compiled = inductor_ir.compile_graph(aten_gm, inputs, backends={"cpu": CppBackend()})

Kernels are vectorized with GCC/Clang vector extensions (scalar tails), parallelized with OpenMP,
compiled by the system C++ compiler into one shared library per graph and cached on disk
(``$KILN_CACHE_DIR/cpp`` or ``~/.cache/kiln/cpp``). See docs/codegen-cpp.md.
"""

from codegen_cpp._version import __version__
from codegen_cpp.backend import CppBackend, library_source
from codegen_cpp.codegen.handler import CppOpsHandler
from codegen_cpp.codegen.kernel import CppKernelSource, generate_kernel
from codegen_cpp.codegen.printer import cpp_index
from codegen_cpp.compile.build import CompileStats
from codegen_cpp.compile.toolchain import Toolchain, find_toolchain
from codegen_cpp.config import CppConfig, default_cache_dir
from codegen_cpp.errors import CppCompileError, CppCompilerNotFoundError, CppError

__all__ = [
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
]
