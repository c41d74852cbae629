"""The differential harness for passes: the interpreter is the oracle.

``check_pass(module, "dce")`` runs the module through the interpreter on seeded random
inputs (and the XLA-computed fixture inputs when given), runs the pass(es) through the
real pipeline runner (verifier after every changing pass, ``--verify-no-change``), checks
the result re-parses to the same text, runs the interpreter again and compares.

Typical use in a pass test::

    from tests.support.harness import check_pass, load_text
    result = check_pass(load_text(HLO), "algsimp")
    assert result.changed
    assert "multiply" not in result.after_text

Interpreter-dependent checks are marked xfail (with the reason) while the interpreter is
not importable, and skipped for modules whose opcodes it rejects, so pass tests can be
written now and start comparing as soon as it lands.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.errors import UnsupportedError
from hlo_opt.flags import DebugOptions
from hlo_opt.ir.types import is_complex, is_float, numpy_dtype
from hlo_opt.pipeline import Pipeline, PipelineRunner
from tests.support.pipelines import pipeline

__all__ = ["CheckResult", "assert_close", "check_pass", "execute_or_xfail", "fixture_args",
           "load_text", "random_args", "is_deterministic", "with_redundancy"]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_NONDETERMINISTIC = frozenset({"rng", "rng-get-and-update-state", "rng-bit-generator",
                               "infeed", "recv", "recv-done"})


def load_text(text: str, filename: str = "<test>"):
    return parse_hlo(text, filename)


MAX_ELEMENTS = 1 << 22  # larger arrays are not interpreted (corpus GPU tests go to 2 TiB)


def largest_array(module) -> int:
    return max((s.num_elements() for inst in module.instructions()
                for s in inst.shape.leaves() if s.is_array()), default=0)


MAX_WORK = 200_000_000  # estimated element operations per run; beyond, not interpreted


def estimated_work(module) -> int:
    """A rough count of element operations one interpreter run does: windowed ops and
    convolutions cost output elements times the window (times input features), dots
    output elements times the contracted size, everything else its operand and output
    elements."""
    total = 0
    for inst in module.instructions():
        out = sum(s.num_elements() for s in inst.shape.leaves() if s.is_array())
        try:
            total += out * _work_per_element(inst)
        except Exception:  # noqa: BLE001 - unparsable attributes: count it as expensive
            total += out << 20
        total += sum(s.num_elements() for o in inst.operands for s in o.shape.leaves()
                     if s.is_array())
    return total


def _work_per_element(inst) -> int:
    if inst.opcode == "convolution":
        rhs = inst.operands[1].shape
        labels = inst.attrs.get("dim_labels", "").split("_")[1].split("->")[0]
        return max(rhs.num_elements() // max(rhs.dims[labels.index("o")], 1), 1)
    if inst.opcode == "dot":
        lhs = inst.operands[0].shape
        per = 1
        for d in inst.attr("lhs_contracting_dims", ()):
            per *= lhs.dims[d]
        return max(per, 1)
    if "window" in inst.attrs:
        per = 1
        for d in inst.attr("window").dims:
            per *= max(d.size, 1)
        return per
    return 1


def is_deterministic(module) -> bool:
    return not any(inst.opcode in _NONDETERMINISTIC or (
        inst.opcode == "custom-call") for inst in module.instructions())


def with_redundancy(module):
    """A copy of ``module`` computing the same thing with work for the simplifiers: the old
    entry becomes a computation called twice with the same arguments, and the new root
    reads the first call back through tuple/get-tuple-element::

        ENTRY %redundant_entry (args...) {
          %c1 = call(args), to_apply=%old_entry
          %c2 = call(args), to_apply=%old_entry
          %t = tuple(%c1, %c2)
          ROOT %g = get-tuple-element(%t), index=0
        }

    call-inliner, flatten-call-graph, cse, tuple-simplifier and dce all have something to
    do on it, whatever the original module was."""
    from hlo_opt.ir.computation import Computation
    from hlo_opt.ir.shape import Shape
    m = module.clone()
    body = m.entry
    body.is_entry = False
    new = Computation("redundant_entry")
    params = [new.add_parameter(p.shape, name=f"arg{i}") for i, p in enumerate(body.parameters)]
    out = body.root.shape
    c1 = new.add("call", out, params, name="c1", called=[body], called_attr="to_apply")
    c2 = new.add("call", out, params, name="c2", called=[body], called_attr="to_apply")
    t = new.add("tuple", Shape.tuple([out, out]), [c1, c2], name="t")
    new.root = new.add("get-tuple-element", out, [t], name="g", attrs={"index": "0"})
    m.add_computation(new, entry=True)
    return m


# ---- inputs -----------------------------------------------------------------------------

def _random_value(shape, rng: np.random.Generator):
    if shape.is_tuple():
        return tuple(_random_value(s, rng) for s in shape.tuple_shapes)
    if not shape.is_array():
        return None  # token / opaque: not representable as an input
    et = shape.element_type
    dims = tuple(max(d, 0) for d in shape.dims)
    if et == "pred":
        return rng.integers(0, 2, size=dims).astype(np.bool_)
    dtype = numpy_dtype(et)
    if is_complex(et):
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
    if is_float(et):
        return rng.standard_normal(dims).astype(np.float32).astype(dtype)
    if et in ("s1", "s2", "s4", "u1", "u2", "u4"):
        bits = int(et[1:])
        lo, hi = ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if et[0] == "s"
                  else (0, (1 << bits) - 1))
    else:
        lo, hi = (-8, 8) if et.startswith("s") else (0, 15)
    return rng.integers(lo, hi + 1, size=dims).astype(dtype)


def random_args(module, seed: int) -> list | None:
    """One value per entry parameter (None if some parameter cannot be generated)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in module.entry.parameters:
        v = _random_value(p.shape, rng)
        if v is None or (isinstance(v, tuple) and any(x is None for x in _leaves(v))):
            return None
        out.append(v)
    return out


def _leaves(v):
    if isinstance(v, tuple):
        for x in v:
            yield from _leaves(x)
    else:
        yield v


def fixture_args(name: str) -> list | None:
    """``arg0..`` of ``tests/fixtures/<name>.npz`` (XLA:CPU reference inputs), if present."""
    path = FIXTURES / f"{name}.npz"
    if not path.exists():
        return None
    data = np.load(path)
    args = []
    i = 0
    while f"arg{i}" in data:
        args.append(data[f"arg{i}"])
        i += 1
    return args


# ---- running ----------------------------------------------------------------------------

def execute_or_xfail(module, args) -> list:
    """``hlo_opt.execute``; xfail while the interpreter is not there, skip on opcodes it
    does not support (that is the interpreter's gap, not the pass's)."""
    try:
        from hlo_opt.backends import execute
    except ImportError as e:
        pytest.xfail(f"the interpreter (hlo_opt.backends.execute) is not available yet: {e}")
    try:
        return [np.asarray(x) for x in execute(module, args)]
    except UnsupportedError as e:
        pytest.skip(f"interpreter cannot run this module: {e}")


def assert_close(expected: Sequence, actual: Sequence, rtol: float, atol: float,
                 context: str = "") -> None:
    assert len(expected) == len(actual), f"{context}: {len(expected)} vs {len(actual)} results"
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = np.asarray(e), np.asarray(a)
        assert e.shape == a.shape, f"{context}: result {i} shape {e.shape} vs {a.shape}"
        assert e.dtype == a.dtype, f"{context}: result {i} dtype {e.dtype} vs {a.dtype}"
        if e.dtype.kind in "fcV" or is_float_like(e.dtype):
            ef = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
            af = a.astype(ef.dtype)
            ok = np.isclose(ef, af, rtol=rtol, atol=atol, equal_nan=True)
            if not ok.all():
                bad = np.argwhere(~ok)[:5].tolist()
                raise AssertionError(f"{context}: result {i} differs at {bad}: "
                                     f"{ef[~ok][:5]} vs {af[~ok][:5]}")
        else:
            if not np.array_equal(e, a):
                bad = np.argwhere(e != a)[:5].tolist()
                raise AssertionError(f"{context}: result {i} differs at {bad}")


def is_float_like(dtype) -> bool:
    try:
        return np.issubdtype(dtype, np.floating) or "float" in str(dtype) or \
            str(dtype).startswith(("bfloat", "float8", "float4", "float6"))
    except TypeError:
        return False


@dataclass
class CheckResult:
    changed: bool
    before_text: str
    after_text: str
    module: object
    compared_runs: int = 0
    notes: list[str] = field(default_factory=list)


_EXPECTED: dict = {}  # (module text, input digest) -> results of the original module


def _digest(args) -> str:
    import hashlib
    h = hashlib.sha1()
    for leaf in _leaves(tuple(args)):
        a = np.asarray(leaf)
        h.update(str((a.dtype, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _as_pipeline(passes) -> Pipeline:
    if isinstance(passes, Pipeline):
        return passes
    if isinstance(passes, str):
        passes = passes.split(",")
    if not isinstance(passes, (list, tuple)):
        passes = [passes]
    return pipeline("transforms_pipeline", list(passes))


def check_pass(module, passes, *, seeds: Iterable[int] = (0, 1, 2), extra_args=(),
               rtol: float = 1e-5, atol: float = 1e-6, execute: bool = True,
               options: DebugOptions | None = None,
               max_elements: int = MAX_ELEMENTS) -> CheckResult:
    """Run ``passes`` (name, comma list, pass objects or a Pipeline) on a copy of
    ``module`` and check: verifier after each changing pass, no silent changes, the result
    re-parses to identical text, and the interpreter gives the same results before and
    after on seeded random inputs plus ``extra_args`` (lists of arguments)."""
    original = module
    work = module.clone()
    before_text = original.to_text()
    runner = PipelineRunner(options, verify_no_change=True)  # None: the module's config
    changed = runner.run(_as_pipeline(passes), work)
    after_text = work.to_text()
    reparsed = parse_hlo(after_text, "<after pass>")
    assert reparsed.to_text() == after_text, "printing the result is not canonical"
    if not changed:
        assert after_text == before_text, "pass reported no change but the text changed"
    result = CheckResult(changed, before_text, after_text, work)
    if not execute:
        return result
    if not changed:
        result.notes.append("not compared: the module did not change")
        return result
    if not is_deterministic(original):
        result.notes.append("not compared: nondeterministic or opaque ops")
        return result
    if largest_array(original) > max_elements:
        result.notes.append(f"not compared: arrays over {max_elements} elements")
        return result
    if estimated_work(original) > MAX_WORK:
        result.notes.append("not compared: too much work for the interpreter")
        return result
    arg_sets = [a for a in (random_args(original, s) for s in seeds) if a is not None]
    arg_sets += [list(a) for a in extra_args if a is not None]
    if not arg_sets:
        result.notes.append("not compared: no generatable inputs")
        return result
    for i, args in enumerate(arg_sets):
        key = (before_text, _digest(args))
        expected = _EXPECTED.get(key)
        if expected is None:
            expected = execute_or_xfail(original, args)
            if len(_EXPECTED) > 16:
                _EXPECTED.clear()
            _EXPECTED[key] = expected
        actual = execute_or_xfail(work, args)
        assert_close(expected, actual, rtol, atol, f"{original.name} input set {i}")
        result.compared_runs += 1
    return result
