"""Runtime checks at launch (see `codegen/checks.py`): Triton's interpreter made to evaluate the
kernels' device asserts, and a failed check turned into the exception eager PyTorch raises.

Under the interpreter `tl.device_assert` does nothing unless its builder's options have `debug` on,
which neither `@triton.jit(debug=True)` nor `TRITON_DEBUG` reaches: `interpreter_asserts` turns it on
while a kernel with checks runs (and keeps Triton's int32 overflow asserts, which debug mode would
also enable, off: Kiln's integer arithmetic wraps as eager's does). A failed assert then raises
`AssertionError("kiln check <site> failed: ...")` inside Triton's `InterpreterError`, which
`check_failure` maps back to the site's check. On a GPU a failed assert is a device-side assert: the
device prints the same message and the CUDA context reports the error at the next synchronization.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator, Mapping

from codegen_triton.codegen.checks import CheckSite
from inductor_ir.ir.checks import IndexCheck

__all__ = ["check_failure", "interpreter_asserts"]

_SITE = re.compile(r"kiln check (\d+) failed")


@contextlib.contextmanager
def interpreter_asserts(enabled: bool) -> Iterator[None]:
    """While active (and ``enabled``), Triton's interpreter evaluates ``tl.device_assert``."""
    builder = None
    if enabled:
        from triton.runtime import interpreter

        builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if builder is None or options is None or not dataclasses.is_dataclass(options):
        yield
        return
    builder.options = dataclasses.replace(options, debug=True, sanitize_overflow=False)  # type: ignore[type-var]
    try:
        yield
    finally:
        builder.options = options


def check_failure(error: BaseException, checks: Mapping[int, CheckSite], kernel: str) -> Exception | None:
    """The exception eager would raise for the check whose assert ``error`` (or its cause) reports,
    or None when it reports none of ``checks``."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = _SITE.search(str(current))
        site = checks.get(int(found.group(1))) if found else None
        if site is not None:
            check, size = site
            if isinstance(check, IndexCheck):
                return check.exception(size=size or None, kernel=kernel)
            return check.exception(kernel=kernel)
        current = current.__cause__ or current.__context__
    return None
