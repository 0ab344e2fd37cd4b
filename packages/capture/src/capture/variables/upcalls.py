"""Calls from a tracker module up into a higher one, which would otherwise close an import cycle.

Trackers are layered (a module imports only the ones below it at module level), yet a lower tracker
sometimes needs what a higher one defines: the attribute of a constant (`"a,b".split`, in base.py) is a
tracker that folds calls on containers, `tensor.numpy()` (in tensor.py) makes an ndarray. Such a call goes
through an `Upcall` declared here and provided by the higher module when it is imported
(`@wrap_constant_attribute.provide`); `variables/providers.py` imports every providing module, and the
interpreter imports it, so all are provided before anything is traced.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

if TYPE_CHECKING:
    from capture.variables.base import VariableTracker
    from capture.variables.tracer import Tracer

P = ParamSpec("P")
R = TypeVar("R")


class Upcall(Generic[P, R]):
    """A function a lower tracker module calls and a higher one provides (once, when it is imported)."""

    def __init__(self, name: str, provider: str) -> None:
        self.name = name
        self.provider = provider  # the module expected to provide it, named in the error when it has not
        self._function: Callable[P, R] | None = None

    def provide(self, function: Callable[P, R]) -> Callable[P, R]:
        """Register `function` as this upcall (a decorator; returns `function`)."""
        if self._function is not None and self._function is not function:
            raise RuntimeError(f"upcall {self.name} provided twice")
        self._function = function
        return function

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        function = self._function
        if function is None:
            raise RuntimeError(f"upcall {self.name} called before {self.provider} was imported "
                               "(capture.variables.providers imports every provider)")
        return function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Upcall({self.name})"


Args = list["VariableTracker"]
Kwargs = dict[str, "VariableTracker"]

# base.py: `constant.name` whose value is not a constant (`"a,b".split`): a method folded when called.
wrap_constant_attribute: Upcall[[Any], VariableTracker] = Upcall(
    "wrap_constant_attribute", "capture.variables.objects")

# containers.py: `lst.append`, `d.items`, `t.index`: the method of a traced list, dict or tuple.
container_method: Upcall[[VariableTracker, str], VariableTracker] = Upcall(
    "container_method", "capture.variables.container_methods")

# functions.py: a call of a function made by a decorator capture knows (`@contextlib.contextmanager`, a
# grad-mode decorator): the tracker of the call, or None for any other function.
decorated_function_call: Upcall[[Tracer, types.FunctionType, Args, Kwargs], VariableTracker | None] = Upcall(
    "decorated_function_call", "capture.variables.context_managers")

# tensor.py: `tensor.numpy()`: the same tensor as an ndarray.
tensor_to_ndarray: Upcall[[Tracer, Any, Args, Kwargs], VariableTracker] = Upcall(
    "tensor_to_ndarray", "capture.variables.ndarray")

# objects.py: `torch.from_numpy(a)`, `torch.as_tensor(a)`, ... of a traced ndarray (None when `a` is not one).
torch_from_ndarray: Upcall[[Tracer, Any, Args, Kwargs], VariableTracker | None] = Upcall(
    "torch_from_ndarray", "capture.variables.ndarray")

# builtins.py: `abs(a)` of a traced ndarray (None when `a` is not one).
ndarray_abs: Upcall[[Tracer, Args], VariableTracker | None] = Upcall("ndarray_abs", "capture.variables.ndarray")

# objects.py: whether some argument of a torch function cannot be a graph argument (a module, a user object, a
# function): the function is then traced through.
has_opaque_argument: Upcall[[list[VariableTracker]], bool] = Upcall(
    "has_opaque_argument", "capture.variables.folding")

# objects.py: an existing OrderedDict, defaultdict, Counter or deque as its container tracker (None for others).
existing_collection: Upcall[[Tracer, VariableTracker], VariableTracker | None] = Upcall(
    "existing_collection", "capture.variables.collections_types")

# objects.py: `MyFunction.apply` of a torch.autograd.Function subclass.
autograd_function_apply: Upcall[[type], VariableTracker] = Upcall(
    "autograd_function_apply", "capture.variables.autograd_calls")

# user_objects.py: `cls(*args, **kwargs)` of a plain dict subclass (None for any other class).
construct_dict_subclass: Upcall[[Tracer, Any, Args, Kwargs], VariableTracker | None] = Upcall(
    "construct_dict_subclass", "capture.variables.dict_subclasses")

# ndarray.py: a traced NumPy call's result made what NumPy itself gives (dtype, shape, scalar or array).
# (tx, result, the NumPy callable, args, kwargs, the node again on other arguments, the node's arguments)
as_numpy_gives: Upcall[[Tracer, VariableTracker, Callable[..., Any], Args, Kwargs,
                        Callable[[Args], VariableTracker], Args], VariableTracker] = Upcall(
    "as_numpy_gives", "capture.variables.numpy_results")
