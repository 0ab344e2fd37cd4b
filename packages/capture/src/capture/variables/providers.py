"""Every tracker module that provides an upcall (`variables/upcalls.py`), imported in one fixed order.

The interpreter imports this module, so each upcall a lower tracker makes is provided before anything is
traced, whichever of capture's modules a program imported first.
"""

from capture.variables import (  # noqa: F401  (imported for their upcall providers)
    autograd_calls,
    collections_types,
    container_methods,
    context_managers,
    dict_subclasses,
    folding,
    ndarray,
    numpy_results,
    objects,
)
