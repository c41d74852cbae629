"""convolution against a direct loop over XLA's definition, and MobileNet vs XLA:CPU."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tests.support.heavy_helpers import execute_or_skip, run

ROOT = Path(__file__).resolve().parents[3]


def ref_conv(lhs, rhs, labels, window, fgc=1, bgc=1, out_dtype=np.float64):
    """One output element at a time, exactly as operation_semantics.md describes it.

    labels: (in_b, in_f, in_sp, k_i, k_o, k_sp, out_b, out_f, out_sp) dim numbers;
    window: list of dicts size/stride/lo/hi/lhs_d/rhs_d/rev per spatial dim."""
    in_b, in_f, in_sp, k_i, k_o, k_sp, out_b, out_f, out_sp = labels
    n = lhs.shape[in_b]
    o = rhs.shape[k_o]
    ci = rhs.shape[k_i]
    out_spatial = []
    for d, w in zip(in_sp, window):
        padded = (lhs.shape[d] - 1) * w["lhs_d"] + 1 + w["lo"] + w["hi"]
        eff = (w["size"] - 1) * w["rhs_d"] + 1
        out_spatial.append(max(0, (padded - eff) // w["stride"] + 1))
    out_shape = [0] * (2 + len(in_sp))
    out_shape[out_b] = n // bgc
    out_shape[out_f] = o
    for d, s in zip(out_sp, out_spatial):
        out_shape[d] = s
    out = np.zeros(out_shape, dtype=np.float64)
    for ob, of in itertools.product(range(n // bgc), range(o)):
        fg = of // (o // fgc)
        bg = of // (o // bgc)
        for pos in itertools.product(*[range(s) for s in out_spatial]):
            acc = 0.0
            for kpos in itertools.product(*[range(w["size"]) for w in window]):
                in_idx = []
                ok = True
                for p, k, w in zip(pos, kpos, window):
                    dil = p * w["stride"] + k * w["rhs_d"] - w["lo"]
                    if dil % w["lhs_d"]:
                        ok = False
                        break
                    in_idx.append(dil // w["lhs_d"])
                if not ok or any(not 0 <= x < lhs.shape[d] for x, d in zip(in_idx, in_sp)):
                    continue
                kidx = [w["size"] - 1 - k if w["rev"] else k for k, w in zip(kpos, window)]
                for iz in range(ci):
                    li = [0] * lhs.ndim
                    li[in_b] = ob + bg * (n // bgc)
                    li[in_f] = fg * ci + iz
                    for d, x in zip(in_sp, in_idx):
                        li[d] = x
                    ri = [0] * rhs.ndim
                    ri[k_i] = iz
                    ri[k_o] = of
                    for d, x in zip(k_sp, kidx):
                        ri[d] = x
                    acc += float(lhs[tuple(li)]) * float(rhs[tuple(ri)])
            oi = [0] * len(out_shape)
            oi[out_b], oi[out_f] = ob, of
            for d, x in zip(out_sp, pos):
                oi[d] = x
            out[tuple(oi)] = acc
    return out


def _w(size, stride=1, lo=0, hi=0, lhs_d=1, rhs_d=1, rev=False):
    return dict(size=size, stride=stride, lo=lo, hi=hi, lhs_d=lhs_d, rhs_d=rhs_d, rev=rev)


def _window_text(ws):
    parts = ["size=" + "x".join(str(w["size"]) for w in ws),
             "stride=" + "x".join(str(w["stride"]) for w in ws),
             "pad=" + "x".join(f"{w['lo']}_{w['hi']}" for w in ws),
             "lhs_dilate=" + "x".join(str(w["lhs_d"]) for w in ws),
             "rhs_dilate=" + "x".join(str(w["rhs_d"]) for w in ws),
             "rhs_reversal=" + "x".join("1" if w["rev"] else "0" for w in ws)]
    return "{" + " ".join(parts) + "}"


def _labels(text):
    lhs, rest = text.split("_", 1)
    rhs, out = rest.split("->")

    def sp(s):
        return [s.index(str(i)) for i in range(len(s) - 2)]
    return (lhs.index("b"), lhs.index("f"), sp(lhs), rhs.index("i"), rhs.index("o"), sp(rhs),
            out.index("b"), out.index("f"), sp(out))


def _shape_text(dt, shape):
    return f"{dt}[{','.join(map(str, shape))}]"


CASES = [
    # dim_labels, lhs logical (b, f, spatial), kernel (o, i, spatial), windows, fgc, bgc
    ("b01f_01io->b01f", (2, 3, 7, 6), (4, 3, 3, 3), [_w(3, lo=1, hi=1), _w(3, lo=1, hi=1)],
     1, 1),
    ("b01f_01io->b01f", (1, 2, 9, 8), (3, 2, 3, 2),
     [_w(3, stride=2, lo=0, hi=1), _w(2, stride=3, lo=2, hi=-1, rhs_d=2)], 1, 1),
    ("bf01_oi01->bf01", (2, 2, 5, 4), (2, 2, 2, 3),
     [_w(2, lo=1, hi=0, lhs_d=2), _w(3, lo=-1, hi=2, lhs_d=3, rev=True)], 1, 1),
    ("fb01_io01->01bf", (2, 4, 6, 5), (6, 2, 3, 2), [_w(3, rhs_d=2, lo=2, hi=2), _w(2)], 2, 1),
    # depthwise (MobileNet style): 4 groups, multiplier 2
    ("b01f_01io->b01f", (1, 4, 6, 6), (8, 1, 3, 3), [_w(3, 2, 0, 1), _w(3, 2, 0, 1)], 4, 1),
    # batch groups (the filter-gradient form): output batch N/2
    ("b01f_01io->b01f", (4, 3, 5, 5), (6, 3, 2, 2), [_w(2), _w(2, stride=2)], 1, 2),
    ("b0f_0io->b0f", (3, 2, 11), (4, 2, 4), [_w(4, stride=3, lo=2, hi=3, lhs_d=2, rhs_d=2)],
     1, 1),
]


def _logical_to_labels(arr_logical, labels_part, is_kernel):
    """Put an array given as (b|o, f|i, spatial...) into the dim order of ``labels_part``."""
    chars = ("o", "i") if is_kernel else ("b", "f")
    order = [labels_part.index(chars[0]), labels_part.index(chars[1])] + \
        [labels_part.index(str(i)) for i in range(len(labels_part) - 2)]
    perm = [0] * len(order)
    for axis, dim in enumerate(order):
        perm[dim] = axis
    return np.transpose(arr_logical, perm)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("looped", [None, "none", "all"])
def test_convolution_matches_direct_loop(case, looped, monkeypatch):
    from hlo_opt.backends.interpreter import ops_convolution
    monkeypatch.setattr(ops_convolution, "FORCE_LOOPED", looped)
    labels_text, lshape, kshape, windows, fgc, bgc = CASES[case]
    rng = np.random.default_rng(case)
    lhs = _logical_to_labels(rng.standard_normal(lshape).astype(np.float32),
                             labels_text.split("_")[0], False)
    rhs = _logical_to_labels(rng.standard_normal(kshape).astype(np.float32),
                             labels_text.split("_")[1].split("->")[0], True)
    labels = _labels(labels_text)
    expected = ref_conv(lhs, rhs, labels, windows, fgc, bgc)
    text = f"""
HloModule c
ENTRY e {{
  l = {_shape_text('f32', lhs.shape)} parameter(0)
  r = {_shape_text('f32', rhs.shape)} parameter(1)
  ROOT c = {_shape_text('f32', expected.shape)} convolution(l, r), window={_window_text(windows)},
      dim_labels={labels_text}, feature_group_count={fgc}, batch_group_count={bgc}
}}
"""
    out = run(text, "c", [lhs, rhs])
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_integer_convolution_accumulates_wide_and_clamps():
    text = """
HloModule c
ENTRY e {
  l = s8[1,4,1] parameter(0)
  r = s8[4,1,1] parameter(1)
  ROOT c = s8[1,1,1] convolution(l, r), window={size=4}, dim_labels=b0f_0io->b0f
}
"""
    lhs = np.full((1, 4, 1), 100, np.int8)
    rhs = np.full((4, 1, 1), 100, np.int8)
    out = run(text, "c", [lhs, rhs])
    assert out.reshape(()) == 127  # 40000 clamps to s8 max, as the XLA evaluator does
    text32 = text.replace("ROOT c = s8[1,1,1]", "ROOT c = s32[1,1,1]")
    assert run(text32, "c", [lhs, rhs]).reshape(()) == 40000


def test_empty_output_window_larger_than_input():
    text = """
HloModule c
ENTRY e {
  l = f32[1,2,2,1] parameter(0)
  r = f32[3,3,1,1] parameter(1)
  ROOT c = f32[1,0,0,1] convolution(l, r), window={size=3x3}, dim_labels=b01f_01io->b01f
}
"""
    out = run(text, "c", [np.ones((1, 2, 2, 1), np.float32), np.ones((3, 3, 1, 1), np.float32)])
    assert out.shape == (1, 0, 0, 1)


def test_mobilenet_cluster_matches_xla_fixture():
    execute = execute_or_skip()
    import hlo_opt
    mod = hlo_opt.load(str(ROOT / "sample_modules" / "mobilenet_cluster.hlo"))
    data = np.load(ROOT / "tests" / "fixtures" / "mobilenet_cluster.npz")
    nargs = len([k for k in data.files if k.startswith("arg")])
    outs = execute(mod, [data[f"arg{i}"] for i in range(nargs)])
    assert len(outs) == 1
    np.testing.assert_allclose(outs[0], data["out0"], rtol=1e-4, atol=1e-7)
    # the softmax output is a distribution: a sanity check that nothing is all-zero
    assert abs(float(outs[0].sum()) - 1.0) < 1e-4 and outs[0].max() > 1.5 / 1000


def test_no_spatial_dims_is_a_matmul_and_default_dim_labels():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    text = """
HloModule c
ENTRY e {
  l = f32[3,4] parameter(0)
  r = f32[4,5] parameter(1)
  ROOT c = f32[3,5] convolution(l, r), dim_labels=bf_io->bf
}
"""
    np.testing.assert_allclose(run(text, "c", [a, b]), a @ b, rtol=1e-5, atol=1e-6)
    # no window / dim_labels: XlaBuilder's default numbers bf0_oi0->bf0, window size 1
    x = rng.standard_normal((1, 2, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 1)).astype(np.float32)
    text = """
HloModule c
ENTRY e {
  l = f32[1,2,5] parameter(0)
  r = f32[3,2,1] parameter(1)
  ROOT c = f32[1,3,5] convolution(l, r)
}
"""
    np.testing.assert_allclose(run(text, "c", [x, w]), np.einsum("bcs,oc->bos", x, w[..., 0]),
                               rtol=1e-5, atol=1e-6)
