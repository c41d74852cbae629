"""cholesky and triangular-solve: reconstructions and explicit dense solves."""
from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

from tests.support.heavy_helpers import run


def _spd(rng, batch, n, dtype=np.float64):
    a = rng.standard_normal(batch + (n, n))
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(batch + (n, n))
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


CHOL = """
HloModule c
ENTRY e {
  a = {t}[{d}] parameter(0)
  ROOT c = {t}[{d}] cholesky(a){lower}
}
"""


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("t,dtype", [("f32", np.float32), ("f64", np.float64),
                                     ("c64", np.complex64)])
def test_cholesky_reconstructs_and_reads_one_triangle(lower, t, dtype):
    rng = np.random.default_rng(0)
    a = _spd(rng, (2, 3), 5, dtype)
    # garbage in the triangle cholesky must not read
    junk = np.triu(np.full((5, 5), 99.0), 1) if lower else np.tril(np.full((5, 5), 99.0), -1)
    text = CHOL.replace("{t}", t).replace("{d}", "2,3,5,5").replace(
        "{lower}", ", lower=true" if lower else ", lower=false")
    out = run(text, "c", [(a + junk).astype(dtype)])
    tol = 1e-4 if dtype != np.float64 else 1e-10
    if lower:
        assert np.allclose(np.triu(out, 1), 0)
        recon = out @ np.conj(np.swapaxes(out, -1, -2))
    else:
        assert np.allclose(np.tril(out, -1), 0)
        recon = np.conj(np.swapaxes(out, -1, -2)) @ out
    np.testing.assert_allclose(recon, a, rtol=tol, atol=tol * 10)


def test_cholesky_default_is_upper_and_not_pd_gives_nan():
    a = np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)   # eigenvalues 3, -1
    out = run(CHOL.replace("{t}", "f32").replace("{d}", "2,2").replace("{lower}", ""),
              "c", [a])
    # a failed factorization is all NaN, as XLA's expander and cuSOLVER path give it
    assert np.isnan(out).all()
    # the upper default: an upper-triangular factor for a PD matrix
    spd = np.array([[4.0, 2.0], [2.0, 3.0]], np.float32)
    out = run(CHOL.replace("{t}", "f32").replace("{d}", "2,2").replace("{lower}", ""),
              "c", [spd])
    assert out[1, 0] == 0.0 and out[0, 0] == 2.0 and out[0, 1] == 1.0


def test_cholesky_failure_is_per_batch_element():
    good = np.array([[4.0, 2.0], [2.0, 3.0]], np.float32)
    bad = np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)
    out = run(CHOL.replace("{t}", "f32").replace("{d}", "2,2,2").replace(
        "{lower}", ", lower=true"), "c", [np.stack([good, bad])])
    assert np.isfinite(out[0]).all() and np.isnan(out[1]).all()


SOLVE = """
HloModule t
ENTRY e {
  a = {t}[{ad}] parameter(0)
  b = {t}[{bd}] parameter(1)
  ROOT x = {t}[{bd}] triangular-solve(a, b), left_side={left}, lower={lower},
      unit_diagonal={unit}, transpose_a={tr}
}
"""


@pytest.mark.parametrize("left,lower,unit,tr", list(itertools.product(
    [True, False], [True, False], [True, False], ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])))
def test_triangular_solve_all_options(left, lower, unit, tr):
    rng = np.random.default_rng(zlib.crc32(repr((left, lower, unit, tr)).encode()))
    t, dtype = ("c128", np.complex128) if tr == "ADJOINT" else ("f64", np.float64)
    m, n = 4, 3
    a = rng.standard_normal((2, m, m)) + 4 * np.eye(m)
    if dtype == np.complex128:
        a = a + 1j * rng.standard_normal((2, m, m))
    a = a.astype(dtype)
    bshape = (2, m, n) if left else (2, n, m)
    b = rng.standard_normal(bshape).astype(dtype)
    text = SOLVE.replace("{t}", t).replace("{ad}", f"2,{m},{m}").replace(
        "{bd}", ",".join(map(str, bshape))).replace("{left}", str(left).lower()).replace(
        "{lower}", str(lower).lower()).replace("{unit}", str(unit).lower()).replace("{tr}", tr)
    x = run(text, "x", [a, b])
    # the matrix the solve is defined by, built explicitly
    tri = np.tril(a) if lower else np.triu(a)
    if unit:  # the diagonal is taken as ones, whatever a holds there
        idx = np.arange(m)
        tri[..., idx, idx] = 1
    op = {"NO_TRANSPOSE": tri, "TRANSPOSE": np.swapaxes(tri, -1, -2),
          "ADJOINT": np.conj(np.swapaxes(tri, -1, -2))}[tr]
    if left:
        np.testing.assert_allclose(op @ x, b, rtol=1e-10, atol=1e-10)
    else:
        np.testing.assert_allclose(x @ op, b, rtol=1e-10, atol=1e-10)


def test_triangular_solve_f32_matches_dense_solve():
    rng = np.random.default_rng(4)
    a = np.tril(rng.standard_normal((5, 5))) + 5 * np.eye(5)
    b = rng.standard_normal((5, 2))
    text = SOLVE.replace("{t}", "f32").replace("{ad}", "5,5").replace("{bd}", "5,2").replace(
        "{left}", "true").replace("{lower}", "true").replace("{unit}", "false").replace(
        "{tr}", "NO_TRANSPOSE")
    x = run(text, "x", [a.astype(np.float32), b.astype(np.float32)])
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-5, atol=1e-6)


def test_triangular_solve_singular_gives_inf_or_nan():
    a = np.array([[1.0, 0.0], [3.0, 0.0]], np.float32)
    b = np.array([[1.0], [1.0]], np.float32)
    text = SOLVE.replace("{t}", "f32").replace("{ad}", "2,2").replace("{bd}", "2,1").replace(
        "{left}", "true").replace("{lower}", "true").replace("{unit}", "false").replace(
        "{tr}", "NO_TRANSPOSE")
    x = run(text, "x", [a, b])
    assert x[0, 0] == 1.0 and not np.isfinite(x[1, 0])
