"""Runtime checks in generated C++: indirect indices in range, integer divisors not zero.

Each check calls a ``kiln::checked_*`` function of ``runtime/kiln_cpu_checks.h`` with its *site*
(``KernelState.check_site``): on failure it records the site, the bad value and the size in the
library's failure record and returns a safe value (index 0, divisor 1), so the kernel reads nothing
out of bounds and never traps; ``CppKernel`` raises the site's exception after the call. Under
``ops.masked`` in vector code only the active lanes are checked (the others may hold anything).
``CppConfig.runtime_checks=False`` emits none of this.
"""

from __future__ import annotations

import sympy
import torch

from codegen_cpp.codegen.arith import ArithmeticOps
from codegen_cpp.codegen.dtypes import cpp_dtype
from codegen_cpp.codegen.printer import cpp_index
from codegen_cpp.codegen.values import CppValue
from inductor_ir.ir.checks import DivisionCheck, IndexCheck

__all__ = ["RuntimeChecks"]


class RuntimeChecks(ArithmeticOps):
    """The integer division ops with their divisor checked first, and the checked form of an
    indirect index (for ``CppOpsHandler.indirect_indexing``)."""

    _masks: list[str]
    _target: list[str]

    def _active_mask(self) -> str | None:
        """The vector mask of the enclosing ``ops.masked`` (None: every lane is active)."""
        return self._masks[-1] if self.vector and self._masks else None

    # ------------------------------------------------------------------ indirect indices
    def _checked_index_line(
        self, name: str, value: str, size: sympy.Expr, check: bool | IndexCheck, wrap_neg: bool, vector: bool
    ) -> bool:
        """When checks are on and ``check`` asks for one: a scalar index is checked (and wrapped) at
        once, ``const auto <name> = kiln::checked_index<wrap>(value, size, site)``; a vector one is
        kept as it is and each lane is checked where a gather reads it (``lane_read``: a vector
        check would cost a vector of 64-bit compares and a spill, a lane's is one compare on a
        value the gather loads anyway). Returns whether it wrote the line."""
        if not (check and self.state.runtime_checks):
            return False
        site = self.state.check_site(check if isinstance(check, IndexCheck) else IndexCheck())
        wrap = "true" if wrap_neg else "false"
        if vector:
            self.state.lane_checks[name] = (wrap, cpp_index(size), site)
            self._target.append(f"const auto {name} = {value};")
            mask = self._active_mask()
            active = f", {mask}" if mask else ""
            line = f"kiln::check_lanes<{wrap}>({name}, {cpp_index(size)}, {site}{active});"
            self._target.append(line)
            self.state.unread_lane_checks[name] = (self._target, line)
            return True
        mask = self._active_mask()
        args = f"{value}, {cpp_index(size)}, {site}" + (f", {mask}" if mask else "")
        self._target.append(f"const auto {name} = kiln::checked_index<{wrap}>({args});")
        return True

    def lane_read(self, vector_name: str, mask: str | None = None) -> str:
        """Lane ``lane`` of an indirect-index vector, checked when it was made with a check. ``mask``:
        the lanes that count (lanes outside it are clamped silently: ``kiln::lanes`` evaluates every
        lane, ``gather_masked`` only the active ones and needs none)."""
        read = f"{vector_name}[lane]"
        lane_check = self.state.lane_checks.get(vector_name)
        if lane_check is None:
            return read
        unread = self.state.unread_lane_checks.pop(vector_name, None)
        if unread is not None:
            lines, line = unread
            if line in lines:
                lines.remove(line)  # this read checks every lane it uses
        wrap, size, site = lane_check
        active = f", {mask}[lane] != 0" if mask else ""
        return f"kiln::checked_index<{wrap}>({read}, {size}, {site}{active})"

    # ------------------------------------------------------------------ integer division
    def _checked_divisor(self, b: CppValue) -> CppValue:
        """``b`` with a zero recorded as a failure and replaced by 1 (integer dtypes, checks on)."""
        if not self.state.runtime_checks or b.dtype.is_floating_point or b.dtype == torch.bool:
            return b
        known = self.state.symbolic.get(b.name)
        if known is not None and known.is_zero is False:
            return b  # a nonzero constant or size
        site = self.state.check_site(DivisionCheck())
        mask = self._active_mask()
        tail = f", {site}" + (f", {mask}" if mask else "")
        if self.vector and b.uniform is not None:
            # One scalar check of a lane-invariant divisor (it stays lane-invariant).
            scalar = f"static_cast<{cpp_dtype(b.dtype).scalar}>({b.uniform})"
            return self._scalar_value(f"kiln::checked_divisor({scalar}{tail})", b.dtype)
        return self._emit(f"kiln::checked_divisor({self._lift(b)}{tail})", b.dtype)

    def floordiv(self, a: CppValue, b: CppValue) -> CppValue:
        """a // b, rounding toward negative infinity (an integer divisor checked first)."""
        return super().floordiv(a, self._checked_divisor(b))

    def truncdiv(self, a: CppValue, b: CppValue) -> CppValue:
        """a / b, rounding toward zero (an integer divisor checked first)."""
        return super().truncdiv(a, self._checked_divisor(b))

    def remainder(self, a: CppValue, b: CppValue) -> CppValue:
        """Python a % b (an integer divisor checked first)."""
        return super().remainder(a, self._checked_divisor(b))

    def fmod(self, a: CppValue, b: CppValue) -> CppValue:
        """C fmod(a, b) (an integer divisor checked first)."""
        return super().fmod(a, self._checked_divisor(b))
