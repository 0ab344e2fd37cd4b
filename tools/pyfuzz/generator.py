"""Random Python programs around tensor code: `generate(seed)` is a deterministic function of its seed.

Where `tools.fuzz` varies the tensor operations, this generator varies the Python around them, the
part capture translates bytecode by bytecode: branches on Python ints and on tensor data, loops over
ranges, lists and dicts, while loops, closures and a cell they update, lambdas, ``functools.partial``,
calls through ``*args``/``**kwargs``, try/except/finally with raises, ``with`` blocks, generator
expressions, comprehensions, tuple swaps, ``.item()`` and ``print`` (graph breaks), and side effects
on module state (a dict, a list, an object's attributes, a global read after it is rebound).

A program is a module source: a fixed prelude (`PRELUDE`), sometimes ``GRAD = True`` (gradients
compared too), and ``def program(x, y, n)`` returning its tensors, ints and floats. Every tensor has the inputs' shape, so any two combine; blocks may
reassign the names defined before them but the names they define stay inside, so every read is of a
defined name.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["GRAD_SHARE", "PRELUDE", "PyProgram", "generate"]

GRAD_SHARE = 0.4
"""The share of programs that set ``GRAD = True``: their inputs require grad and every call also
compares the inputs' gradients (`check.run_calls`), through graph breaks, ``no_grad`` blocks,
``.item()`` and in-place updates of clones."""

PRELUDE = '''import contextlib
import functools
import io

import torch

SINK = io.StringIO()
STATE = {"calls": 0, "log": []}
SCALE = 2.0


class Holder:
    """An object whose attributes the program reads and updates."""

    def __init__(self):
        self.count = 0
        self.bias = 0.5


OBJ = Holder()


def helper(a, b, *rest, scale=1, **extra):
    out = a * scale + b
    for r in rest:
        out = out + r
    return out + extra.get("shift", 0)


def observed():
    """What the program did besides returning: compared after every call."""
    return SINK.getvalue(), repr(STATE), repr(sorted(vars(OBJ).items())), SCALE
'''


@dataclass(frozen=True)
class PyProgram:
    """A generated program: its seed and its module source."""

    seed: int
    source: str


@dataclass
class _Scope:
    tensors: list[str]
    ints: list[str]
    floats: list[str] = field(default_factory=list)
    lists: list[str] = field(default_factory=list)
    dicts: dict[str, list[str]] = field(default_factory=dict)  # name -> keys known present
    fixed: frozenset[str] = frozenset()  # read, never assigned (a while loop's counter)

    def child(self) -> _Scope:
        return _Scope(list(self.tensors), list(self.ints), list(self.floats), list(self.lists),
                      {k: list(v) for k, v in self.dicts.items()}, self.fixed)


class _Builder:
    def __init__(self, rng: random.Random, variety: random.Random | None = None) -> None:
        self.rng = rng
        self.variety = variety or random.Random(rng.random())
        """Draws of newer variants (`nested_def`'s): a stream of its own, so older draws keep their programs."""
        self.counter = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self) -> int:
        return self.rng.choice([-3, -1, 1, 2, 3, 5])

    def small(self) -> int:
        return self.rng.randint(1, 4)

    # --- targets: a new name at the top level, an existing one inside blocks -------------------
    def tensor_target(self, scope: _Scope, nested: bool) -> tuple[str, bool]:
        if nested or (scope.tensors and self.rng.random() < 0.3):
            return self.rng.choice(scope.tensors), False
        return self.name("t"), True

    def int_target(self, scope: _Scope, nested: bool) -> tuple[str, bool]:
        assignable = [name for name in scope.ints if name not in scope.fixed]
        if assignable and (nested or self.rng.random() < 0.3):
            return self.rng.choice(assignable), False
        return self.name("n"), not nested

    def tensor(self, scope: _Scope) -> str:
        return self.rng.choice(scope.tensors)

    def int_(self, scope: _Scope) -> str:
        return self.rng.choice(scope.ints)

    # --- statements: each returns source lines (unindented) -------------------------------------
    def assign_tensor(self, scope: _Scope, nested: bool, expression: str) -> list[str]:
        target, new = self.tensor_target(scope, nested)
        if new:
            scope.tensors.append(target)
        return [f"{target} = {expression}"]

    def assign_int(self, scope: _Scope, nested: bool, expression: str) -> list[str]:
        target, new = self.int_target(scope, nested)
        if new:
            scope.ints.append(target)
        return [f"{target} = {expression}"]

    def tensor_binary(self, scope: _Scope, nested: bool) -> list[str]:
        a, b = self.tensor(scope), self.tensor(scope)
        n = self.int_(scope)
        expression = self.rng.choice([
            f"{a} + {b}", f"{a} - {b} * 0.5", f"{a} * {b}", f"torch.maximum({a}, {b})",
            f"{a} * {n}", f"{a} + {n} * 0.25", f"{a} / (abs({n}) + 1)", f"{a} * SCALE",
            f"{a} + OBJ.bias", f"torch.where({a} > {b}, {a}, -{b})",
        ])
        return self.assign_tensor(scope, nested, expression)

    def tensor_unary(self, scope: _Scope, nested: bool) -> list[str]:
        a = self.tensor(scope)
        expression = self.rng.choice([
            f"{a}.sin()", f"{a}.relu()", f"torch.tanh({a})", f"torch.sigmoid({a})", f"{a}.abs().sqrt()",
            f"{a}.cumsum(0) * 0.1", f"{a}.flip(0)", f"{a} - {a}.mean(0, keepdim=True)", f"{a}.softmax(-1)",
            f"{a}.clamp(-1, 1)", f"({a} * 2).round() / 2",
        ])
        return self.assign_tensor(scope, nested, expression)

    def int_arith(self, scope: _Scope, nested: bool) -> list[str]:
        a = self.int_(scope)
        c = self.const()
        expression = self.rng.choice([
            f"{a} + {c}", f"{a} - {c}", f"{a} * {c}", f"{a} // {c}", f"{a} % {c}", f"-{a}", f"abs({a})",
            f"min({a}, {c})", f"max({a}, {c}) + 1", f"{a} ** 2 % 7", f"int({a} / 2)", f"({a} << 1) ^ {abs(c)}",
        ])
        return self.assign_int(scope, nested, expression)

    def int_from_shapes(self, scope: _Scope, nested: bool) -> list[str]:
        a = self.tensor(scope)
        options = [f"{a}.shape[0] + {self.int_(scope)}", f"{a}.dim()", f"{a}.numel() // 5", f"len({a})"]
        if scope.lists:
            options.append(f"len({self.rng.choice(scope.lists)})")
        target, new = self.int_target(scope, nested)  # (before the choice: seeds keep their programs)
        if new:
            scope.ints.append(target)
        return [f"{target} = {self.rng.choice(options)}"]

    def float_of_tensor(self, scope: _Scope, nested: bool) -> list[str]:
        """A Python float read from tensor data (``item()``: capture breaks the graph or traces it)."""
        a = self.tensor(scope)
        if nested and scope.floats:
            target = self.rng.choice(scope.floats)
        else:
            target = self.name("v")
            if not nested:
                scope.floats.append(target)
        expression = self.rng.choice([f"{a}.sum().item()", f"float({a}.max())", f"{a}.mean().item() * 2"])
        lines = [f"{target} = {expression}"]
        if self.rng.random() < 0.5:
            lines += self.assign_tensor(scope, nested, f"{self.tensor(scope)} * {target}")
        return lines

    def if_int(self, scope: _Scope, nested: bool, depth: int) -> list[str]:
        a = self.int_(scope)
        condition = self.rng.choice([f"{a} > {self.const()}", f"{a} % 2 == 0", f"isinstance({a}, int) and {a} != 0",
                                     f"{a} in (1, 3, 5)", f"not {a}"])
        return self.branches(condition, scope, depth)

    def if_tensor(self, scope: _Scope, nested: bool, depth: int) -> list[str]:
        a = self.tensor(scope)
        condition = self.rng.choice([f"{a}.sum() > 0", f"bool(({a} > 1).any())", f"{a}.mean().item() < 0.1"])
        return self.branches(condition, scope, depth)

    def branches(self, condition: str, scope: _Scope, depth: int) -> list[str]:
        lines = [f"if {condition}:", *self.block(scope.child(), depth + 1)]
        if self.rng.random() < 0.6:
            lines += ["else:", *self.block(scope.child(), depth + 1)]
        return lines

    def for_range(self, scope: _Scope, nested: bool, depth: int) -> list[str]:
        inner = scope.child()
        var = self.name("i")
        inner.ints.append(var)
        bound = self.rng.choice([str(self.small()), f"abs({self.int_(scope)}) % 4", f"{self.tensor(scope)}.shape[0] // 2"])
        return [f"for {var} in range({bound}):", *self.block(inner, depth + 1)]

    def for_list(self, scope: _Scope, nested: bool, depth: int) -> list[str]:
        if not scope.lists:
            return self.make_list(scope, nested)
        inner = scope.child()
        var = self.name("u")
        inner.tensors.append(var)
        source = self.rng.choice(scope.lists)
        inner.lists.remove(source)  # appending to the list being iterated would never end
        header = self.rng.choice([f"for {var} in {source}:", f"for _, {var} in enumerate({source}):",
                                  f"for {var} in reversed({source}):"])
        return [header, *self.block(inner, depth + 1)]

    def while_loop(self, scope: _Scope, nested: bool, depth: int) -> list[str]:
        counter = self.name("k")
        inner = scope.child()
        inner.ints.append(counter)
        inner.fixed = inner.fixed | {counter}
        body = self.block(inner, depth + 1)
        lines = [f"{counter} = 0", f"while {counter} < {self.small()}:", *body, f"    {counter} += 1"]
        if self.rng.random() < 0.3:
            lines[2:2] = [f"    if {counter} == 2:", "        break"]
        return lines

    def make_list(self, scope: _Scope, nested: bool) -> list[str]:
        if nested and scope.lists:
            return [f"{self.rng.choice(scope.lists)}.append({self.tensor(scope)})"]
        name = self.name("L")
        items = ", ".join(self.tensor(scope) for _ in range(self.rng.randint(1, 3)))
        if not nested:
            scope.lists.append(name)
        return [f"{name} = [{items}]"]

    def use_list(self, scope: _Scope, nested: bool) -> list[str]:
        if not scope.lists:
            return self.make_list(scope, nested)
        name = self.rng.choice(scope.lists)
        n = self.int_(scope)
        choice = self.rng.randrange(6)
        if choice == 0:
            return [f"{name}.append({self.tensor(scope)} * 2)"]
        if choice == 1 and not nested:
            return [f"{name} = [u + 1 for u in {name}]"]
        expression = [f"{name}[-1]", f"{name}[{n} % len({name})]", f"sum({name})", f"torch.stack({name}).mean(0)",
                      f"sum(u * j for j, u in enumerate({name}))", f"{name}[0]"][choice]
        return self.assign_tensor(scope, nested, expression)

    def use_dict(self, scope: _Scope, nested: bool) -> list[str]:
        if not scope.dicts or (not nested and self.rng.random() < 0.2):
            if nested:
                return self.tensor_unary(scope, nested)
            name = self.name("D")
            scope.dicts[name] = ["a"]
            return [f'{name} = {{"a": {self.tensor(scope)}}}']
        name = self.rng.choice(list(scope.dicts))
        keys = scope.dicts[name]
        choice = self.rng.randrange(4)
        if choice == 0:
            key = self.rng.choice(["a", "b", "c"])
            if not nested and key not in keys:
                keys.append(key)
            return [f'{name}["{key}"] = {self.tensor(scope)}']
        if choice == 1:
            return self.assign_tensor(scope, nested, f'{name}.get("{self.rng.choice(["a", "z"])}", {self.tensor(scope)})')
        if choice == 2:
            return self.assign_tensor(scope, nested, f'{name}["{self.rng.choice(keys)}"] * 2')
        target = self.tensor(scope)
        return [f"for key_, value_ in {name}.items():", f"    {target} = {target} + value_ * len(key_)"]

    def closure(self, scope: _Scope, nested: bool) -> list[str]:
        fn = self.name("f")
        n = self.int_(scope)
        kind = self.rng.randrange(4)
        if kind == 0:
            lines = [f"def {fn}(a, s={self.const()}):", f"    return a * s + {n}"]
        elif kind == 1:
            cell = self.name("cell")
            lines = [f"{cell} = [0]", f"def {fn}(a):", f"    {cell}[0] += 1", f"    return a + {cell}[0]"]
        elif kind == 2:
            lines = [f"{fn} = lambda a: a * {self.const()} + {n}"]
        else:
            lines = [f"{fn} = functools.partial(torch.add, alpha={self.const()})"]
            return lines + self.assign_tensor(scope, nested, f"{fn}({self.tensor(scope)}, {self.tensor(scope)})")
        return lines + self.assign_tensor(scope, nested, f"{fn}({self.tensor(scope)})")

    def nested_def(self, scope: _Scope, nested: bool) -> list[str]:
        """A closure over a counter it rebinds (``nonlocal``), called twice; its body sometimes breaks the graph
        (``print``, a branch on ``.item()``, ``float()``) and its calls (or its whole definition) sometimes sit in
        ``with torch.no_grad():`` or ``try:``, where resume functions run over the cells of each call.

        The variants are drawn from `variety`, a second stream of the seed, so every other statement of a
        program (and every program without a nested def) stays what it was."""
        outer, inner, total = self.name("g"), self.name("h"), self.name("total")
        pick = self.variety
        body = [f"nonlocal {total}", f"{total} += 1"]
        graph_break = pick.choice([None, None, "print", "item", "float"])
        if graph_break == "print":
            body.append(f'print("{inner}", {total}, file=SINK)')
        elif graph_break == "item":
            body += ["if b.sum().item() > 0:", f"    {total} += 1"]
        elif graph_break == "float":
            body.append('STATE["log"].append(round(float(b.sum()), 2))')
        definition = [f"def {inner}(b):", *("    " + line for line in body), f"    return b * {total}"]
        call = [f"return {inner}({inner}(a))"]
        block = pick.choice([None, None, "no_grad", "try"])
        around_all = pick.random() < 0.3
        inside = definition + call if around_all else call
        if block == "no_grad":
            inside = ["with torch.no_grad():", *("    " + line for line in inside)]
        elif block == "try":
            inside = ["try:", *("    " + line for line in inside), "except ValueError:", "    return a"]
        function = inside if around_all else definition + inside
        lines = [f"def {outer}(a):", f"    {total} = 0", *("    " + line for line in function)]
        return lines + self.assign_tensor(scope, nested, f"{outer}({self.tensor(scope)})")

    def star_call(self, scope: _Scope, nested: bool) -> list[str]:
        a, b, c = self.tensor(scope), self.tensor(scope), self.tensor(scope)
        n = self.int_(scope)
        expression = self.rng.choice([
            f"helper({a}, {b})", f"helper(*[{a}, {b}, {c}], scale={n})", f"helper({a}, {b}, **{{'shift': {n}}})",
            f"helper(*({a}, {b}), scale=2, shift=1)",
        ])
        return self.assign_tensor(scope, nested, expression)

    def side_effect(self, scope: _Scope, nested: bool) -> list[str]:
        n = self.int_(scope)
        return [self.rng.choice([
            'STATE["calls"] += 1', f'STATE["log"].append({n})', f"OBJ.count += {n}",
            f'print("n is", {n}, file=SINK)', f'STATE["log"].append(f"{{{n}}}-{self.const()}")',
            f'STATE["log"].append(round(float({self.tensor(scope)}.sum()), 2))',
        ])]

    def try_block(self, scope: _Scope, nested: bool, depth: int) -> list[str]:
        n = self.int_(scope)
        body = self.block(scope.child(), depth + 1)
        lines = ["try:", f"    if {n} > {self.const()}:", f"        raise ValueError({n})", *body]
        lines += ["except ValueError as error:", '    STATE["log"].append(str(error))']
        if self.rng.random() < 0.5:
            lines += ["finally:", '    STATE["calls"] += 1']
        return lines

    def with_block(self, scope: _Scope, nested: bool, depth: int) -> list[str]:
        manager = self.rng.choice(["torch.no_grad()", "contextlib.nullcontext()", "torch.enable_grad()"])
        return [f"with {manager}:", *self.block(scope.child(), depth + 1)]

    def swap(self, scope: _Scope, nested: bool) -> list[str]:
        if len(scope.tensors) < 2:
            return self.tensor_unary(scope, nested)
        a, b = self.rng.sample(scope.tensors, 2)
        return [f"{a}, {b} = {b}, {a}"]

    def in_place(self, scope: _Scope, nested: bool) -> list[str]:
        a, b = self.tensor(scope), self.tensor(scope)
        target, new = self.tensor_target(scope, nested)
        lines = [f"{target} = {a}.clone()", self.rng.choice([f"{target}.add_({b})", f"{target}[0] = {self.int_(scope)}",
                                                            f"{target}.mul_(0.5)"])]
        if new:
            scope.tensors.append(target)
        return lines

    # --- composition ------------------------------------------------------------------------------
    def statement(self, scope: _Scope, depth: int, nested: bool) -> list[str]:
        simple: list[tuple[Callable[[_Scope, bool], list[str]], float]] = [
            (self.tensor_binary, 3), (self.tensor_unary, 2), (self.int_arith, 2), (self.int_from_shapes, 1),
            (self.float_of_tensor, 0.6), (self.use_list, 1.2), (self.make_list, 0.6), (self.use_dict, 1),
            (self.closure, 1), (self.nested_def, 0.4), (self.star_call, 0.8), (self.side_effect, 1),
            (self.swap, 0.4), (self.in_place, 0.6),
        ]
        blocks: list[tuple[Callable[[_Scope, bool, int], list[str]], float]] = [
            (self.if_int, 1.2), (self.if_tensor, 0.6), (self.for_range, 0.8), (self.for_list, 0.6),
            (self.while_loop, 0.5), (self.try_block, 0.5), (self.with_block, 0.5),
        ]
        if depth < 2 and self.rng.random() < 0.3:
            fn = self.rng.choices([f for f, _ in blocks], [w for _, w in blocks])[0]
            return fn(scope, nested, depth)
        simple_fn = self.rng.choices([f for f, _ in simple], [w for _, w in simple])[0]
        return simple_fn(scope, nested)

    def block(self, scope: _Scope, depth: int) -> list[str]:
        lines: list[str] = []
        for _ in range(self.rng.randint(1, 3)):
            lines += self.statement(scope, depth, nested=True)
        return ["    " + line for line in lines]


def generate(seed: int, max_statements: int = 12) -> PyProgram:
    """The program of `seed`."""
    rng = random.Random(seed)
    builder = _Builder(rng, random.Random(f"variety-{seed}"))
    scope = _Scope(tensors=["x", "y"], ints=["n"])
    body: list[str] = []
    for _ in range(rng.randint(3, max_statements)):
        body += builder.statement(scope, 0, nested=False)
    results = f"[{', '.join(scope.tensors)}], [{', '.join(scope.ints)}], [{', '.join(scope.floats)}]"
    lines = ["def program(x, y, n):", *("    " + line for line in body), f"    return {results}"]
    # Drawn from a stream of its own, so every program keeps its statements.
    if random.Random(f"grad-{seed}").random() < GRAD_SHARE:
        lines = ["GRAD = True", "", "", *lines]
    return PyProgram(seed, PRELUDE + "\n\n" + "\n".join(lines) + "\n")
