"""Compiling a `GuardSet` into one fast check function.

The generated ``check(L, G, C) -> bool`` is a flat list of statements, one per guard, with three
speed-ups that keep it exactly as strict as checking every guard on its own:

- Module trees: a submodule, parameter or buffer reached from a guarded module through its
  `_modules` / `_parameters` / `_buffers` dicts (``L[0].encoder.layer[3].attention``) is an *edge*
  (parent, dict, key, child). All edges are checked at once (``list(map(dict.get, dicts, keys)) ==
  children``, C-speed), and so are all `training` flags and the parameters' requires_grad/dtype/device.
  Once that passes, every such path IS the recorded object, so other guards use the object directly
  instead of walking `nn.Module.__getattr__` chains.
- Common sub-paths (``G['registry']._global_mapping``) are computed once into a local.
- Cheap, likely-to-fail checks come first: grad mode, then the arguments' tensors (and autocast).

Guards are pure and failures (exceptions included) make the whole check False, so the order in
which they are evaluated does not change the result.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.hooks import RemovableHandle

from capture.sources import AttrSource, ItemSource, Source

if TYPE_CHECKING:
    from capture.guards import Guard

GuardFn = Callable[[Any, Any, Any], bool]
_TREE_KINDS = ("ID_MATCH", "MODULE_TRAINING", "PARAM_MATCH")
_FIRST_KINDS = ("GRAD_MODE", "AUTOCAST_MODE", "TENSOR_MATCH", "TYPE_MATCH", "LENGTH", "ID_MATCH")
_TENSOR_STATE = operator.attrgetter("requires_grad", "dtype", "device")
HOOK_DICTS = tuple(name for name in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
                   if hasattr(torch.nn.Module(), name))
module_hooks = operator.attrgetter(*HOOK_DICTS)
"""A module's hook dicts (forward, forward-pre, backward, backward-pre): what a MODULE_HOOKS guard compares."""


def tensor_state(value: torch.Tensor) -> tuple[Any, ...]:
    """What a parameter/buffer guard compares besides identity: (requires_grad, dtype, device).

    The batched module-tree check compares requires_grad of every tensor and dtype/device of one
    tensor per owning module (see `_tree_checks`).
    """
    return _TENSOR_STATE(value)


@dataclass
class ModuleFacts:
    """What per-module guards check, by guard code, so the checks of tree modules can be batched."""

    hooks: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = field(default_factory=dict)
    """MODULE_HOOKS guard code -> the module's hook dicts, and copies of them when traced."""
    absent: dict[str, str] = field(default_factory=dict)
    """NO_ATTRIBUTE guard code -> the attribute name missing from the object's instance `__dict__`."""


@dataclass
class _Edge:
    child_expr: str
    parent_object: object
    parent: str  # the parent module's expression
    slot: str  # "_modules", "_parameters" or "_buffers"
    key: str
    child: object


@dataclass
class ModuleTree:
    """Objects whose identity the tree check proves, by expression."""

    objects: dict[str, object] = field(default_factory=dict)
    edges: list[_Edge] = field(default_factory=list)
    roots: set[str] = field(default_factory=set)


def _edge_for(source: Source, value: object, parent: object) -> tuple[str, str] | None:
    """(slot, key) when `source` reads `value` out of module `parent`'s registration dicts."""
    if not isinstance(parent, torch.nn.Module):
        return None
    if isinstance(source, AttrSource):
        key = source.attr
        if key in parent.__dict__ or any(key in klass.__dict__ for klass in type(parent).__mro__):
            return None  # an instance or class attribute shadows the registered one
    elif isinstance(source, ItemSource):
        if type(parent) in (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ParameterList) \
                and type(source.key) is int and 0 <= source.key < len(parent._modules if not isinstance(parent, torch.nn.ParameterList) else parent._parameters):
            key = str(source.key)
        elif type(parent) in (torch.nn.ModuleDict, torch.nn.ParameterDict) and type(source.key) is str:
            key = source.key
        else:
            return None
    else:
        return None
    for slot in ("_modules", "_parameters", "_buffers"):
        registered = parent.__dict__.get(slot)
        if registered is not None and key in registered:
            return (slot, key) if registered[key] is value else None
    return None


def module_tree(tracked: dict[str, tuple[Source, object]], candidates: set[str]) -> ModuleTree:
    """Which tracked paths are proven by edges from a root (a module whose own identity guard stays).

    `candidates`: the tracked modules that have an identity guard; those not reachable by an edge
    from another tree object are roots.
    """
    tree = ModuleTree()
    pending = dict(tracked)
    while True:
        progress = True
        while progress:
            progress = False
            for expr, (source, value) in list(pending.items()):
                base = getattr(source, "base", None)
                if base is None or base.expr() not in tree.objects:
                    continue
                edge = _edge_for(source, value, tree.objects[base.expr()])
                del pending[expr]
                if edge is not None:
                    tree.objects[expr] = value
                    tree.edges.append(_Edge(expr, tree.objects[base.expr()], base.expr(), edge[0], edge[1], value))
                    progress = True
                elif expr in candidates:
                    tree.objects[expr] = value
                    tree.roots.add(expr)
                    progress = True
        new_roots = [expr for expr in candidates if expr in pending
                     and (getattr(pending[expr][0], "base", None) is None
                          or pending[expr][0].base.expr() not in pending)]  # type: ignore[attr-defined]
        if not new_roots:
            return tree
        for expr in new_roots:
            tree.objects[expr] = pending.pop(expr)[1]
            tree.roots.add(expr)


_ROOTS: set[str] = {"L", "G", "C"}


def _is_path(node: ast.AST, roots: set[str] = _ROOTS) -> bool:
    """A side-effect-free read of an argument, global, cell or constant (never of a name the guard code
    assigns, such as ``__t``): attributes, constant subscripts, getattr(x, 'c'), d.get(consts)."""
    if isinstance(node, ast.Name):
        return node.id in roots
    if isinstance(node, ast.Attribute):
        return _is_path(node.value, roots)
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and _is_path(node.value, roots)
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) == 2:
            return isinstance(node.args[1], ast.Constant) and _is_path(node.args[0], roots)
        if isinstance(func, ast.Attribute) and func.attr == "get" and _is_path(func.value, roots):
            return all(isinstance(a, ast.Constant) or _is_path(a, roots) for a in node.args)
    return False


class _Rewriter:
    """Replaces proven module paths by constants and hoists repeated paths into locals."""

    def __init__(self, proven: dict[str, str], counts: dict[str, int], roots: set[str]) -> None:
        self.roots = roots
        self.proven = proven  # ast.dump of an expression -> constant name of its object
        self.counts = counts
        self.locals: dict[str, str] = {}
        self.statements: list[str] = []

    def rewrite(self, node: ast.expr, hoist: bool = True) -> ast.expr:
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Name)):
            key = ast.dump(node)
            if key in self.proven:
                return ast.Name(self.proven[key], ast.Load())
            if key in self.locals:
                return ast.Name(self.locals[key], ast.Load())
            if hoist and not isinstance(node, ast.Name) and self.counts.get(key, 0) > 1 and _is_path(node, self.roots):
                inner = self._children(node, hoist)
                name = f"_p{len(self.locals)}"
                self.statements.append(f"{name} = {ast.unparse(inner)}")
                self.locals[key] = name
                return ast.Name(name, ast.Load())
        return self._children(node, hoist)

    def _children(self, node: ast.expr, hoist: bool) -> ast.expr:
        # Operands that may not be evaluated (after `or`, in conditionals, lambdas, comprehensions)
        # are never hoisted: evaluating them early could raise where the original did not.
        conditional = isinstance(node, (ast.IfExp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                                         ast.GeneratorExp)) or (isinstance(node, ast.BoolOp)
                                                                and isinstance(node.op, ast.Or))
        for name, value in ast.iter_fields(node):
            if isinstance(value, ast.expr):
                setattr(node, name, self.rewrite(value, hoist and not conditional))
            elif isinstance(value, list):
                setattr(node, name, [self.rewrite(v, hoist and not conditional) if isinstance(v, ast.expr) else v
                                     for v in value])
        return node


def _count_paths(trees: list[ast.expr], roots: set[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)) and _is_path(node, roots):
                key = ast.dump(node)
                counts[key] = counts.get(key, 0) + 1
    return counts


def compile_guard_function(guards: list[Any], constants: dict[str, object],
                           tracked: dict[str, tuple[Source, object]], namespace: dict[str, Any],
                           constant_values: dict[str, tuple[Source, object]] | None = None,
                           facts: ModuleFacts | None = None) -> GuardFn:
    """The fast check for `guards` (see the module docstring).

    `tracked`: expr -> (source, object) of modules/parameters/buffers guarded by identity;
    `constant_values`: expr -> (source, value) of CONSTANT_MATCH guards;
    `facts`: what the MODULE_HOOKS and NO_ATTRIBUTE guards compare.
    """
    candidates = {g.source_expr for g in guards if g.kind == "ID_MATCH" and g.source_expr in tracked
                  and isinstance(tracked[g.source_expr][1], torch.nn.Module)}
    tree = module_tree(tracked, candidates)
    roots = tree.roots
    names: dict[str, Any] = dict(namespace)
    names.update(constants)
    lines: list[str] = []

    def constant(value: object) -> str:
        name = f"_g{len(names)}"
        names[name] = value
        return name

    proven: dict[str, str] = {}
    for expr, value in tree.objects.items():
        if expr not in roots:
            proven[ast.dump(ast.parse(expr, mode="eval").body)] = constant(value)
    tree_checks = _tree_checks(tree, guards, constant)
    batched = _module_attribute_constants(tree, guards, constant_values or {})
    if batched:
        objects, names_, values = zip(*batched.values(), strict=True)
        got = f"list(map(getattr, {constant(list(objects))}, {constant(list(names_))}))"
        tree_checks.append(f"_a = {got}")
        tree_checks.append(f"if _a != {constant(list(values))} or list(map(type, _a)) != "
                           f"{constant([type(v) for v in values])}: return False")
    per_module = _per_module_checks(tree, guards, facts or ModuleFacts(), constant, tree_checks)
    remaining = [g for g in guards if not _implied_by_tree(g, tree) and id(g) not in per_module
                 and not (g.kind == "CONSTANT_MATCH" and g.source_expr in batched)]
    # Grad mode first: the cheapest check, and the one that tells apart the entries a training
    # loop compiles (an inference entry is tried first on every training step, and the reverse).
    modes = [g for g in remaining if g.kind in ("GRAD_MODE", "DEFAULT_DTYPE")]
    first = [g for g in remaining if g.kind in _FIRST_KINDS and g.source_expr.startswith("L[")]
    first += [g for g in remaining if g.kind == "AUTOCAST_MODE"]
    placed = {id(g) for g in modes + first}
    rest = [g for g in remaining if id(g) not in placed]
    seen: set[str] = set()

    def parse(batch: list[Any]) -> list[ast.expr]:
        trees = []
        for guard in batch:
            if guard.code not in seen:
                seen.add(guard.code)
                trees.append(ast.parse(guard.code, mode="eval").body)
        return trees

    mode_trees, first_trees, rest_trees = parse(modes), parse(first), parse(rest)
    roots_names = _ROOTS | {name for name in names if not name.startswith("__t")}
    rewriter = _Rewriter(proven, _count_paths(mode_trees + first_trees + rest_trees, roots_names), roots_names)
    for batch, checks in ((mode_trees, []), (first_trees, tree_checks), (rest_trees, [])):
        for node in batch:
            rewritten = rewriter.rewrite(node)
            lines += rewriter.statements
            rewriter.statements = []
            lines.append(f"if not ({ast.unparse(rewritten)}): return False")
        lines += checks
    body = "".join(f"        {line}\n" for line in lines)
    source = f"def check(L, G, C):\n    try:\n{body}        return True\n    except Exception:\n        return False\n"
    exec(compile(source, "<capture guards>", "exec"), names)
    check: GuardFn = names["check"]
    check.__kiln_source__ = source  # type: ignore[attr-defined]
    return check


def _per_module_checks(tree: ModuleTree, guards: list[Any], facts: ModuleFacts, constant: Callable[[object], str],
                       lines: list[str]) -> set[int]:
    """Hook and missing-attribute guards of tree objects as one C-level pass each; returns the guards covered."""
    hooks = [g for g in guards if g.kind == "MODULE_HOOKS" and g.source_expr in tree.objects and g.code in facts.hooks]
    # Hooks are added to and removed from a module's own hook dicts (registration never replaces them),
    # so the dicts are read once here: most are empty, the others compare by contents.
    pairs = [pair for g in hooks for pair in zip(*facts.hooks[g.code], strict=True)]
    empty = [live for live, copy in pairs if not copy]
    if empty:
        seen = constant([RemovableHandle.next_id])
        lines.append(f"if {seen}[0] != {constant(RemovableHandle)}.next_id and not "
                     f"{constant(still_empty)}({seen}, {constant(empty)}): return False")
    held = [(live, copy) for live, copy in pairs if copy]
    if held:
        lines.append(f"if {constant([live for live, _ in held])} != {constant([copy for _, copy in held])}: "
                     "return False")
    absent = [g for g in guards if g.kind == "NO_ATTRIBUTE" and g.source_expr in tree.objects and g.code in facts.absent
              and isinstance(getattr(tree.objects[g.source_expr], "__dict__", None), dict)]
    if absent:
        # An instance `__dict__` stays the same dict object for the object's life.
        dicts = constant([tree.objects[g.source_expr].__dict__ for g in absent])
        lines.append(f"if any(map({constant(operator.contains)}, {dicts}, "
                     f"{constant([facts.absent[g.code] for g in absent])})): return False")
    return {id(g) for g in hooks + absent}


def still_empty(seen: list[int], dicts: list[dict[Any, Any]]) -> bool:
    """True when every dict in `dicts` is empty; then remembers the hook registrations counted so far.

    Every hook registration (`register_forward_hook`, ..., also on tensors) takes a new
    `RemovableHandle` id, so while `RemovableHandle.next_id` stays at the count last seen no hook
    dict can have gained an entry, and the check is one comparison.
    """
    count = RemovableHandle.next_id  # read first: a hook registered meanwhile is seen on the next call
    if any(dicts):
        return False
    seen[0] = count
    return True


def _implied_by_tree(guard: Guard, tree: ModuleTree) -> bool:
    """True when the batched tree checks cover `guard` (the same object the tree proves, by id)."""
    expr = guard.source_expr
    if expr not in tree.objects:
        return False
    if guard.kind == "MODULE_TRAINING":
        return True
    same = f"id({expr}) == {id(tree.objects[expr])}"
    if guard.kind == "ID_MATCH":
        return expr not in tree.roots and guard.code == same
    return guard.kind == "PARAM_MATCH" and guard.code.startswith(same + " and ")


def _module_attribute_constants(tree: ModuleTree, guards: list[Any],
                                constant_values: dict[str, tuple[Source, object]]) -> dict[str, tuple[object, str, object]]:
    """CONSTANT_MATCH guards on plain attributes of tree modules: expr -> (module, attribute, value)."""
    batched: dict[str, tuple[object, str, object]] = {}
    for guard in guards:
        known = constant_values.get(guard.source_expr) if guard.kind == "CONSTANT_MATCH" else None
        if known is None:
            continue
        source, value = known
        if isinstance(source, AttrSource) and source.base.expr() in tree.objects and \
                type(value) in (bool, int, float, str, type(None)) and \
                not (type(value) is float and (value != value or value == 0.0)):  # NaN, and a zero's sign
            batched[guard.source_expr] = (tree.objects[source.base.expr()], source.attr, value)
    return batched


def _tree_checks(tree: ModuleTree, guards: list[Any], constant: Callable[[object], str]) -> list[str]:
    """The batched checks of a module tree: edges, training flags, tensor states."""
    lines = _module_state_checks(tree, guards, constant)
    exprs = [g.source_expr for g in guards if g.kind == "PARAM_MATCH" and _implied_by_tree(g, tree)]
    tensors: list[Any] = [tree.objects[expr] for expr in exprs]
    # Only floating-point and complex tensors can require grad (`requires_grad_()` on an integer
    # tensor raises), so integer buffers such as BatchNorm's `num_batches_tracked` are skipped.
    differentiable = [t for t in tensors if t.is_floating_point() or t.is_complex()]
    if differentiable:
        getter = constant(operator.attrgetter("requires_grad"))
        flags = constant([t.requires_grad for t in differentiable])
        lines.append(f"if list(map({getter}, {constant(differentiable)})) != {flags}: return False")
    if tensors:
        samples = _placement_samples(tree, set(exprs))
        dtypes = constant([t.dtype for t in samples])
        lines.append(f"if list(map({constant(operator.attrgetter('dtype'))}, {constant(samples)})) != {dtypes}: "
                     "return False")
        # `is_cpu` (a bool) is much cheaper than `device` (a new torch.device each read): CPU samples
        # only need to still be on the CPU; others compare their whole device (type and index).
        for attribute, group in (("is_cpu", [t for t in samples if t.is_cpu]),
                                 ("device", [t for t in samples if not t.is_cpu])):
            if group:
                read = operator.attrgetter(attribute)
                expected = constant([read(t) for t in group])
                lines.append(f"if list(map({constant(read)}, {constant(group)})) != {expected}: return False")
    return lines


def _placement_samples(tree: ModuleTree, guarded: set[str]) -> list[Any]:
    """One tensor per owning module whose dtype and device stand for all its guarded tensors.

    dtype/device change in place only through `Module._apply` (`.to()`, `.half()`, `.cuda()`, ...),
    which converts all of a module's parameters and buffers alike: device moves convert every
    tensor, dtype casts every floating-point (and complex) one and no integer one. So a floating
    tensor of the module, when it has one, stands for all of them; otherwise any of its tensors.
    """
    samples: dict[int, Any] = {}
    for edge in tree.edges:
        if edge.child_expr not in guarded:
            continue
        owner = id(edge.parent_object)
        current = samples.get(owner)
        floating = edge.child.is_floating_point() or edge.child.is_complex()  # type: ignore[attr-defined]
        if current is None or (floating and not (current.is_floating_point() or current.is_complex())):
            samples[owner] = edge.child
    return list(samples.values())


def _compares_by_identity(value: object) -> bool:
    """True when a replacement of `value` cannot compare equal to it (so `==` on a dict holding it is exact).

    A one-element tensor compares (and converts to bool) by value: a new parameter holding the same
    number would pass `==`, so such children get their own identity check. Modules, None and other
    tensors (their `==` result cannot be converted to bool, which fails the check) are safe.
    """
    if value is None:
        return True
    if isinstance(value, torch.Tensor):
        return value.numel() != 1
    return isinstance(value, torch.nn.Module) and type(value).__eq__ is object.__eq__


def _module_state_checks(tree: ModuleTree, guards: list[Any], constant: Callable[[object], str]) -> list[str]:
    """Training flags and edges: one C-level pass per attribute over the tree's modules.

    For each registration dict (`_modules`, `_parameters`, `_buffers`) that edges go through, the
    owners' current dicts are compared with copies taken at compile time: `==` on dicts checks
    every entry (identity first, in C) whether or not the dict object was replaced. This is
    stricter than checking only the guarded keys: adding or replacing an unused entry of such a
    dict recompiles too.
    """
    training = [(tree.objects[g.source_expr], g.code.endswith("True")) for g in guards
                if g.kind == "MODULE_TRAINING" and g.source_expr in tree.objects]
    lines: list[str] = []
    if training:
        modules, flags = constant([m for m, _ in training]), constant([flag for _, flag in training])
        lines.append(f"if list(map({constant(operator.attrgetter('training'))}, {modules})) != {flags}: return False")
    owners: dict[str, dict[int, object]] = {}
    for edge in tree.edges:
        owners.setdefault(edge.slot, {})[id(edge.parent_object)] = edge.parent_object
    for slot, by_id in sorted(owners.items()):
        objects = list(by_id.values())
        copies = [dict(owner.__dict__[slot]) for owner in objects]  # type: ignore[attr-defined]
        getter = constant(operator.attrgetter(slot))
        lines.append(f"if list(map({getter}, {constant(objects)})) != {constant(copies)}: return False")
    risky = [edge for edge in tree.edges if not _compares_by_identity(edge.child)]
    if risky:
        parents, slot_names = constant([e.parent_object for e in risky]), constant([e.slot for e in risky])
        keys, children = constant([e.key for e in risky]), constant([e.child for e in risky])
        lines.append(f"if not all(map({constant(operator.is_)}, map(dict.get, map(getattr, {parents}, {slot_names}), "
                     f"{keys}), {children})): return False")
    return lines
