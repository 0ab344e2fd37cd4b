"""Tracing to functional ATen graphs: the forward alone, and the joint forward+backward."""

from aotgrad.tracing.functional import FunctionalGraph, OutputSpec, ViewStep, trace_functional
from aotgrad.tracing.joint import JointGraph, trace_joint

__all__ = ["FunctionalGraph", "JointGraph", "OutputSpec", "ViewStep", "trace_functional", "trace_joint"]
