"""The corpus modules with collectives on several replicas.

Every collective of every corpus module is run on its own (its operands become
parameters, a -start gets its -done) on the module's replica count (``replica_count=``,
else the smallest count its groups name, at least 2), with different random inputs per
replica, and checked against the numpy model of ``test_collectives.py``.  Whole modules
run too when the interpreter supports all their opcodes and their arrays are small
enough; a module whose root is the collective (directly or as the root of the fusion it
calls) is checked against the model as a whole.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from hlo_opt.api import parse_hlo, parse_hlo_modules
from hlo_opt.backends.interpreter import execute_replicated
from hlo_opt.errors import UnsupportedError
from hlo_opt.ir.clone import clone_computation
from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.module import HloModule
from hlo_opt.ir.types import is_float
from tests.backends.test_collectives import model, model_groups
from tests.conftest import corpus_files, require_corpus
from tests.support.harness import largest_array, random_args

_COLLECTIVE_RE = re.compile(r"\b(all-reduce|all-gather|reduce-scatter|all-to-all|"
                            r"collective-permute|collective-broadcast)\b")
_MODELLED = {"all-reduce": "all-reduce", "all-reduce-start": "all-reduce",
             "all-gather": "all-gather", "all-gather-start": "all-gather",
             "reduce-scatter": "reduce-scatter", "all-to-all": "all-to-all",
             "collective-broadcast": "collective-broadcast"}
MAX_ELEMENTS = 1 << 22


def _modules():
    out = []
    for path in corpus_files():
        text = path.read_text(errors="replace")
        if not _COLLECTIVE_RE.search(text):
            continue
        for m in parse_hlo_modules(text, str(path)):
            out.append((path.name, m))
    return out


def _collectives():
    return [(name, m, inst) for name, m in _modules() for inst in m.instructions()
            if inst.opcode in _MODELLED or inst.opcode in ("collective-permute",
                                                            "collective-permute-start")]


def _replicas(module, insts) -> int:
    header = module.header_attrs.get("replica_count")
    if header:
        return int(header)
    top = 1
    for inst in insts:
        for g in model_groups(inst.attrs.get("replica_groups"), 0):
            top = max(top, max(g, default=0) + 1)
    return max(top, 2)


def _partitions(module) -> int:
    return int(module.header_attrs.get("num_partitions") or 1)


def _alone(inst, R: int, P: int) -> HloModule:
    """``inst`` with parameters for operands (and its -done when it is a -start)."""
    m = HloModule(f"{inst.name}_alone")
    m.header_attrs = {"replica_count": str(R), "num_partitions": str(P)}
    comp_map: dict = {}
    needed, stack = [], list(inst.called)
    while stack:
        c = stack.pop()
        if c not in needed:
            needed.append(c)
            stack.extend(c.called_computations())
    for c in inst.parent.module.computation_post_order():
        if c in needed:
            comp_map[c] = clone_computation(c, comp_map)
            m.add_computation(comp_map[c])
    entry = Computation("entry")
    params = [entry.add_parameter(op.shape, name=f"arg{i}")
              for i, op in enumerate(inst.operands)]
    new = Instruction(inst.opcode, inst.shape, params, dict(inst.attrs), inst.name,
                      inst.payload, [comp_map[c] for c in inst.called], inst.called_attr)
    entry.add_instruction(new)
    root = new
    if inst.opcode.endswith("-start"):
        done_shape = inst.shape if inst.opcode == "all-reduce-start" else \
            inst.shape.tuple_shapes[1]
        root = entry.add(inst.opcode[:-len("start")] + "done", done_shape, [new], name="done")
    entry.root = root
    m.add_computation(entry, entry=True)
    return parse_hlo(m.to_text(), f"<{inst.name} alone>")


def _reducer(inst) -> str:
    return inst.to_apply.root.opcode if inst.called else "add"


def _check(outs, want, et: str, context: str):
    for d, (o, w) in enumerate(zip(outs, want)):
        o = np.asarray(o)
        assert o.shape == w.shape, f"{context} device {d}"
        if is_float(et):
            tol = 1e-5 if et in ("f32", "f64") else 2e-2
            np.testing.assert_allclose(o.astype(np.float64), np.asarray(w).astype(np.float64),
                                       rtol=tol, atol=tol, err_msg=f"{context} device {d}")
        else:
            np.testing.assert_array_equal(o, w, err_msg=f"{context} device {d}")


def _ids(items):
    return [f"{name}::{inst.name}" for name, _, inst in items]


_ITEMS = _collectives()


def test_corpus_has_collectives():
    require_corpus()
    assert len(_ITEMS) >= 5, _ids(_ITEMS)


@pytest.mark.parametrize("name,module,inst", _ITEMS, ids=_ids(_ITEMS))
def test_corpus_collective_alone(name, module, inst):
    R, P = _replicas(module, [inst]), _partitions(module)
    alone = _alone(inst, R, P)
    per_device = [random_args(alone, 100 + d) for d in range(R * P)]
    outs = execute_replicated(alone, per_device)
    et = inst.operands[0].shape.element_type
    if inst.opcode in _MODELLED:
        xs = [a[0] for a in per_device]
        want = model(_MODELLED[inst.opcode], inst.attrs, xs, R, P, reducer=_reducer(inst))
        _check([o[0] for o in outs], want, et, f"{name}::{inst.name}")
    else:  # collective-permute: replica ids without channel_id
        pairs = [tuple(int(v) for v in g.split(",")) for g in
                 re.findall(r"\{(\d+,\d+)\}", inst.attrs.get("source_target_pairs", ""))]
        want = [np.zeros_like(a[0]) for a in per_device]
        for s, t in pairs:
            want[t] = per_device[s][0]
        _check([o[0] for o in outs], want, et, f"{name}::{inst.name}")


_MODULES = _modules()


@pytest.mark.parametrize("name,module", _MODULES, ids=[n for n, _ in _MODULES])
def test_corpus_module_replicated(name, module):
    collectives = [i for i in module.instructions() if _COLLECTIVE_RE.fullmatch(
        i.opcode.replace("-start", "").replace("-done", ""))]
    R, P = _replicas(module, collectives), _partitions(module)
    if largest_array(module) > MAX_ELEMENTS:
        pytest.skip(f"arrays of {largest_array(module)} elements on {R * P} devices: "
                    "too large for the interpreter")
    per_device = [random_args(module, 200 + d) for d in range(R * P)]
    if any(a is None for a in per_device):
        pytest.skip("inputs cannot be generated")
    try:
        outs = execute_replicated(module, per_device, num_replicas=R, num_partitions=P)
    except UnsupportedError as e:
        pytest.skip(f"interpreter cannot run the whole module: {e}")
    root = module.entry.root
    if root.opcode == "fusion" and all(o.opcode == "parameter" for o in root.operands):
        body_root = root.called[0].root
        if body_root.opcode in _MODELLED and body_root.operands[0].opcode == "parameter":
            n = body_root.operands[0].parameter_number
            xs = [a[n] for a in per_device]
            want = model(_MODELLED[body_root.opcode], body_root.attrs, xs, R, P,
                         reducer=_reducer(body_root))
            _check([o[0] for o in outs], want, body_root.shape.element_type, name)
            return
    again = execute_replicated(module, per_device, num_replicas=R, num_partitions=P)
    for a, b in zip(outs, again):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
