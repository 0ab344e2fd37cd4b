"""The differential fuzzer's own logic: generator, comparison rules, program edits and the shrinker.

Compiler-free and fast: the "compiler" in the shrinker tests is a fake that is wrong on one op
(multiplication), so the shrinker must boil a larger program down to that one op.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

from tools.fuzz import harness
from tools.fuzz.compare import RunOutcome, compare, compare_tensors
from tools.fuzz.edit import bypass, drop_output, remove_unused
from tools.fuzz.execute import eager_depends_on_layout, load, precision_floor, run_eager
from tools.fuzz.generator import GenConfig, check_eager, generate
from tools.fuzz.program import Leaf, Param, Program, Stmt, render
from tools.fuzz.report import (
    Finding,
    failure_class,
    innermost_error,
    known_bug_tags,
    owner_guess,
    pytest_source,
    signature,
)
from tools.fuzz.runner import coarse_key
from tools.fuzz.shrink import shrink

ROOT = Path(__file__).resolve().parent.parent

SEEDS = range(40)


@pytest.fixture(scope="module")
def programs() -> list[Program]:
    return [generate(seed) for seed in SEEDS]


# ----- generator ---------------------------------------------------------------------------------
def test_generation_is_a_function_of_the_seed(programs: list[Program]) -> None:
    for seed in (0, 7, 23):
        assert generate(seed).to_json() == programs[seed].to_json()


def test_programs_are_well_typed(programs: list[Program]) -> None:
    """Eager runs every program, or raises only where a statement was generated to raise."""
    for program in programs[:15]:
        error = check_eager(program)
        assert error is None or any(s.may_raise for s in program.stmts), (program.seed, error)


def test_programs_round_trip_through_json(programs: list[Program]) -> None:
    for program in programs:
        assert Program.from_json(program.to_json()) == program


def test_grammar_covers_the_ground(programs: list[Program]) -> None:
    """Forty seeds already use most rule families, many dtypes, every mode and non-trivial layouts."""
    ops = Counter(op for p in programs for op in p.ops())
    dtypes = {leaf.dtype for p in programs for leaf in p.leaves}
    assert len(ops) >= 40, ops
    assert {"float32", "int64", "bool"} <= dtypes and len(dtypes) >= 7, dtypes
    assert {p.mode for p in programs} == {"no_grad", "grad", "double"}
    assert any(p.view != "{0}" for program in programs for p in program.params)
    assert any(s.inplace for p in programs for s in p.stmts)


def test_autocast_programs_render_blocks_and_run() -> None:
    """Programs under autocast: the caller's or a block, with disabled runs; eager runs them, a
    matmul is bfloat16 where autocast applies and float32 inside an enabled=False block."""
    config = GenConfig(autocast_weight=1.0, rules=("matmul", "unary"), max_stmts=4)
    places = set()
    for seed in range(12):
        program = generate(seed, config)
        places.add(program.autocast)
        source = render(program)
        assert (program.autocast == "outside") == ("AUTOCAST = torch.bfloat16" in source)
        assert (program.autocast == "inside") == ('with torch.autocast(DEVICE, dtype=torch.bfloat16):' in source)
        assert any(s.autocast_off for s in program.stmts) == ('torch.autocast(DEVICE, enabled=False)' in source)
        assert Program.from_json(program.to_json()) == program
        error = check_eager(program)
        assert error is None or any(s.may_raise for s in program.stmts), (seed, error)
    assert places == {"outside", "inside"}
    matmul = Stmt("t1", "matmul", "{0} @ {0}", ("a0",))
    for off, dtype in ((False, torch.bfloat16), (True, torch.float32)):
        program = _program([dataclasses.replace(matmul, autocast_off=off)], dtype="float32", shape=(4, 4))
        program = dataclasses.replace(program, autocast="inside")
        assert run_eager(program).result["outputs"][0].dtype == dtype
    assert precision_floor(program) == torch.bfloat16


def test_an_autocast_block_without_statements_renders_valid_source() -> None:
    """The shrinker may remove every statement of a program whose body runs under autocast."""
    program = dataclasses.replace(_program([Stmt("t1", "neg", "-{0}", ("a0",))], dtype="float32"), autocast="inside")
    empty = dataclasses.replace(program, stmts=(), outputs=("a0",))
    compile(render(empty), "<empty>", "exec")
    assert check_eager(empty) is None


def test_a_rule_subset_limits_the_grammar() -> None:
    config = GenConfig(rules=("shift",), max_stmts=3)
    for seed in range(5):
        assert {op.split("_")[0] for op in generate(seed, config).ops()} <= {"lshift", "rshift", "reduce"}


@pytest.mark.parametrize("rule", ["special", "order", "scatter", "create", "window"])
def test_each_newer_family_generates_well_typed_programs(rule: str) -> None:
    """Each family, alone, yields programs of its own ops that eager runs."""
    config = GenConfig(rules=(rule,), max_stmts=4, autocast_weight=0.0)
    ops: set[str] = set()
    for seed in range(12):
        program = generate(seed, config)
        ops.update(program.ops())
        error = check_eager(program)
        assert error is None or any(s.may_raise for s in program.stmts), (seed, error)
    assert len(ops - {"reduce_output"}) >= 4, ops


def test_order_statistics_skip_indices_decided_by_ties() -> None:
    """An index (or a gradient) that a tie decides is never generated: ties are equal elements of a
    row along the dimension, -0.0 and 0.0 or two NaNs included."""
    from tools.fuzz.rules_order import _ties_along

    assert _ties_along(torch.tensor([[1.0, 2.0, 1.0], [0.0, 3.0, 4.0]]), 1)
    assert not _ties_along(torch.tensor([[1.0, 2.0, 1.0], [0.0, 3.0, 4.0]]), 0)
    assert _ties_along(torch.tensor([-0.0, 0.0]), 0)
    assert _ties_along(torch.tensor([float("nan"), 1.0, float("nan")]), 0)


@pytest.mark.parametrize("expanded", [True, False])
def test_order_statistics_skip_medians_along_expanded_dims(monkeypatch: pytest.MonkeyPatch, expanded: bool) -> None:
    """Eager's CPU median/nanmedian along a stride-0 dim returns uninitialized memory (garbage that no
    compiler can match): such a statement is not generated; along a dense dim it is."""
    import random

    from tools.fuzz import rules_order
    from tools.fuzz.builder import Builder

    monkeypatch.setattr(rules_order, "SORTS", tuple(s for s in rules_order.SORTS if s[0] in ("median_values", "nanmedian")))
    monkeypatch.setattr(rules_order, "_dim", lambda b, n: 1)
    added = 0
    for seed in range(20):
        b = Builder(random.Random(seed), "no_grad", seed)
        x = torch.randn(3, 1, generator=torch.Generator().manual_seed(seed))
        b.values["a0"] = x.expand(3, 7) if expanded else x.expand(3, 7).contiguous()
        rules_order.order(b)
        added += sum("median" in s.op for s in b.stmts)
    assert (added == 0) if expanded else (added > 0)


def test_reference_rendering_is_float64() -> None:
    program = _program([Stmt("t1", "cast", "{0}.to(torch.float16)", ("a0",))], dtype="float32")
    assert "torch.float16" in render(program) and "torch.float16" not in render(program, ref=True).split("def program")[1]
    assert precision_floor(program) == torch.float16


def test_inputs_are_made_on_the_target_device() -> None:
    """The cuda target's inputs live on the GPU with the CPU's values (the meta device stands in here)."""
    program = _program([Stmt("t1", "mul", "{0} * 3", ("a0",))], dtype="float32")
    leaves, args = load(program, device="meta")["make_inputs"]()
    assert all(t.device.type == "meta" for t in [*leaves, *args])
    assert load(program)["make_inputs"]()[0][0].device.type == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_cuda_target_checks_programs_on_the_gpu() -> None:
    from tools.fuzz.execute import check

    verdicts = [check(generate(seed, GenConfig(rules=("unary", "binary", "reduction"))), "cuda") for seed in range(3)]
    assert [v.kind for v in verdicts] == ["ok"] * 3, verdicts


# ----- comparison --------------------------------------------------------------------------------
def test_integers_are_exact() -> None:
    e = torch.tensor([1, 2, 3], dtype=torch.uint8)
    assert compare_tensors("x", e, e.clone(), e) is None
    assert "1 of 3" in compare_tensors("x", e, torch.tensor([1, 2, 4], dtype=torch.uint8), e)


def test_integers_decided_by_rounding_are_forgiven() -> None:
    """Where eager disagrees with the float64 run, an integer result was decided by rounding."""
    e, r = torch.tensor([0, 1]), torch.tensor([1, 1])
    assert compare_tensors("x", e, torch.tensor([1, 1]), r) is None
    assert compare_tensors("x", e, torch.tensor([0, 0]), r) is not None


def test_floats_are_judged_against_the_float64_reference() -> None:
    ref = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    eager = (ref + torch.tensor([1e-3, 0, 0], dtype=torch.float64)).float()
    closer = ref.float()  # Kiln nearer the truth than eager: fine
    assert compare_tensors("x", eager, closer, ref) is None
    wrong = torch.tensor([1.0, 2.5, 3.0])
    assert "first at (1,)" in compare_tensors("x", eager, wrong, ref)


def test_an_error_no_larger_than_eagers_worst_is_rounding() -> None:
    """fuzz a3c0be3469: a batch norm's outputs share one mean and variance; Kiln's error (1e-4 at
    most) landed on other positions than eager's (2e-4 at most): rounding, not a bug."""
    ref = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    eager = (ref + torch.tensor([2e-4, 0, 0], dtype=torch.float64)).float()
    assert compare_tensors("x", eager, (ref + torch.tensor([0, 1e-4, 0], dtype=torch.float64)).float(), ref) is None
    assert compare_tensors("x", eager, (ref + torch.tensor([0, 1e-3, 0], dtype=torch.float64)).float(), ref) is not None


def test_nan_positions_must_match() -> None:
    e = torch.tensor([float("nan"), 1.0])
    assert compare_tensors("x", e, e.clone(), e.double()) is None
    assert compare_tensors("x", e, torch.tensor([0.0, 1.0]), e.double()) is not None
    assert compare_tensors("x", torch.tensor([1.0, 1.0]), torch.tensor([float("nan"), 1.0]), None) is not None


def test_dtype_shape_and_missing_gradients() -> None:
    x = torch.ones(2)
    assert "dtype" in compare_tensors("x", x, x.double(), None)
    assert "shape" in compare_tensors("x", x, torch.ones(3), None)
    assert compare_tensors("g", None, torch.zeros(2), None) is None
    assert compare_tensors("g", None, torch.ones(2), None) is not None


def test_exceptions_must_match() -> None:
    raised = RunOutcome.of_exception(IndexError("out of range"))
    fine = RunOutcome({"outputs": [torch.ones(1)], "requires_grad": [False], "args": []})
    assert compare(raised, RunOutcome.of_exception(IndexError("x")), None).ok
    wrapped = RuntimeError("backend failed")
    wrapped.__cause__ = IndexError("index 7 is out of bounds")
    assert compare(raised, RunOutcome.of_exception(wrapped), None).ok
    assert compare(raised, fine, None).kind == "exception_mismatch"
    assert compare(fine, raised, None).kind == "kiln_error"
    other = RunOutcome({"outputs": [torch.ones(1)], "requires_grad": [True], "args": []})
    assert compare(fine, other, None).kind == "mismatch"


def test_harness_runs_all_modes() -> None:
    program = _program([Stmt("t1", "mul", "{0} * {0}", ("a0",))], dtype="float32", requires_grad=True, mode="double")
    result = run_eager(program).result
    assert result is not None and set(result) == {"outputs", "requires_grad", "args", "grads", "grads2"}
    leaf = harness.make_leaf(3, (4,), torch.float32)
    torch.testing.assert_close(result["grads2"][0], 2 * harness.coarse_like(leaf, 1000) * harness.coarse_like(leaf, 2000))


# ----- edits and the shrinker --------------------------------------------------------------------
def _program(stmts: list[Stmt], dtype: str = "float32", requires_grad: bool = False, mode: str = "no_grad",
             outputs: tuple[str, ...] | None = None, shape: tuple[int, ...] = (4,)) -> Program:
    leaves = (Leaf("l0", shape, dtype, seed=3, requires_grad=requires_grad), Leaf("l1", shape, dtype, seed=4))
    params = (Param("a0", "l0"), Param("a1", "l1", "{0}"))
    return Program(0, mode, leaves, params, tuple(stmts), outputs or (stmts[-1].out,))


def test_edits_keep_programs_consistent() -> None:
    stmts = [Stmt("t1", "sin", "torch.sin({0})", ("a0",)), Stmt("t2", "add", "{0} + {1}", ("t1", "a1")),
             Stmt("t3", "unused", "torch.cos({0})", ("a0",))]
    program = _program(stmts, outputs=("t2",))
    assert [s.out for s in remove_unused(program).stmts] == ["t1", "t2"]
    skipped = bypass(program, 0, 0)
    assert [s.render() for s in skipped.stmts] == ["t2 = a0 + a1"]
    two = _program(stmts[:2], outputs=("t2", "t1"))
    assert drop_output(two, 0).outputs == ("t1",) and len(drop_output(two, 0).params) == 1


class _WrongMultiply(TorchFunctionMode):
    """A fake compiler's runtime: every multiplication is off by one."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func in (torch.mul, torch.Tensor.mul, torch.Tensor.__mul__, torch.Tensor.__rmul__):
            return out + 1
        return out


def _fake_kiln(program: Program) -> RunOutcome:
    namespace = load(program)
    fn = namespace["program"]

    def compiled(*args: Any) -> Any:
        with _WrongMultiply():
            return fn(*args)

    try:
        return RunOutcome(harness.run(compiled, namespace["make_inputs"], program.mode))
    except Exception as error:
        return RunOutcome.of_exception(error)


def _fails(program: Program) -> bool:
    if check_eager(program) is not None:
        return False
    return compare(run_eager(program), _fake_kiln(program), run_eager(program, ref=True)).kind == "mismatch"


def test_shrinker_finds_the_one_wrong_op() -> None:
    stmts = [
        Stmt("t1", "sin", "torch.sin({0})", ("a0",)),
        Stmt("t2", "add", "{0} + {1}", ("t1", "a1")),
        Stmt("t3", "inplace_relu_", "{0}.relu_()", ("t2",), inplace=True),
        Stmt("t4", "mul", "{0} * 3", ("t2",)),
        Stmt("t5", "sum", "{0}.sum(0)", ("t4",)),
        Stmt("t6", "exp", "torch.exp({0})", ("a1",)),
    ]
    program = _program(stmts, requires_grad=True, mode="double", outputs=("t5", "t6"), shape=(37, 5))
    assert _fails(program)
    minimal, stats = shrink(program, _fails)
    assert [s.op for s in minimal.stmts] == ["mul"], minimal
    assert minimal.mode == "no_grad" and len(minimal.outputs) == 1 and len(minimal.leaves) == 1
    assert all(s <= 1 for leaf in minimal.leaves for s in leaf.shape)
    assert stats.accepted >= 6


def test_shrinker_respects_its_budget() -> None:
    stmts = [Stmt("t1", "mul", "{0} * 3", ("a0",)), Stmt("t2", "add", "{0} + {1}", ("t1", "a1"))]
    program = _program(stmts)
    _, stats = shrink(program, _fails, max_calls=2)
    assert stats.calls <= 2


# ----- reports -----------------------------------------------------------------------------------
def test_signatures_and_reports() -> None:
    program = _program([Stmt("t1", "mul", "{0} * 3", ("a0",))], dtype="uint8")
    detail = "BackendCompileError: the graph failed (TracingError: ValueError: value 12 of t5 cannot be cast While executing x"
    assert innermost_error(detail) == "ValueError: value N of v cannot be cast"
    assert signature(program, "mismatch", "") == "mismatch | ops=mul | dtypes=uint8 | mode=no_grad"
    assert any("narrow ints" in tag for tag in known_bug_tags(program, "mismatch", "outputs[0]"))
    assert failure_class("crash", "worker died (signal SIGFPE); stderr tail: RuntimeError: x") == "signal SIGFPE"
    assert failure_class("kiln_error", detail) == "ValueError" and failure_class("mismatch", detail) == ""
    structural = coarse_key("cpp", "mismatch", "grads2", "grads2: eager computes 3; Kiln's first-order gradients ...")
    assert structural == coarse_key("cpp", "mismatch", "grads2", "grads2: eager computes 1; Kiln's first-order gradients ...")
    assert coarse_key("cpp", "mismatch", "outputs[0]", "outputs[0]: 1 of 3 values differ") == ""
    assert owner_guess({"eager": "ok", "aot_eager": "ok", "cpp": "mismatch", "triton": "ok"}) == "codegen_cpp"
    assert owner_guess({"eager": "ok", "aot_eager": "mismatch"}) == "aotgrad"
    finding = Finding("sig", "mismatch", "outputs[0]", "values differ", "triton", program, 3, {"cpp": "ok"})
    source = pytest_source(finding)
    compile(source, "test.py", "exec")
    assert "def test_fuzz_" in source and "_triton_on_cpu(monkeypatch)" in source
    gpu = pytest_source(dataclasses.replace(finding, target="cuda"))
    compile(gpu, "test.py", "exec")
    assert 'DEVICE = "cuda"' in gpu and "needs a CUDA device" in gpu
    assert owner_guess({"eager": "ok", "aot_eager": "ok", "cpp": "ok", "triton": "ok", "cuda": "mismatch"}).startswith("codegen_triton on a GPU")


# ----- crash containment -------------------------------------------------------------------------
def test_worker_contains_crashes_and_hangs(tmp_path: Path) -> None:
    """A segfault or a hang costs the worker process only; the verdict names it and the next request works."""
    from tools.fuzz.pool import Worker

    worker = Worker("cpp", tmp_path / "cache", tmp_path / "worker.log", nice=0)
    fine = _program([Stmt("t1", "mul", "{0} * 3", ("a0",))]).to_json()
    sleeper = _program([Stmt("t1", "sleep", '__import__("time").sleep(600) or {0}', ("a0",))]).to_json()
    segfault = _program([Stmt("t1", "crash", '__import__("ctypes").string_at(0) and {0}', ("a0",))]).to_json()
    try:
        assert worker.request({"cmd": "check", "program": fine, "target": "eager"}, timeout=120)[-1]["kind"] == "ok"
        assert worker.request({"cmd": "check", "program": sleeper, "target": "eager"}, timeout=5)[-1]["kind"] == "hang"
        replies = worker.request({"cmd": "check", "program": segfault, "target": "eager"}, timeout=120)
        assert replies[-1]["kind"] == "crash" and "SIGSEGV" in replies[-1]["detail"]  # a fresh worker ran it
    finally:
        worker.close()


def test_a_device_side_assert_skips_the_program_and_restarts_the_worker() -> None:
    from tools.fuzz.execute import _device_assert

    assert _device_assert(RunOutcome.of_exception(RuntimeError("CUDA error: device-side assert triggered")))
    assert not _device_assert(RunOutcome.of_exception(IndexError("index 3 is out of bounds")))
    assert not _device_assert(RunOutcome({"outputs": []}))


# ----- eager's own layout bugs -------------------------------------------------------------------
def _batch_norm_on_a_stepped_weight() -> Program:
    leaves = (Leaf("l0", (1, 33), "float32", seed=5, requires_grad=True), Leaf("l1", (33,), "float32", seed=6),
              Leaf("l2", (33,), "float32", seed=7, fill="positive"), Leaf("l3", (66,), "float32", seed=8),
              Leaf("l4", (33,), "float32", seed=9))
    params = (Param("a0", "l0"), Param("a1", "l1"), Param("a2", "l2"), Param("a3", "l3", "{0}[::2]"), Param("a4", "l4"))
    stmt = Stmt("t5", "batch_norm_eval", "F.batch_norm({0}, {1}, {2}, {3}, {4}, training=False)", ("a0", "a1", "a2", "a3", "a4"))
    return Program(0, "grad", leaves, params, (stmt,), ("t5",))


def test_an_eager_result_that_depends_on_strides_is_eagers_bug() -> None:
    """torch's CPU batch-norm backward reads a stepped weight wrongly: the gradient changes when the
    weight is made contiguous. A Kiln run that matches the contiguous run is not Kiln's mismatch."""
    program = _batch_norm_on_a_stepped_weight()
    namespace = load(program)
    original = namespace["program"]

    def on_contiguous_inputs(*args: Any) -> Any:
        return original(*(a.contiguous() for a in args))

    right = RunOutcome(harness.run(on_contiguous_inputs, namespace["make_inputs"], program.mode))
    eager = run_eager(program)
    if compare(eager, right, None, torch.float32).ok:
        pytest.skip("this torch's batch-norm backward reads a stepped weight correctly")
    assert eager_depends_on_layout(program, right, "cpu", torch.float32)
    assert not eager_depends_on_layout(program, _fake_kiln(program), "cpu", torch.float32)


def test_a_kiln_mismatch_on_strided_inputs_stays_a_mismatch() -> None:
    program = _program([Stmt("t1", "mul", "{0} * 3", ("a1",))], shape=(4, 4))
    program = dataclasses.replace(program, params=(program.params[0], Param("a1", "l1", "{0}.t()")))
    assert not eager_depends_on_layout(program, _fake_kiln(program), "cpu", torch.float32)


# ----- calls at other sizes ----------------------------------------------------------------------
def test_some_programs_are_called_again_at_grown_sizes(programs: list[Program]) -> None:
    grown = [p for p in programs if p.grows]
    assert len(grown) >= 5, "about half the programs should be called at grown sizes too"
    for program in grown[:6]:
        assert program.grows[0] == 1
        for grow in program.grows:
            assert check_eager(program, grow) is None, (program.seed, grow)
    assert Program.from_json(grown[0].to_json()) == grown[0]


def test_a_size_spelled_out_keeps_a_program_at_its_own_sizes() -> None:
    from tools.fuzz.generator import _with_grows

    free = _program([Stmt("t1", "sum", "{0}.sum(1)", ("a0",))], shape=(3, 4))
    spelled = _program([Stmt("t1", "view", "{0}.reshape(4, 3)", ("a0",))], shape=(3, 4))
    assert _with_grows(free, __import__("random").Random(0), 1.0).grows == (1, 3)
    assert _with_grows(spelled, __import__("random").Random(0), 1.0).grows == ()
    assert harness.grown((0, 1, 2, 5), 3) == (0, 1, 5, 8)


def _wrong_where(wrong: Any) -> Any:
    """A fake `run_kiln` whose multiplications are off by one on calls whose first input is `wrong`."""

    def run_kiln(program: Program, target: str, calls: Any) -> list[RunOutcome]:
        namespace = load(program)

        def compiled(*args: Any) -> Any:
            with _WrongMultiply() if wrong(args[0]) else contextlib.nullcontext():
                return namespace["program"](*args)

        return [RunOutcome(harness.run(compiled, namespace["make_inputs"], program.mode, grow=g, relayout=r))
                for g, r in calls]

    return run_kiln


def test_a_wrong_result_at_grown_sizes_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The calls at grown sizes are compared with eager at those sizes: a compiler wrong only after
    its recompile for new sizes is caught, and the verdict names the call."""
    from tools.fuzz import execute

    program = dataclasses.replace(_program([Stmt("t1", "mul", "{0} * 3", ("a0",))], shape=(3, 4)), grows=(1, 3))

    monkeypatch.setattr(execute, "run_kiln", _wrong_where(lambda x: x.shape != (3, 4)))
    verdict = execute.check(program, "eager")
    assert verdict.kind == "mismatch" and verdict.where.startswith("call 3, sizes grown by 1"), verdict
    assert execute.check(dataclasses.replace(program, grows=()), "eager").ok


def test_a_finding_test_repeats_the_calls_at_grown_sizes() -> None:
    program = dataclasses.replace(_program([Stmt("t1", "mul", "{0} * 3", ("a0",))], shape=(3, 4)), grows=(1,))
    source = pytest_source(Finding("sig", "mismatch", "call 3", "values differ", "cpp", program, 1, {"cpp": "mismatch"}))
    namespace: dict[str, Any] = {}
    exec(compile(source, "test.py", "exec"), namespace)
    assert namespace["GROWS"] == (1,) and "*((g, False) for g in GROWS)" in source and not namespace["RELAYOUT"]
    leaves, _ = namespace["make_inputs"](False, 1)
    assert leaves[0].shape == (4, 5)


def test_sizes_where_eager_differs_between_runs_are_not_grown() -> None:
    """torch.lstm does not check its weights' rows against 4 * hidden: grown weights make eager
    read past them, a different answer each run. A program whose eager results differ between two
    runs at grown sizes (here: drawn at random) is not called at those sizes."""
    from tools.fuzz.generator import _eager_repeats, _with_grows

    steady = _program([Stmt("t1", "sum", "{0}.sum(1)", ("a0",))], shape=(3, 4))
    changing = _program([Stmt("t1", "rand", "{0} + torch.rand_like({0})", ("a0",))], shape=(3, 4))
    assert _eager_repeats(steady, 1) and not _eager_repeats(changing, 1)
    assert _with_grows(changing, __import__("random").Random(0), 1.0).grows == ()


def test_a_wrong_result_in_another_memory_layout_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last call takes the same values in another memory layout: a compiler whose kernels kept
    the first call's strides without a guard is caught, and the verdict names the call."""
    from tools.fuzz import execute

    program = dataclasses.replace(_program([Stmt("t1", "mul", "{0} * 3", ("a0",))], shape=(3, 4)), relayout=True)
    assert execute.calls_of(program) == [(0, False), (0, False), (0, True)]
    leaves, _ = load(program)["make_inputs"](False, 0, True)
    assert leaves[0].stride() == (1, 3) and not leaves[0].is_contiguous()

    monkeypatch.setattr(execute, "run_kiln", _wrong_where(lambda x: not x.is_contiguous()))
    verdict = execute.check(program, "eager")
    assert verdict.kind == "mismatch" and verdict.where.startswith("call 3, inputs relaid out"), verdict


def test_some_programs_end_with_a_call_in_another_layout(programs: list[Program]) -> None:
    relaid = [p for p in programs if p.relayout]
    assert relaid, "about a third of the programs with 2-d inputs should end with a relaid-out call"
    for program in relaid[:4]:
        assert check_eager(program, relayout=True) is None, program.seed


def _kiln_on_flushed_inputs(wrong: bool) -> Any:
    """A fake `run_kiln` that reads bfloat16 subnormals as 0, as Triton's interpreter does (and,
    with `wrong`, also gets one comparison the other way round)."""
    from tools.fuzz.execute import _flush_bfloat16_subnormals

    def run_kiln(program: Program, target: str, calls: Any) -> list[RunOutcome]:
        namespace = load(program)

        def compiled(*args: Any) -> Any:
            out = namespace["program"](*(_flush_bfloat16_subnormals(a) for a in args))
            if wrong:
                out = (out[0].flip(-1),)
            return out

        return [RunOutcome(harness.run(compiled, namespace["make_inputs"], program.mode, grow=g, relayout=r))
                for g, r in calls]

    return run_kiln


def test_a_mismatch_from_the_interpreter_reading_subnormals_as_zero_is_not_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton's interpreter (the triton target's CPU tier) reads bfloat16 subnormals as 0; eager and
    GPUs keep them. Such a mismatch is checked by running eager on the inputs with them flushed: it
    matches Kiln there, so it is the interpreter's, not a finding; any other mismatch still is."""
    from tools.fuzz import execute

    program = _program([Stmt("t1", "where", "torch.where({0} != 0, 0.0, -0.125)", ("a0",))], dtype="bfloat16", shape=(64,))
    program = dataclasses.replace(program, leaves=(dataclasses.replace(program.leaves[0], fill="special", seed=5),
                                                   *program.leaves[1:]))
    leaves, _ = load(program)["make_inputs"](False, 0)
    assert ((leaves[0] != 0) & (leaves[0].abs() < torch.finfo(torch.bfloat16).tiny)).any()  # subnormals there
    monkeypatch.setattr(execute, "run_kiln", _kiln_on_flushed_inputs(wrong=False))
    assert execute.check(program, "triton").kind == "interpreter_artifact"
    assert execute.check(program, "cpp").kind == "mismatch"  # only the interpreter tier reads them so
    monkeypatch.setattr(execute, "run_kiln", _kiln_on_flushed_inputs(wrong=True))
    assert execute.check(program, "triton").kind == "mismatch"


_TRUNC_DIVISIONS = r"""
import torch
from tools.fuzz.rules_pointwise import BINARY, trapless_trunc_division

template = dict((name, t) for name, t, _ in BINARY)["div_trunc"]
low32, low64 = torch.iinfo(torch.int32).min, torch.iinfo(torch.int64).min
cases = [
    (torch.full((40,), low32, dtype=torch.int32), torch.full((40,), -1, dtype=torch.int32)),
    (torch.full((40,), low64), torch.full((40,), -1)),
    (torch.full((40,), low32, dtype=torch.int32), torch.tensor(-1)),  # a 0-d divisor: int32 division
    (torch.tensor(low32), torch.full((40,), -1, dtype=torch.int32)),  # an int64 0-d dividend, cast
    (torch.full((40,), low64), -1),
]
for dividend, divisor in cases:
    text = trapless_trunc_division(template, dividend, divisor).format("n", "d")
    eval(text, {"torch": torch, "n": dividend, "d": divisor})
print("no trap")
"""


def test_a_trunc_division_never_divides_the_smallest_integer_by_minus_one() -> None:
    # Eager's CPU kernel traps there (SIGFPE), killing the worker while it generates the program
    # (seed 186802405: an int32 input spanning the whole range over one holding -1).
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _TRUNC_DIVISIONS], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "no trap" in done.stdout, (done.returncode, done.stderr[-2000:])
    done = subprocess.run(
        [sys.executable, "-m", "tools.fuzz", "show", "186802405"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])


def test_a_finding_is_appended_once_to_each_markdown_file(tmp_path: Path) -> None:
    from tools.fuzz.runner import append_once

    own, extra = tmp_path / "findings.md", tmp_path / "all.md"
    append_once("### one\n", [own, tmp_path / "." / "findings.md"])  # --findings-md naming the run's own file
    append_once("### two\n", [own, extra])
    assert own.read_text() == "### one\n### two\n"
    assert extra.read_text() == "### two\n"


def test_indices_decided_by_a_tie_up_to_rounding_are_not_generated() -> None:
    """Two softmax columns with the same inputs, summed in another order, differ in the last bits: eager
    made column 2 the smaller (fuzz 1e1813060f), a compiler may make column 0 so. `min(-1).indices`
    there is decided by rounding, as an exact tie's is by the implementation."""
    from tools.fuzz.rules_order import _ties_along
    from tools.fuzz.rules_shape import _indices_of_ties
    from tools.fuzz.ties import near

    row = torch.tensor([[0.0175266545265913, 0.04493583366274834, 0.01752665266394615]])
    assert _indices_of_ties("min_indices", "x.min(-1).indices", row, -1)
    assert _ties_along(row, 1)
    apart = torch.tensor([[0.0175, 0.0449, 0.0176]])  # a real difference still decides the index
    assert not _indices_of_ties("min_indices", "x.min(-1).indices", apart, -1)
    assert not _ties_along(apart, 1)
    # integers compare exactly; a half-precision tie allows its coarser rounding
    assert not near(torch.tensor([1000000, 1000001]), torch.tensor(1000000))[1]
    assert bool(near(torch.tensor([1.0, 1.001], dtype=torch.float16), torch.tensor(1.0, dtype=torch.float16))[1])


def test_the_sign_of_a_nan_is_not_asked_for() -> None:
    """`signbit` of a value holding a NaN (fuzz 225b89ef39: `signbit(sqrt(int8))`) is not generated: no
    implementation defines a NaN's sign bit."""
    from tools.fuzz.rules_pointwise import _holds_nan

    assert _holds_nan(torch.tensor([1.0, float("nan")]))
    assert not _holds_nan(torch.tensor([1.0, float("inf"), -0.0]))
    assert not _holds_nan(torch.tensor([1, 2]))


def test_a_signed_zero_tie_of_minimum_is_not_generated() -> None:
    """minimum/maximum/clamp with a tensor bound on -0.0 against 0.0: eager's vector loop and scalar tail
    keep different operands, so such a tie is not generated (fmin/fmax are, eager keeps one operand)."""
    from tools.fuzz.rules_pointwise import _signed_zero_tie

    assert _signed_zero_tie(torch.tensor([1.0, -0.0]), torch.tensor([0.0, 2.0]))
    assert not _signed_zero_tie(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0]))
    assert not _signed_zero_tie(torch.tensor([1.0, -0.0]), torch.tensor([3.0, 2.0]))
    assert not _signed_zero_tie(torch.tensor([1, 0]), torch.tensor([0, 2]))
