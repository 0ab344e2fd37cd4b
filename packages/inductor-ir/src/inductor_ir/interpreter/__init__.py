"""The reference executor: the IR evaluated with torch tensor operations."""

from inductor_ir.interpreter.run import interpret
from inductor_ir.interpreter.torch_handler import TorchOpsHandler, eval_index

__all__ = ["TorchOpsHandler", "eval_index", "interpret"]
