"""Tensors in the graph, and the methods and attributes read from them."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from capture.sources import AttrSource, Source
from capture.variables import upcalls
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.containers import TupleVariable
from capture.variables.sizes import SizeVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

# Methods that turn tensor data into Python values, or leave the torch world: always a graph break.
BREAKING_METHODS = {
    "item": "Tensor.item() converts a tensor to a Python number",
    "tolist": "Tensor.tolist() converts a tensor to Python values",
    "numpy": "Tensor.numpy() leaves PyTorch (a call into numpy)",
    "backward": "Tensor.backward() runs autograd outside the graph",
    "data_ptr": "Tensor.data_ptr() reads a memory address",
    "__bool__": "bool(tensor) depends on run-time data",
    "__int__": "int(tensor) depends on run-time data",
    "__float__": "float(tensor) depends on run-time data",
    "register_hook": "Tensor.register_hook() is not captured",
    "retain_grad": "Tensor.retain_grad() marks a tensor of the running program (its .grad is read after backward)",
    "storage": "Tensor.storage() is not captured",
    "untyped_storage": "Tensor.untyped_storage() is not captured",
}
# Methods traced to unbacked symbolic numbers under `capture_scalar_outputs` (else in BREAKING_METHODS).
SCALAR_METHODS = {"item", "tolist"}
# Methods answered from static metadata (no graph node).
METADATA_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous",
                    "element_size", "is_floating_point", "is_complex", "get_device", "type_as_string"}
METADATA_ATTRIBUTES = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_leaf", "layout",
                       "is_sparse", "is_quantized", "is_meta", "itemsize", "is_mps", "is_cpu"}
# Metadata read from sizes: SymInt nodes when the sizes are symbolic (dynamic shapes).
SIZE_METHODS = {"size", "stride", "numel", "nelement"}
GRAPH_ATTRIBUTES = {"T", "mT", "H", "mH", "real", "imag", "data"}


class TensorVariable(VariableTracker):
    """A tensor produced in (or fed into) the FX graph: its node and a fake example value."""

    def __init__(self, node: torch.fx.Node, example: torch.Tensor, source: Source | None = None,
                 value: torch.Tensor | None = None, value_source: Source | None = None) -> None:
        self.node = node
        self.example = example
        self.source = source
        # The real tensor when this is an existing one (read through `value_source`, or returned by an op
        # that returns its input, as `x.add_(1)` does): where its Python attributes are read.
        self.value = value
        self.value_source = value_source if value_source is not None else source

    def python_type(self) -> type:
        return torch.nn.Parameter if isinstance(self.example, torch.nn.Parameter) else torch.Tensor

    def truth(self, tx: Tracer) -> bool:
        raise Unsupported("data-dependent control flow: the branch depends on a tensor's value")

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        example = self.example
        if name == "__class__":  # `x.__class__.__name__`, `x.__class__ is torch.Tensor`: as `type(x)`
            return tx.output.wrap_value(self.python_type(), None)
        if name in METADATA_ATTRIBUTES:
            if name == "shape":
                return SizeVariable([tx.output.tensor_metadata(self, "size", d) for d in range(example.dim())])
            value = getattr(example, name)
            if name == "is_leaf":
                raise Unsupported("Tensor.is_leaf depends on autograd history")
            return ConstantVariable(value)
        if name in GRAPH_ATTRIBUTES:
            if name == "data":
                return tx.output.call_graph("call_method", "detach", [self], {})
            return tx.output.call_graph("call_function", getattr, [self, ConstantVariable(name)], {})
        if name == "grad":
            raise Unsupported("reading Tensor.grad is not captured")
        if name in BREAKING_METHODS and not name.startswith("__"):
            return TensorMethodVariable(self, name)  # the call (not the attribute read) breaks the graph
        if hasattr(torch.Tensor, name) and callable(getattr(torch.Tensor, name)):
            return TensorMethodVariable(self, name)
        return self._python_attribute(tx, name)

    def _python_attribute(self, tx: Tracer, name: str) -> VariableTracker:
        """An attribute the program set on an existing tensor (``x.scale = 2.0``), read and guarded like any
        object's; a tensor the graph made has none."""
        source = self.value_source
        if self.value is not None and source is not None:
            attributes = self.value.__dict__
            if name in attributes:
                return tx.output.wrap_value(attributes[name], AttrSource(source, name))
            if not source.guard_free:
                tx.output.guards.absent_attribute(source, name)
        elif self.value is not None:
            raise Unsupported(f"tensor attribute {name!r} of a tensor without a source")
        message = f"'{type(self.value).__name__}' object has no attribute '{name}'"
        raise Unsupported(f"AttributeError: {message}", user_error=True, exception=AttributeError(message))

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        if self.example.dim() == 0:
            raise Unsupported("iteration over a 0-d tensor", user_error=True)
        return [tx.output.call_graph("call_function", operator.getitem, [self, ConstantVariable(i)], {})
                for i in range(int(self.example.shape[0]))]

    def __repr__(self) -> str:
        return f"TensorVariable({self.node.name})"


def has_subclass_semantics(value: torch.Tensor) -> bool:
    """True for a tensor subclass whose `__torch_function__` runs (default: ops return the subclass).

    Fake tensors, parameters and buffers disable it and trace as plain tensors.
    """
    return type(value) is not torch.Tensor and \
        type(value).__torch_function__ is not torch._C._disabled_torch_function_impl  # type: ignore[comparison-overlap]


class TensorSubclassVariable(VariableTracker):
    """An existing tensor of a subclass with `__torch_function__` behaviour: not captured.

    Its Python-level behaviour (the subclass of every result, overridden ops) is not modelled, so
    any use of it breaks the graph and runs in Python, as eager.
    """

    def __init__(self, value: torch.Tensor, source: Source | None) -> None:
        self.value = value
        self.source = source

    def python_type(self) -> type:
        return type(self.value)

    def _refuse(self) -> Unsupported:
        return Unsupported(f"a {type(self.value).__name__} (a tensor subclass with __torch_function__) is not "
                           "captured: operations on it run in Python")

    def truth(self, tx: Tracer) -> bool:
        raise self._refuse()

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        raise self._refuse()

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        raise self._refuse()

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        raise self._refuse()

    def reconstruct(self, rebuild: Any) -> str:
        """The same object, read again through its source."""
        return self.source.expr() if self.source is not None else str(rebuild.constant(self.value))

    def __repr__(self) -> str:
        return f"TensorSubclassVariable({type(self.value).__name__})"


class TensorMethodVariable(VariableTracker):
    """A bound method of a traced tensor, e.g. `x.sum`."""

    def __init__(self, tensor: TensorVariable, name: str) -> None:
        self.tensor = tensor
        self.name = name

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if self.name in SCALAR_METHODS and not args and not kwargs and tx.output.config.capture_scalar_outputs:
            # Unbacked symbolic numbers (``u0 = t.item()``): arithmetic and sizes built from them stay
            # in the graph; a Python branch on one is a graph break at that line.
            return tx.output.call_graph("call_method", self.name, [self.tensor], {})
        if self.name == "numpy":  # the same tensor as an ndarray (variables/ndarray.py)
            return upcalls.tensor_to_ndarray(tx, self.tensor, args, kwargs)
        if self.name in BREAKING_METHODS:
            raise Unsupported(BREAKING_METHODS[self.name])
        if self.name in SIZE_METHODS and set(kwargs) <= {"dim"}:
            dims = [a.as_constant() for a in args] + [v.as_constant() for v in kwargs.values()]
            return self._size_method(tx, dims)
        if self.name in METADATA_METHODS:
            const_args = [a.as_constant() for a in args]
            const_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
            value: Any = getattr(self.tensor.example, self.name)(*const_args, **const_kwargs)
            if isinstance(value, torch.Size):
                return SizeVariable([ConstantVariable(int(v)) for v in value])
            return ConstantVariable(value) if not isinstance(value, tuple) else TupleVariable(
                [ConstantVariable(v) for v in value])
        if self.name in ("type",) and not args and not kwargs:
            return ConstantVariable(self.tensor.example.type())
        if self.name == "type" and len(args) == 1 and not kwargs:
            legacy = legacy_tensor_type(args[0])  # `x.type(torch.HalfTensor)`
            if legacy is not None:
                dtype, device = ConstantVariable(legacy[0]), ConstantVariable(legacy[1])
                return tx.output.call_graph("call_method", "to", [self.tensor], {"device": device, "dtype": dtype})
        return tx.output.call_graph("call_method", self.name, [self.tensor, *args], kwargs)

    def _size_method(self, tx: Tracer, args: list[Any]) -> VariableTracker:
        """`size()`, `size(d)`, `stride()`, `stride(d)`, `numel()`: symbolic where the sizes are."""
        example, output = self.tensor.example, tx.output
        if self.name in ("numel", "nelement"):
            return output.tensor_metadata(self.tensor, "numel")
        if len(args) > 1:
            raise Unsupported(f"Tensor.{self.name}() takes at most one argument", user_error=True)
        if args:
            dim = int(args[0])
            if not -example.dim() <= dim < max(example.dim(), 1):
                raise Unsupported(f"IndexError: dimension {dim} out of range for a {example.dim()}-d tensor",
                                  user_error=True)
            return output.tensor_metadata(self.tensor, self.name, dim % max(example.dim(), 1))
        items = [output.tensor_metadata(self.tensor, self.name, d) for d in range(example.dim())]
        return SizeVariable(items) if self.name == "size" else TupleVariable(items)

    def __repr__(self) -> str:
        return f"TensorMethodVariable({self.tensor.node.name}.{self.name})"


def legacy_tensor_type(value: VariableTracker) -> tuple[torch.dtype, str] | None:
    """(dtype, device type) of a legacy dense tensor type (`torch.HalfTensor`, `torch.cuda.FloatTensor`)
    given to `Tensor.type(...)`: the call is `Tensor.to(device, dtype)`, which a graph can hold (the class
    itself cannot be written into graph code). None for anything else."""
    cls = getattr(value, "value", None)
    if not isinstance(cls, type) or cls not in torch._tensor_classes or getattr(cls, "is_sparse", True):
        return None
    return cls.dtype, "cuda" if cls.is_cuda else "cpu"  # type: ignore[attr-defined]
