"""Convolution plans (the cuDNN frontend graph of a convolution, ``conv_plan.py``) against
the interpreter, without a GPU: a numpy model of cuDNN's conv_fprop / conv_dgrad /
conv_wgrad (cross-correlation or convolution mode, pre/post padding, stride, dilation,
feature groups, the fused scale / side input / bias / activation) runs each plan on
``[N, C, spatial...]`` views of the operands' bytes in memory order (the plan's dims and
strides), and the result must be the interpreter's.  Every convolution of the conv
kernel tests' modules, the samples, conv_block and the XLA corpus (when present)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from hlo_opt.api import load, parse_hlo
from hlo_opt.autotune.buffers import from_physical, to_physical
from hlo_opt.backends.cuda.conv_plan import (conv_plan, cudnn_layout, kernel_selected,
                                             selected_engine, strided_plan)
from tests.backends.cuda import test_conv_kernels as ck
from tests.conftest import CORPUS


# ---- the model --------------------------------------------------------------------------
def _view(flat, desc):
    """The plan's ``[N, C, spatial...]`` view of a flat physical buffer (float64)."""
    return np.lib.stride_tricks.as_strided(flat, shape=desc.dims,
                                           strides=[s * flat.itemsize for s in desc.strides])


def _geometry(plan):
    sp = len(plan.stride)
    R = plan.w.dims[2:]
    P = plan.y.dims[2:]

    def window(k):  # the padded-image positions kernel offset k reads, for every p
        return tuple(slice(k[d] * plan.dilation[d],
                           k[d] * plan.dilation[d] + (P[d] - 1) * plan.stride[d] + 1,
                           plan.stride[d]) for d in range(sp))
    return sp, R, P, window


def _filter(plan, w):
    """The filter as cross-correlation reads it (CONVOLUTION mode flips it)."""
    sp = len(plan.stride)
    return w[(slice(None),) * 2 + (slice(None, None, -1),) * sp] if plan.convolution else w


def _padded_groups(plan, x):
    """The input padded as the plan says, its channels split into (groups, per group)."""
    N, C = x.shape[:2]
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(plan.pre_padding, plan.post_padding)))
    return xp.reshape((N, plan.groups, C // plan.groups) + xp.shape[2:])


def cudnn_fprop(plan, x, w):
    sp, R, P, window = _geometry(plan)
    N, C = x.shape[:2]
    K, G = w.shape[0], plan.groups
    xg = _padded_groups(plan, x)
    wg = _filter(plan, w).reshape((G, K // G, C // G) + tuple(R))
    y = np.zeros((N, G, K // G) + tuple(P))
    for k in itertools.product(*(range(r) for r in R)):
        patch = xg[(slice(None),) * 3 + window(k)]
        y += np.einsum("ngc...,goc->ngo...", patch, wg[(Ellipsis,) + k])
    return y.reshape((N, K) + tuple(P))


def cudnn_dgrad(plan, dy, w):
    sp, R, P, window = _geometry(plan)
    N, K = dy.shape[:2]
    C, G = plan.x.dims[1], plan.groups
    X = plan.x.dims[2:]
    padded = [X[d] + plan.pre_padding[d] + plan.post_padding[d] for d in range(sp)]
    dxp = np.zeros((N, G, C // G) + tuple(padded))
    wg = _filter(plan, w).reshape((G, K // G, C // G) + tuple(R))
    dyg = dy.reshape((N, G, K // G) + tuple(P))
    for k in itertools.product(*(range(r) for r in R)):
        dxp[(slice(None),) * 3 + window(k)] += np.einsum("ngo...,goc->ngc...", dyg,
                                                         wg[(Ellipsis,) + k])
    crop = tuple(slice(plan.pre_padding[d], plan.pre_padding[d] + X[d]) for d in range(sp))
    return dxp.reshape((N, C) + tuple(padded))[(slice(None),) * 2 + crop]


def cudnn_wgrad(plan, x, dy):
    sp, R, P, window = _geometry(plan)
    N, C = x.shape[:2]
    K, G = dy.shape[1], plan.groups
    xg = _padded_groups(plan, x)
    dyg = dy.reshape((N, G, K // G, -1))
    dw = np.zeros((G, K // G, C // G) + tuple(R))
    for k in itertools.product(*(range(r) for r in R)):
        patch = xg[(slice(None),) * 3 + window(k)].reshape(N, G, C // G, -1)
        dw[(Ellipsis,) + k] = np.einsum("ngop,ngcp->goc", dyg, patch)
    dw = dw.reshape((K, C // G) + tuple(R))
    return _filter(plan, dw)


ACTIVATIONS = {
    "kNone": lambda v, a: v,
    "kRelu": lambda v, a: np.maximum(v, 0),
    "kRelu6": lambda v, a: np.minimum(np.maximum(v, 0), 6),
    "kElu": lambda v, a: np.where(v > 0, v, np.exp(np.minimum(v, 0)) - 1),
    "kLeakyRelu": lambda v, a: np.where(v > 0, v, a * v),
}


def cudnn_model(plan, flat: list):
    """The plan's graph on flat physical operand buffers (float64): the result's flat
    physical buffer."""
    def operand(desc):
        return _view(flat[desc.operand], desc)
    if plan.kind == "fprop":
        out = cudnn_fprop(plan, operand(plan.x), operand(plan.w))
    elif plan.kind == "dgrad":
        out = cudnn_dgrad(plan, operand(plan.y), operand(plan.w))
    else:
        out = cudnn_wgrad(plan, operand(plan.x), operand(plan.y))
    if plan.fused:
        out = out * plan.scale
        if plan.side is not None:
            out = out + plan.side_scale * operand(plan.side)
        if plan.bias is not None:
            out = out + operand(plan.bias)
        out = ACTIVATIONS[plan.activation](out, plan.leaky_alpha)
    res = plan.result
    size = 1 + sum((d - 1) * s for d, s in zip(res.dims, res.strides))
    buf = np.zeros(size)
    _view(buf, res)[...] = out
    return buf


# ---- checking one instruction ----------------------------------------------------------
TOLERANCE = {"f64": 1e-9, "f32": 1e-4, "f16": 2e-3, "bf16": 1.6e-2}


def interpret(inst, args):
    from hlo_opt.backends.interpreter.evaluator import Evaluator
    from hlo_opt.backends.interpreter.registry import HANDLERS
    r = HANDLERS[inst.opcode](inst, args, Evaluator())
    return np.asarray(r[0] if isinstance(r, tuple) else r)


def check(inst, seed=0):
    """The plan of ``inst`` (dims and strides, whatever the layouts) run by the model
    equals the interpreter; the plan (None when cuDNN cannot take the convolution)."""
    plan = strided_plan(inst)
    if plan is None:
        return None
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(o.shape.dims).astype(o.shape.dtype) for o in inst.operands]
    flat = [np.asarray(to_physical(o.shape, a)).reshape(-1).astype(np.float64)
            for o, a in zip(inst.operands, args)]
    res = inst.shape.tuple_shapes[0] if inst.shape.is_tuple() else inst.shape
    got = cudnn_model(plan, flat)[:res.num_elements()]
    got = np.asarray(from_physical(res, got.astype(res.dtype)), dtype=np.float64)
    want = interpret(inst, args).astype(np.float64)
    tol = TOLERANCE[res.element_type]
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale,
                               err_msg=f"{inst.name}: {plan}")
    return plan


def _convs(module):
    from hlo_opt.backends.cuda.conv import is_convolution
    return [i for c in module.computations for i in c.instructions if is_convolution(i)]


# ---- the conv kernel tests' modules, the samples, conv_block -----------------------------
def _modules():
    raw = ck._raw()
    return {n: m if n in ck.PLAIN or n in ck.CALLS else ck._gpu(m) for n, m in raw.items()}


# convolutions cuDNN cannot take (base dilation, batch groups, negative padding, a partial
# kernel reversal): the kernel runs them
UNPLANNED = {"negative_pad_dilations_reversal", "batch_grouped", "bf16_to_f32"}


@pytest.mark.parametrize("name", sorted({**ck.PLAIN, **ck.GPU, **ck.CALLS, **ck.SAMPLES}))
def test_plan_matches_interpreter(name):
    convs = _convs(_modules()[name])
    assert convs
    plans = [check(inst, seed=i) for i, inst in enumerate(convs)]
    if name in UNPLANNED:
        assert None in plans
    else:
        assert None not in plans, [i.to_text() for i, p in zip(convs, plans) if p is None]
    if name in ck.TARGETS:
        kind = {"__cudnn$convForward": "fprop", "__cudnn$convBiasActivationForward": "fprop",
                "__cudnn$convBackwardInput": "dgrad",
                "__cudnn$convBackwardFilter": "wgrad"}[ck.TARGETS[name]]
        assert {p.kind for p in plans if p is not None} <= {kind}


def test_mobilenet_has_every_kind_of_layout():
    plans = [conv_plan(i) for i in _convs(_modules()["mobilenet_cluster"])]
    assert len(plans) >= 5 and all(plans)
    assert any(p.groups > 1 for p in plans)


def test_fused_epilogue_fields():
    inst = _convs(_modules()["call_side_input_elu"])[0]
    plan = check(inst)
    assert plan.fused and plan.activation == "kElu" and plan.scale == 0.5
    assert plan.side is not None and plan.side.operand == 3 and plan.side_scale == 2
    assert plan.bias is not None and plan.bias.dims == (1, 5, 1, 1)


def _one(labels, x, w, window, extra="", dt="f32", layouts=("", "", "")):
    text = ck._conv("t", dt, x, w, window, labels, extra)
    for old, new in zip(("x = ", "w = ", "ROOT c = "), layouts):
        if new:
            line = next(ln for ln in text.splitlines() if ln.strip().startswith(old))
            head, rest = line.split("]", 1)
            text = text.replace(line, f"{head}]{new}{rest}")
    return parse_hlo(text).entry.root


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "f64"])
@pytest.mark.parametrize("layouts", [("", "", ""), ("{0,3,2,1}", "{3,2,1,0}", "{1,0,3,2}"),
                                     ("{2,1,0,3}", "{0,1,3,2}", "{3,0,2,1}")])
def test_synthetic_layouts_and_types(dt, layouts):
    """NHWC / NCHW / odd physical layouts of the same convolution: the same plan dims,
    other strides."""
    inst = _one("b01f_01io->b01f", [2, 7, 6, 4], [3, 2, 4, 6],
                "size=3x2 stride=2x1 pad=1_2x0_1 rhs_dilate=1x2", dt=dt, layouts=layouts)
    plan = check(inst, seed=3)
    assert plan is not None and plan.x.dims == (2, 4, 7, 6) and plan.w.dims == (6, 4, 3, 2)
    assert plan.pre_padding == (1, 0) and plan.post_padding == (2, 1)


@pytest.mark.parametrize("layouts,cudnn", [
    (("", "{2,1,0,3}", ""), True),                       # NHWC, KRSC
    (("{2,1,3,0}", "{1,0,2,3}", "{2,1,3,0}"), True),     # NCHW, KCRS
    (("", "", ""), False),                               # the filter's K minor-most
    (("{0,3,2,1}", "{2,1,0,3}", ""), False),             # the batch minor-most
    (("", "{2,0,1,3}", ""), False)])                     # KSRC
def test_only_cudnns_layouts_go_to_cudnn(layouts, cudnn):
    """cuDNN computes in packed NCHW/KCRS or NHWC/KRSC: other layouts (which its
    frontend validates, then computes wrongly: the default layout of a ``01io`` filter
    gave errors of 6 on an H200) stay with the conv kernel."""
    inst = _one("b01f_01io->b01f", [2, 7, 6, 4], [3, 2, 4, 6], "size=3x2 pad=1_1x0_1",
                layouts=layouts)
    plan = check(inst, seed=5)
    assert all(cudnn_layout(t) for t in (plan.x, plan.w, plan.y)) == cudnn
    assert (conv_plan(inst) is not None) == cudnn


def test_full_reversal_is_convolution_mode():
    inst = _one("bf01_oi01->bf01", [1, 2, 6, 6], [3, 2, 3, 3],
                "size=3x3 pad=1_1x1_1 rhs_reversal=1x1")
    plan = check(inst)
    assert plan.convolution


def test_refused_forms():
    partial = _one("bf01_oi01->bf01", [1, 2, 6, 6], [3, 2, 3, 3], "size=3x3 rhs_reversal=1x0")
    lhs_dilated = _one("bf01_oi01->bf01", [1, 2, 6, 6], [3, 2, 3, 3], "size=3x3 lhs_dilate=2x2")
    negative = _one("bf01_oi01->bf01", [1, 2, 6, 6], [3, 2, 3, 3], "size=3x3 pad=-1_0x0_0")
    integer = _one("bf01_oi01->bf01", [1, 2, 6, 6], [3, 2, 3, 3], "size=3x3", dt="s8")
    for inst in (partial, lhs_dilated, negative, integer):
        assert conv_plan(inst) is None, inst.to_text()


def test_selected_algorithm_fields():
    """XLA's frontend algorithm (engine id + knobs) is the plan's engine; an algorithm
    without is_cudnn_frontend that the conv kernel knows selects the kernel."""
    base = ck.CALLS["call_relu6"]
    engine = base.replace('"activation_mode":"kRelu6"',
                          '"activation_mode":"kRelu6","algorithm":{"algo_id":"28",'
                          '"tuning_knobs":{"3":"0","2":"1"},"is_cudnn_frontend":true,'
                          '"workspace_size":"0"}')
    inst = parse_hlo(engine).entry.root
    assert selected_engine(inst) == (28, ((2, 1), (3, 0))) and not kernel_selected(inst)
    assert strided_plan(inst).engine == (28, ((2, 1), (3, 0)))
    kernel = base.replace('"activation_mode":"kRelu6"',
                          '"activation_mode":"kRelu6","algorithm":{"algo_id":"2"}')
    inst = parse_hlo(kernel).entry.root
    assert kernel_selected(inst) and selected_engine(inst) is None
    assert not kernel_selected(parse_hlo(base).entry.root)


# ---- the XLA corpus ----------------------------------------------------------------------
def _corpus_convs():
    if not CORPUS.is_dir():
        return []
    out = []
    for p in sorted(CORPUS.glob("*.hlo")):
        if "convolution(" in p.read_text(errors="replace"):
            out.append(p)
    return out


@pytest.mark.parametrize("path", _corpus_convs() or [None], ids=lambda p: p.stem if p else "none")
def test_corpus_convolutions(path):
    if path is None:
        pytest.skip(f"no XLA corpus with convolutions at {CORPUS}")
    try:
        m = load(str(path))
    except Exception as e:  # noqa: BLE001 - a corpus file this parser refuses
        pytest.skip(f"{path.name}: {e}")
    planned = 0
    for mod in (m, ck._gpu(m)):
        for i, inst in enumerate(_convs(mod)):
            planned += check(inst, seed=i) is not None
    print(f"{path.name}: {planned} convolutions planned")
