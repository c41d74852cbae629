"""dot through BLAS: every layout combination of a 2-D dot, batched dots, several
contracting / free dims; each checked against the interpreter, and the plan says which
dots are one GEMM per batch element."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402
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


def _check(m, expect_gemm=True):
    dot = m.entry.root
    assert (gemm_plan(dot) is not None) == expect_gemm
    args = random_arguments(m, seed=2)
    got = CpuExecutable(m, cache=False).run(args)[0]
    np.testing.assert_allclose(got, Interpreter(m).run(args)[0], rtol=1e-4, atol=1e-4)


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
                   "lhs_contracting_dims={0}, rhs_contracting_dims={0}"))


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
