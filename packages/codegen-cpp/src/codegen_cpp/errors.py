"""Errors of the C++ backend a user can cause, each saying what to do."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CppCompileError", "CppCompilerNotFoundError", "CppError"]


class CppError(RuntimeError):
    """Base class of the C++ backend's errors."""


class CppCompilerNotFoundError(CppError):
    """No working C++ compiler: Kiln's CPU backend cannot build kernels on this machine."""

    def __init__(self, tried: list[str]) -> None:
        self.tried = tried
        super().__init__(
            "Kiln's CPU backend needs a C++ compiler and found none "
            f"(tried: {', '.join(tried) or 'nothing'}).\n"
            "Install one: `apt install g++` (Debian/Ubuntu), `dnf install gcc-c++` (Fedora/RHEL), "
            "`xcode-select --install` (macOS), or point the CXX environment variable at a compiler.\n"
            "Or run these graphs without compiling them: CppBackend(CppConfig(fallback_to_eager=True))."
        )


class CppCompileError(CppError):
    """The C++ compiler rejected a generated kernel library."""

    def __init__(self, source_path: Path, command: list[str], message: str) -> None:
        self.source_path = source_path
        self.command = command
        self.message = message
        super().__init__(
            f"The C++ compiler failed on the generated kernel source {source_path}\n"
            f"command: {' '.join(command)}\n{message.strip()}\n"
            "This is a bug in Kiln's C++ backend: please report it with the source file above. "
            "To keep going, compile this function with a different backend or set "
            "CppConfig(vectorize=False)."
        )
