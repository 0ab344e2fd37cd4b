"""Runtime checks in generated Triton: indirect indices in range, integer divisors not zero.

Each check is a ``tl.device_assert`` whose message names its *site*: ``kiln check 3 failed: index
is out of bounds for dimension 0 with size 10 (aten.gather.default)``. It is written right after
the value it tests is computed, before any load through it, and only lanes under the current
masks are tested. Triton compiles asserts only in debug mode: kernels with checks are decorated
``@triton.jit(debug=True)`` (on a GPU a failure is a device-side assert, its message printed by the
device), and under the interpreter the launcher turns them on and raises the site's exception (what
eager raises) from the assertion (``codegen_triton.runtime.checks``). ``TritonConfig.runtime_checks
= False`` writes none.
"""

from __future__ import annotations

import sympy

from codegen_triton.codegen.overrides import TritonMathOps
from codegen_triton.codegen.values import TritonValue, is_float
from inductor_ir.ir.checks import DivisionCheck, IndexCheck, RuntimeCheck

__all__ = ["CHECK_MESSAGE", "CheckSite", "RuntimeChecks"]

V = TritonValue

CHECK_MESSAGE = "kiln check {site} failed: {message}"
"""The message of a check's ``tl.device_assert`` (``codegen_triton.runtime.checks`` parses the site)."""

CheckSite = tuple[RuntimeCheck, str]
"""A check and the size it tests against, as source text ("" for a divisor)."""


class RuntimeChecks(TritonMathOps):
    """The integer division ops with their divisor asserted nonzero first, and :meth:`check_index`.

    The kernel writer supplies ``sections`` and ``target`` (where lines go), ``printer``,
    ``_current_mask`` and ``literal_of``, and sets ``runtime_checks`` and ``check_sites``.
    """

    runtime_checks: bool = True
    check_sites: dict[CheckSite, int]

    def _site(self, check: RuntimeCheck, size: str) -> int:
        return self.check_sites.setdefault((check, size), len(self.check_sites) + 1)

    def _write_assert(self, condition: str, value: V, check: RuntimeCheck, size: str, operand: V | None = None) -> None:
        """``tl.device_assert(condition | ~masks, message)`` for the lanes of ``value`` (and of
        ``operand``'s: where the checked operation runs) under the block and ``ops.masked`` masks
        (lanes outside them may hold anything), after the definitions of ``value``, ``operand`` and
        the masks: in the latest section defining one of them (a load through the checked value
        may be hoisted out of a loop, but never above the value itself)."""
        axes = value.axes | (operand.axes if operand is not None else frozenset())
        mask, _ = self._current_mask(axes)  # type: ignore[attr-defined]
        stack = [m.name for m in self._mask_stack]  # type: ignore[attr-defined]
        if mask is not None:
            condition = f"({condition}) | ~({mask})"
        site = self._site(check, size)
        text = check.message(size=size or None) if isinstance(check, IndexCheck) else check.message()
        message = CHECK_MESSAGE.format(site=site, message=text)
        line = f"tl.device_assert({condition}, {message!r})"
        sections = self.sections  # type: ignore[attr-defined]
        latest = None
        for position, section in enumerate(sections):
            defined = [value.name, *([operand.name] if operand is not None else []), *stack]
            if any(line_.startswith(f"{name} = ") for name in defined for line_ in section.lines):
                latest = position
        target = sections[latest] if latest is not None else self.target  # type: ignore[attr-defined]
        target.lines.append(line)

    def check_index(self, value: V, size: sympy.Expr, check: bool | IndexCheck) -> None:
        """Assert that the (wrapped) index ``value`` lies in ``[0, size)`` when checks are on."""
        if not (check and self.runtime_checks):
            return
        size_text = self.printer.print(size)  # type: ignore[attr-defined]
        condition = f"(0 <= {value.name}) & ({value.name} < {size_text})"
        self._write_assert(condition, value, check if isinstance(check, IndexCheck) else IndexCheck(), size_text)

    def _check_divisor(self, a: V, b: V) -> None:
        """Assert ``b`` nonzero on the lanes where ``a`` is divided by it: a constant 0 divisor of an
        empty block (a sum over no elements of ``x % x.size(0)``) divides nothing."""
        if not self.runtime_checks or is_float(b.dtype):
            return
        literal = self.literal_of(b)
        if literal is not None and literal != 0:
            return
        self._write_assert(f"{b.name} != 0", b, DivisionCheck(), "", a)

    def floordiv(self, a: V, b: V) -> V:
        """a // b toward negative infinity (an integer divisor asserted nonzero first)."""
        self._check_divisor(a, b)
        return super().floordiv(a, b)

    def truncdiv(self, a: V, b: V) -> V:
        """a / b toward zero (an integer divisor asserted nonzero first)."""
        self._check_divisor(a, b)
        return super().truncdiv(a, b)

    def remainder(self, a: V, b: V) -> V:
        """a % b with the sign of b (an integer divisor asserted nonzero first)."""
        self._check_divisor(a, b)
        return super().remainder(a, b)

    def fmod(self, a: V, b: V) -> V:
        """a % b with the sign of a (an integer divisor asserted nonzero first)."""
        self._check_divisor(a, b)
        return super().fmod(a, b)
