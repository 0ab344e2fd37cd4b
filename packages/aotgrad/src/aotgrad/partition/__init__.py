"""Partitioners: split a joint forward+backward graph into a forward and a backward graph.

A partitioner is `(joint: JointGraph) -> (forward_gm, backward_gm)`: the forward maps primals to
`(*forward outputs, *saved values)`, the backward maps `(*saved values, *tangents)` to the
gradients.
"""

from aotgrad.partition.min_cut import min_cut, min_cut_saved_values, save_all
from aotgrad.partition.policy import is_recomputable

__all__ = ["is_recomputable", "min_cut", "min_cut_saved_values", "save_all"]
