"""CUDA graph replay of compiled graphs (mode="reduce-overhead" and the ``cudagraphs`` backend)."""

from frontend.cudagraphs.outputs import CudaGraphOutput, ReplayCounter, guard_outputs
from frontend.cudagraphs.runner import CudaGraphRecorder, CudaGraphRunner, GraphRecorder

__all__ = ["CudaGraphOutput", "CudaGraphRecorder", "CudaGraphRunner", "GraphRecorder", "ReplayCounter", "guard_outputs"]
