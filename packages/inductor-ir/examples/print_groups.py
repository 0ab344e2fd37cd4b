"""Lower small real ATen graphs and print the kernel group records a backend receives.

Run: python3 packages/inductor-ir/examples/print_groups.py [sin_cos|softmax|chain|all]
"""

from __future__ import annotations

import sys

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir


def sin_cos(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The talk's toy example."""
    y = x.sin()
    return y, y.cos()


def softmax(x: torch.Tensor) -> torch.Tensor:
    """A softmax written out as reductions and pointwise ops."""
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


def chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pointwise work around a matmul (an extern call) and a reduction."""
    h = torch.mm(x.relu(), y) * 2
    return h.sum(0) + 1


EXAMPLES = {
    "sin_cos": (sin_cos, lambda: [torch.randn(8, 16)]),
    "softmax": (softmax, lambda: [torch.randn(4, 32)]),
    "chain": (chain, lambda: [torch.randn(8, 16), torch.randn(16, 4)]),
}


def main(which: str) -> None:
    """Print the IR, the groups and the wrapper for one example (or all)."""
    for name, (fn, make_inputs) in EXAMPLES.items():
        if which not in (name, "all"):
            continue
        inputs = make_inputs()
        gm = make_fx(fn)(*inputs)
        program = inductor_ir.lower(gm, inputs)
        print(f"===== {name}: IR =====\n{program}\n")
        sched = inductor_ir.schedule(program, {})
        print(f"===== {name}: kernel groups =====")
        for group in sched.kernel_groups:
            print(inductor_ir.describe_group(group))
            print()
        print(f"===== {name}: wrapper =====\n{inductor_ir.wrapper_source(sched)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sin_cos")
