"""The eager copy of a frame that cannot be resumed, whose breaking call still captures its callee.

A graph break inside a callee normally ends the caller's graph at the call, and the break stub calls
the callee through `CaptureContext.wrap_callee`, so the callee is captured on its own, with graphs on
both sides of its break. Where the caller cannot be resumed at that call (it sits in a `try` block or
a loop: transformers' `capture_outputs` wrapper runs `func(self, *args, **kwargs)` inside
`try/finally`, encoders call their layers in a `for` loop), the caller runs eagerly. Without help
the whole call tree below it would then run eagerly too; this module makes a copy of the caller's
code whose breaking call goes through the same wrapper, so the callee is still captured (what
TorchDynamo's frame hook gives it for free).

Only the breaking call changes:

* ``CALL n`` (with its ``KW_NAMES``, and on 3.11 its ``PRECALL``) becomes a ``CALL_FUNCTION_EX``
  of `call_through` on ``(callable, args, keyword names)`` (or ``(method, self, args, keyword
  names)`` when the slot below the callable holds a method rather than a NULL);
* ``CALL_FUNCTION_EX`` becomes a ``CALL_FUNCTION_EX`` of `call_through_ex` on
  ``(callable, args, kwargs)``.

Whether CALL's lower slot is a NULL must be known when the code is generated. The method loads
decide it at run time (3.11's ``LOAD_METHOD``; 3.12's and 3.13's ``LOAD_ATTR`` and
``LOAD_SUPER_ATTR`` with their method bit set): each is rewritten to its plain attribute load plus
``PUSH_NULL`` (and on 3.11/3.12 a ``SWAP``: the NULL goes below the bound method there), so the
trace's view of the slot (a NULL for a method load, ``PUSH_NULL`` and ``LOAD_GLOBAL``'s NULL, a value
for a 3.11 comprehension or ``__exit__``) is exact.

On 3.13 CALL keeps the NULL above the callable and its keyword names on the stack (``CALL_KW``); the
arguments and names are packed into one tuple (`call_through_packed`). Where the dialect table
(`bytecode/dialects.py`) knows no Python, the caller runs plainly.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, cast

from bytecode import Bytecode, Instr

from capture.bytecode.assemble import assemble
from capture.bytecode.dialects import DIALECT, Dialect

Wrap = Callable[[Any], Any]

_CALL_REWRITE_EXTRA = 4
"""Stack slots a rewritten call may use beyond the original call's (helper, names, packed tuples)."""


def call_through(wrap: Wrap, fn: Any, args: tuple[Any, ...], kw_names: tuple[str, ...]) -> Any:
    """``fn(*args)`` as CALL runs it (the last ``len(kw_names)`` arguments by keyword), `fn` wrapped."""
    if kw_names:
        count = len(kw_names)
        return wrap(fn)(*args[:-count], **dict(zip(kw_names, args[-count:])))
    return wrap(fn)(*args)


def call_method_through(wrap: Wrap, method: Any, receiver: Any, args: tuple[Any, ...],
                        kw_names: tuple[str, ...]) -> Any:
    """CALL's method form: ``method(receiver, *args)``, `method` wrapped."""
    return call_through(wrap, method, (receiver, *args), kw_names)


def call_through_ex(wrap: Wrap, fn: Any, args: Any, kwargs: Any = None) -> Any:
    """``fn(*args, **kwargs)`` as CALL_FUNCTION_EX runs it, `fn` wrapped."""
    return wrap(fn)(*args, **(kwargs or {}))


def call_through_packed(wrap: Wrap, fn: Any, packed: tuple[Any, ...]) -> Any:
    """3.13's CALL and CALL_KW: `packed` is the arguments then the keyword names."""
    return call_through(wrap, fn, packed[:-1], packed[-1])


def call_method_through_packed(wrap: Wrap, method: Any, receiver: Any, packed: tuple[Any, ...]) -> Any:
    """3.13's CALL and CALL_KW in the method form."""
    return call_through(wrap, method, (receiver, *packed[:-1]), packed[-1])


def call_through_ex_packed(wrap: Wrap, fn: Any, packed: tuple[Any, ...]) -> Any:
    """3.13's CALL_FUNCTION_EX: `packed` is the argument tuple and, with flag 1, the keyword dict."""
    return call_through_ex(wrap, fn, *packed)


def eager_code_with_captured_call(code: types.CodeType, index: int, null_below: bool | None,
                                  wrap: Wrap) -> types.CodeType | None:
    """A copy of `code` whose call at instruction `index` calls its callee through `wrap`.

    `null_below`: for a CALL, whether the trace saw a NULL below its callable. None when the copy
    cannot be made (another Python, another instruction, an unknown slot).
    """
    if DIALECT is None:
        return None
    bytecode = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    items: list[Any] = []
    position = -1
    found = False
    for item in bytecode:
        if not isinstance(item, Instr):
            items.append(item)
            continue
        position += 1
        where = item.location
        if position == index:
            rewrite = _captured_call_null_after if DIALECT.null_after_callable else _captured_call
            replacement = rewrite(item, items, null_below, wrap)
            if replacement is None:
                return None
            items += replacement
            found = True
        elif (plain := _plain_attribute_load(item)) is not None:
            items += _bound_method_load(DIALECT, plain, where)
        else:
            items.append(item)
    if not found:
        return None
    bytecode.clear()
    bytecode.extend(items)
    try:
        # Handler depths are the code's own (a call rewritten inside a try block leaves the block's
        # base depth as it was; `code` may be a resume function: see `assemble`); the rewritten call
        # holds a helper and a packed tuple on top of what the call held.
        return assemble(bytecode, at_least=code.co_stacksize + _CALL_REWRITE_EXTRA, keep_handler_depths=True)
    except (ValueError, RuntimeError):  # bytecode could not reassemble it (stack depth): run the original
        return None


def _bound_method_load(dialect: Dialect, plain: Instr, where: Any) -> list[Instr]:
    """The bound method with the NULL of a plain call next to it, where the dialect keeps it."""
    if dialect.null_after_callable:
        return [plain, Instr("PUSH_NULL", location=where)]
    return [plain, Instr("PUSH_NULL", location=where), Instr("SWAP", 2, location=where)]


def _plain_attribute_load(instr: Instr) -> Instr | None:
    """The attribute load (no method bit) standing for method load `instr`; None for other instructions.

    3.11's ``LOAD_METHOD``, 3.12's ``LOAD_ATTR (True, name)`` and ``LOAD_SUPER_ATTR (True, two_args,
    name)`` push ``[method, self]`` or ``[NULL, value]`` as the attribute's kind decides at run time.
    """
    where = instr.location
    if instr.name == "LOAD_METHOD":
        return Instr("LOAD_ATTR", instr.arg, location=where)
    arg = instr.arg
    if instr.name in ("LOAD_ATTR", "LOAD_SUPER_ATTR") and isinstance(arg, tuple) and arg[0] is True:
        return Instr(instr.name, cast(Any, (False, *arg[1:])), location=where)
    return None


def _captured_call(instr: Instr, before: list[Any], null_below: bool | None, wrap: Wrap) -> list[Any] | None:
    """The instructions replacing call instruction `instr` (`before`: what precedes it, trimmed in place)."""
    where = instr.location
    if instr.name == "CALL_FUNCTION_EX":
        packed = 3 if int(cast(Any, instr.arg)) & 1 else 2
        helper: Any = _bind(call_through_ex, wrap)
        return _pack_and_call(helper, packed, where)
    if instr.name != "CALL" or null_below is None:
        return None
    argc = int(cast(Any, instr.arg))
    if DIALECT is not None and DIALECT.precall:
        if not before or not isinstance(before[-1], Instr) or before[-1].name != "PRECALL":
            return None
        before.pop()  # PRECALL
    kw_names: tuple[str, ...] = ()
    if before and isinstance(before[-1], Instr) and before[-1].name == "KW_NAMES":
        kw_names = tuple(cast(Any, before.pop().arg))
    head = [Instr("BUILD_TUPLE", argc, location=where), Instr("LOAD_CONST", cast(Any, kw_names), location=where)]
    if null_below:  # [NULL, fn, args..] -> call_through(fn, args, names)
        return head + _pack_and_call(_bind(call_through, wrap), 3, where)
    # [method, self, args..]: no NULL to spend on CALL_FUNCTION_EX, so push one below the packed tuple.
    return head + [Instr("BUILD_TUPLE", 4, location=where), Instr("PUSH_NULL", location=where),
                   Instr("SWAP", 2, location=where)] + _pack_and_call(_bind(call_method_through, wrap), 0, where)


def _captured_call_null_after(instr: Instr, before: list[Any], null_below: bool | None,
                              wrap: Wrap) -> list[Any] | None:
    """3.13: the instructions replacing CALL, CALL_KW or CALL_FUNCTION_EX `instr` (callable below its NULL).

    A NULL cannot be popped (POP_TOP would release it), so a plain call's NULL stays where it is and
    becomes CALL_FUNCTION_EX's: [fn, NULL, packed] -> [helper, NULL, (fn, packed)].
    """
    where = instr.location
    if instr.name == "CALL_FUNCTION_EX":  # [fn, NULL, args, kwargs?]
        packed = 2 if int(cast(Any, instr.arg)) & 1 else 1
        return [Instr("BUILD_TUPLE", packed, location=where),
                *_call_keeping_null(_bind(call_through_ex_packed, wrap), where)]
    if instr.name not in ("CALL", "CALL_KW") or null_below is None:
        return None
    argc = int(cast(Any, instr.arg))
    code: list[Any] = [] if instr.name == "CALL_KW" else [Instr("LOAD_CONST", cast(Any, ()), location=where)]
    code.append(Instr("BUILD_TUPLE", argc + 1, location=where))  # [fn, NULL|self, (args.., names)]
    if null_below:
        return code + _call_keeping_null(_bind(call_through_packed, wrap), where)
    # [method, self, packed]: no NULL there; push one for CALL_FUNCTION_EX.
    return code + [Instr("BUILD_TUPLE", 3, location=where), Instr("LOAD_CONST", _bind(call_method_through_packed, wrap),
                                                                  location=where),
                   Instr("SWAP", 2, location=where), Instr("PUSH_NULL", location=where), Instr("SWAP", 2, location=where),
                   Instr("CALL_FUNCTION_EX", 0, location=where)]


def _call_keeping_null(helper: Any, where: Any) -> list[Instr]:
    """3.13: [fn, NULL, packed] -> helper(fn, packed) by CALL_FUNCTION_EX on [helper, NULL, (fn, packed)]."""
    return [Instr("LOAD_CONST", helper, location=where), Instr("SWAP", 4, location=where),  # [helper, NULL, packed, fn]
            Instr("SWAP", 2, location=where), Instr("BUILD_TUPLE", 2, location=where),
            Instr("CALL_FUNCTION_EX", 0, location=where)]


def _pack_and_call(helper: Any, packed: int, where: Any) -> list[Instr]:
    """[NULL, v1..vn] -> helper(v1, .., vn) by CALL_FUNCTION_EX (`packed` 0: the tuple is already built)."""
    code = [Instr("BUILD_TUPLE", packed, location=where)] if packed else []
    return code + [Instr("LOAD_CONST", helper, location=where), Instr("SWAP", 2, location=where),
                   Instr("CALL_FUNCTION_EX", 0, location=where)]


def _bind(helper: Callable[..., Any], wrap: Wrap) -> Any:
    return functools.partial(helper, wrap)
