"""dot through BLAS and, for matrix-vector products, as loops (``inline_dot.py``): every
layout combination of a 2-D dot, batched dots, several contracting / free dims; each
checked against the interpreter on both paths, and the plan says which dots are one GEMM
per batch element."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402
from hlo_opt.backends.cpu import inline_dot  # noqa: E402
from hlo_opt.backends.cpu.blas import gemm_plan  # noqa: E402


def _module(lhs, rhs, out, dims):
    return parse_hlo_modules(f"""
HloModule d
ENTRY e {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  ROOT d = {out} dot(a, b), {dims}
}}
""", "d.hlo")[0]


def _run(m, args, inline=True):
    """Run ``m``; ``inline=False``: no dot is emitted as loops (every GEMM-shaped one
    is a BLAS call)."""
    saved = inline_dot.GEMV_MAX_FLOPS
    if not inline:
        inline_dot.GEMV_MAX_FLOPS = 0
    try:
        exe = CpuExecutable(m, cache=False)
        return exe.run(args), exe.meta["native"]
    finally:
        inline_dot.GEMV_MAX_FLOPS = saved


def _check(m, expect_gemm=True, expect_inline=False):
    dot = m.entry.root
    assert (gemm_plan(dot) is not None) == expect_gemm
    args = random_arguments(m, seed=2)
    want = Interpreter(m).run(args)[0]
    for inline in (True, False):
        got, native = _run(m, args, inline)
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
        kind = native.get(dot.name, "host")
        if expect_gemm:
            assert kind == ("dot loops (matrix-vector: no BLAS call)"
                            if inline and expect_inline else "blas gemm"), kind


LAYOUTS = ["{1,0}", "{0,1}"]


@pytest.mark.parametrize("la,lb,lo", list(itertools.product(LAYOUTS, LAYOUTS, LAYOUTS)))
def test_2d_layouts(la, lb, lo):
    _check(_module(f"f32[5,7]{la}", f"f32[7,3]{lb}", f"f32[5,3]{lo}",
                   "lhs_contracting_dims={1}, rhs_contracting_dims={0}"))


def test_batched_and_vector_and_f64():
    _check(_module("f32[4,8,16,6]{3,2,1,0}", "f32[4,8,16,6]{3,2,1,0}",
                   "f32[4,8,16,16]{3,2,1,0}",
                   "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
                   "rhs_batch_dims={0,1}, rhs_contracting_dims={3}"))
    _check(_module("f64[9]{0}", "f64[9,4]{1,0}", "f64[4]{0}",
                   "lhs_contracting_dims={0}, rhs_contracting_dims={0}"), expect_inline=True)


def test_two_contracting_and_two_free_dims():
    # weight gradient: [b,s,d] x [b,s,f] contracting {0,1}
    _check(_module("f32[2,3,4]{2,1,0}", "f32[2,3,5]{2,1,0}", "f32[4,5]{1,0}",
                   "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}"))
    # two free dims on the lhs: [b,s,d] x [d,f]
    _check(_module("f32[2,3,4]{2,1,0}", "f32[4,5]{1,0}", "f32[2,3,5]{2,1,0}",
                   "lhs_contracting_dims={2}, rhs_contracting_dims={0}"))


def test_non_gemm_layout_runs_on_the_host():
    # batch dim not outermost in the lhs layout: no GEMM view; still right
    _check(_module("f32[3,4,5]{0,2,1}", "f32[3,5,2]{2,1,0}", "f32[3,4,2]{2,1,0}",
                   "lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                   "rhs_batch_dims={0}, rhs_contracting_dims={1}"), expect_gemm=False)


# ---- matrix-vector products as loops ----------------------------------------------------
# k = 45: five blocks of the dot-product form's 8 partial sums and a tail of 5, and five
# passes of 8 rows plus 5 in the row form; k = 3: the tail only.
@pytest.mark.parametrize("k", [45, 3])
@pytest.mark.parametrize("wl", LAYOUTS)
@pytest.mark.parametrize("et", ["f32", "f64"])
def test_vector_times_matrix_both_forms(k, wl, et):
    # {1,0}: B's rows are contiguous (the row form); {0,1}: its columns (dot products)
    _check(_module(f"{et}[{k}]{{0}}", f"{et}[{k},13]{wl}", f"{et}[13]{{0}}",
                   "lhs_contracting_dims={0}, rhs_contracting_dims={0}"), expect_inline=True)


@pytest.mark.parametrize("al", LAYOUTS)
@pytest.mark.parametrize("ol", LAYOUTS)
def test_matrix_times_vector_and_degenerate_dims(al, ol):
    _check(_module(f"f32[11,40]{al}", "f32[40]{0}", "f32[11]{0}",
                   "lhs_contracting_dims={1}, rhs_contracting_dims={0}"), expect_inline=True)
    # [1, k] x [k, n] -> [1, n]: m == 1 through a degenerate dim, in either output layout
    _check(_module("f32[1,40]{1,0}", f"f32[40,6]{al}", f"f32[1,6]{ol}",
                   "lhs_contracting_dims={1}, rhs_contracting_dims={0}"), expect_inline=True)


def test_batched_matrix_vector_and_dot_of_two_vectors():
    _check(_module("f32[3,5,33]{2,1,0}", "f32[3,33]{1,0}", "f32[3,5]{1,0}",
                   "lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                   "rhs_batch_dims={0}, rhs_contracting_dims={1}"), expect_inline=True)
    _check(_module("f32[3,33]{1,0}", "f32[3,33,7]{1,2,0}", "f32[3,7]{1,0}",
                   "lhs_batch_dims={0}, lhs_contracting_dims={1}, "
                   "rhs_batch_dims={0}, rhs_contracting_dims={1}"), expect_inline=True)
    _check(_module("f64[50]{0}", "f64[50]{0}", "f64[]",
                   "lhs_contracting_dims={0}, rhs_contracting_dims={0}"), expect_inline=True)


def test_gemms_and_large_matrix_vector_products_stay_blas_calls():
    both = _module("f32[4,8]{1,0}", "f32[8,4]{1,0}", "f32[4,4]{1,0}",
                   "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert not inline_dot.is_inline(gemm_plan(both.entry.root))
    big = _module("f32[8192]{0}", "f32[8192,4096]{1,0}", "f32[4096]{0}",
                  "lhs_contracting_dims={0}, rhs_contracting_dims={0}")
    assert not inline_dot.is_inline(gemm_plan(big.entry.root))
    empty = _module("f32[0]{0}", "f32[0,4]{1,0}", "f32[4]{0}",
                    "lhs_contracting_dims={0}, rhs_contracting_dims={0}")
    assert not inline_dot.is_inline(gemm_plan(empty.entry.root))
    _check(empty)
