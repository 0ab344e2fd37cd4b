"""Fit the piecewise tables of `kiln_cpu_math.h` (`kiln::erf`, `kiln::erfc`) and print them as C++.

Run: ``python packages/codegen-cpp/tools/fit_erf_table.py`` (numpy and scipy; not a runtime dependency).

erf(a) for a = |x| in [0, 3.92] is split into 8 pieces of width 1/2 centred on k / 2 (k = 0..7);
on each, erf(a) is a degree-6 polynomial in t = 2a - k, t in [-1/2, 1/2] (piece 0: [0, 1/2];
piece 7: [-1/2, 0.84], whose end value is exactly 1, the value of every larger |x| after the
clamp). Eight pieces fit one 256-bit register: one permute per coefficient with AVX2 or AVX-512.
Piece 0 has no constant term and minimizes the relative error, so erf(x) keeps full relative
precision for tiny x (erf(x) ~ 2x / sqrt(pi)).

erfc's table holds erfcx(a) = exp(a^2) * erfc(a) (smooth, from 1 down to ~0.055 at a = 10.25) for
a in [0, 10.25], 21 pieces of width 1/2 centred on k / 2, degree 6 in t = 2a - k, each fitted for
relative error (the other 11 entries of its 32 repeat the last piece, never selected).

Each fit is near-minimax (Lawson's iteratively reweighted least squares on a dense grid); the
coefficients are rounded to float32 from the highest degree down, the lower ones refitted after
each rounding. The script checks the rounded tables in float32 Horner steps with fused
multiply-adds and prints the largest errors.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import erf, erfcx

ERF_PIECES = 8
ERF_DEGREE = 6
ERF_LAST_END = 0.84  # piece 7 reaches |x| = 3.92, where erf rounds to 1 in float32
ERFC_PIECES = 21
ERFC_DEGREE = 6
WIDTH = 0.5


def lawson(basis: np.ndarray, target: np.ndarray, scale: np.ndarray, steps: int) -> np.ndarray:
    """Coefficients minimizing max |scale * (basis @ c - target)| (approximately)."""
    weights = np.full(len(target), 1.0 / len(target))
    coefficients = np.zeros(basis.shape[1])
    for _ in range(steps):
        root = np.sqrt(weights) * scale
        coefficients = np.linalg.lstsq(basis * root[:, None], target * root, rcond=None)[0]
        error = np.abs(basis @ coefficients - target) * scale
        weights = weights * (error + 1e-300)
        weights /= weights.sum()
    return coefficients


def fit_rounded(t: np.ndarray, target: np.ndarray, scale: np.ndarray, first: int, degree: int) -> list[float]:
    """float32 coefficients of t^0..t^degree (those below `first` are 0), rounded from the top."""
    rounded: dict[int, float] = {j: 0.0 for j in range(first)}
    remainder = target.copy()
    for top in range(degree, first - 1, -1):
        basis = np.stack([t**j for j in range(first, top + 1)], axis=1)
        coefficient = float(np.float32(lawson(basis, remainder, scale, 200 if top == degree else 80)[-1]))
        rounded[top] = coefficient
        remainder = remainder - coefficient * t**top
    return [rounded[j] for j in range(degree + 1)]


def horner_float32(coefficients: list[float], t: np.ndarray) -> np.ndarray:
    """Horner steps rounded to float32 once each (as a fused multiply-add rounds)."""
    p = np.full(t.shape, coefficients[-1], dtype=np.float32)
    for c in coefficients[-2::-1]:
        p = (p.astype(np.float64) * t.astype(np.float64) + c).astype(np.float32)
    return p


def piece_range(k: int, last: int, last_end: float) -> tuple[float, float]:
    """The t range of piece k (the first starts at 0, the last may reach further)."""
    return (-0.5 if k else 0.0), (last_end if k == last else 0.5)


def fit_pieces(
    fn: Callable[[np.ndarray], np.ndarray], pieces: int, degree: int, last_end: float, relative: bool
) -> tuple[list[list[float]], float]:
    """Each piece's float32 coefficients and the largest error (relative or absolute) of the table."""
    table, worst = [], 0.0
    for k in range(pieces):
        low, high = piece_range(k, pieces - 1, last_end)
        t = np.linspace(low, high, 4001)
        target = fn(WIDTH * (k + t))
        # erf's piece 0: no constant term, relative error (erf(x) ~ 2x / sqrt(pi) near 0)
        first = 1 if (k == 0 and not relative) else 0
        scale = 1.0 / np.maximum(np.abs(target), 1e-30) if (relative or k == 0) else np.ones_like(t)
        coefficients = fit_rounded(t, target, scale, first, degree)
        check = np.linspace(low, high, 100001).astype(np.float32)
        exact = fn(WIDTH * (k + check.astype(np.float64)))
        error = np.abs(horner_float32(coefficients, check).astype(np.float64) - exact)
        worst = max(worst, float((error / exact if relative else error).max()))
        table.append(coefficients)
    return table, worst


def print_table(name: str, table: list[list[float]], width: int, note: str) -> None:
    """The table as a C++ array of rows (row j: the t^j coefficients of every piece, repeated to `width`)."""
    print(f"// {note}")
    print(f"alignas(64) inline constexpr float {name}[{len(table[0])}][{width}] = {{")
    for j in range(len(table[0])):
        values = [str(np.float32(table[k % len(table)][j])) + "f" for k in range(width)]
        print(f"    {{  // t^{j}")
        for start in range(0, width, 8):
            print("        " + ", ".join(values[start : start + 8]) + ",")
        print("    },")
    print("};")


def main() -> None:
    erf_table, worst = fit_pieces(erf, ERF_PIECES, ERF_DEGREE, ERF_LAST_END, relative=False)
    end = horner_float32(erf_table[-1], np.array([ERF_LAST_END], dtype=np.float32))[0]
    assert end == 1.0, f"erf at the clamp is {end!r}, not 1"
    print_table("erf_table", erf_table, 16, f"largest absolute error of the float32 evaluation: {worst:.3g}")
    erfc_table, worst = fit_pieces(erfcx, ERFC_PIECES, ERFC_DEGREE, 0.5, relative=True)
    erfc_table += [erfc_table[-1]] * (32 - ERFC_PIECES)
    print_table("erfcx_table", erfc_table, 32, f"largest relative error of the float32 evaluation: {worst:.3g}")


if __name__ == "__main__":
    main()
