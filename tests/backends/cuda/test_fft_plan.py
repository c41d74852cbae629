"""FFT plans (the cuFFT call of an ``fft``) against the interpreter, without a GPU: a numpy
model of cufftMakePlanMany64 + cufftExec* (contiguous row-major batch elements ``idist`` /
``odist`` apart, unnormalized inverse transforms, C2R reading only what a Hermitian input
defines) plus the plan's scale runs each plan on the operand's bytes in memory order; the
result must be the interpreter's."""
from __future__ import annotations

import math
import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.autotune.buffers import from_physical, to_physical
from hlo_opt.backends.cuda.fft_plan import FORWARD, fft_plan
from hlo_opt.backends.interpreter.ops_fft import fft as interpret_fft
from tests.conftest import CORPUS, corpus_files


def cufft_model(plan, flat_in: np.ndarray, out_size: int) -> np.ndarray:
    """cuFFT's transform of ``plan.batch`` contiguous blocks, then the plan's scale."""
    lengths = plan.lengths
    in_block = lengths if plan.transform not in ("C2R", "Z2D") else \
        lengths[:-1] + (lengths[-1] // 2 + 1,)
    out = np.zeros(out_size, dtype=np.complex128 if plan.out_dtype.startswith("c")
                   else np.float64)
    axes = tuple(range(len(lengths)))
    n = math.prod(lengths)
    for b in range(plan.batch):
        x = flat_in[b * plan.idist:b * plan.idist + math.prod(in_block)].reshape(in_block)
        if plan.transform in ("C2C", "Z2Z"):
            y = np.fft.fftn(x, axes=axes) if plan.direction == FORWARD \
                else np.fft.ifftn(x, axes=axes) * n          # cuFFT: unnormalized
        elif plan.transform in ("R2C", "D2Z"):
            y = np.fft.rfftn(x.astype(np.float64), axes=axes)
        else:
            y = np.fft.irfftn(x, s=lengths, axes=axes) * n
        y = y.reshape(-1)
        out[b * plan.odist:b * plan.odist + y.size] = y
    return out * plan.scale


def fft_module(in_type, dims, out_type, out_dims, fft_type, lengths, in_l=None, out_l=None):
    lay = lambda rank, given: given or "{" + ",".join(map(str, range(rank - 1, -1, -1))) + "}"  # noqa: E731
    d = lambda xs: ",".join(map(str, xs))  # noqa: E731
    return parse_hlo(f"""HloModule m
ENTRY e {{
  %x = {in_type}[{d(dims)}]{lay(len(dims), in_l)} parameter(0)
  ROOT %f = {out_type}[{d(out_dims)}]{lay(len(out_dims), out_l)} fft(%x), fft_type={fft_type}, fft_length={{{d(lengths)}}}
}}""")


def random_input(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape.dims)
    if shape.element_type.startswith("c"):
        x = x + 1j * rng.standard_normal(shape.dims)
    return x.astype(shape.dtype)


def check(inst, seed=0, x=None):
    plan = fft_plan(inst)
    assert plan is not None, inst.to_text()
    xs = inst.operands[0].shape
    x = random_input(xs, seed) if x is None else x
    flat = to_physical(xs, x).reshape(-1).astype(np.complex128 if xs.element_type[0] == "c"
                                                 else np.float64)
    got = from_physical(inst.shape, cufft_model(plan, flat, inst.shape.num_elements())
                        .astype(inst.shape.dtype))
    want = interpret_fft(inst, [x], None)
    wide = inst.shape.element_type in ("f64", "c128")
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-9 if wide else 1e-4,
                               atol=(1e-9 if wide else 1e-5) * scale)
    return plan


def hermitian_input(shape, lengths, seed):
    """An IRFFT operand that a real signal has (what C2R's result is defined for)."""
    rng = np.random.default_rng(seed)
    real = rng.standard_normal(tuple(shape.dims[:-len(lengths)]) + tuple(lengths))
    axes = tuple(range(real.ndim - len(lengths), real.ndim))
    return np.fft.rfftn(real, axes=axes).astype(shape.dtype)


@pytest.mark.parametrize("ctype", ["c64", "c128"])
@pytest.mark.parametrize("fft_type", ["FFT", "IFFT"])
@pytest.mark.parametrize("dims, lengths", [([16], [16]), ([3, 8], [8]), ([2, 4, 6], [4, 6]),
                                           ([2, 3, 4, 5], [3, 4, 5]), ([5, 2, 2, 7], [7])])
def test_c2c(ctype, fft_type, dims, lengths):
    plan = check(fft_module(ctype, dims, ctype, dims, fft_type, lengths).entry.root)
    assert plan.transform == ("C2C" if ctype == "c64" else "Z2Z")
    assert plan.batch == math.prod(dims[:len(dims) - len(lengths)])
    assert plan.scale == (1.0 if fft_type == "FFT" else 1.0 / math.prod(lengths))


@pytest.mark.parametrize("rtype, ctype", [("f32", "c64"), ("f64", "c128")])
@pytest.mark.parametrize("dims, lengths", [([10], [10]), ([3, 9], [9]), ([2, 4, 6], [4, 6]),
                                           ([2, 3, 4, 6], [3, 4, 6])])
def test_r2c_and_c2r(rtype, ctype, dims, lengths):
    half = dims[:-1] + [dims[-1] // 2 + 1]
    r2c = fft_module(rtype, dims, ctype, half, "RFFT", lengths).entry.root
    plan = check(r2c)
    assert plan.transform in ("R2C", "D2Z") and (plan.idist, plan.odist) == (
        math.prod(lengths), math.prod(lengths[:-1]) * (lengths[-1] // 2 + 1))
    c2r = fft_module(ctype, half, rtype, dims, "IRFFT", lengths).entry.root
    plan = check(c2r, x=hermitian_input(c2r.operands[0].shape, lengths, 1))
    assert plan.copies_input and plan.scale == 1.0 / math.prod(lengths)


def test_batch_dims_permuted_alike():
    inst = fft_module("c64", [3, 4, 8], "c64", [3, 4, 8], "FFT", [8],
                      in_l="{2,0,1}", out_l="{2,0,1}").entry.root
    plan = check(inst)
    assert (plan.batch, plan.idist) == (12, 8)


@pytest.mark.parametrize("in_l, out_l", [("{1,2,0}", "{1,2,0}"), ("{2,1,0}", "{2,0,1}"),
                                         ("{0,2,1}", "{0,2,1}")])
def test_other_layouts_stay_on_the_host(in_l, out_l):
    inst = fft_module("c64", [3, 4, 8], "c64", [3, 4, 8], "FFT", [8], in_l, out_l).entry.root
    assert fft_plan(inst) is None


def test_not_an_fft_or_unknown_types():
    m = parse_hlo("""HloModule m
ENTRY e {
  %x = f32[8]{0} parameter(0)
  ROOT %n = f32[8]{0} negate(%x)
}""")
    assert fft_plan(m.entry.root) is None


def _corpus_ffts():
    return [p for p in corpus_files() if " fft(" in p.read_text(errors="replace")]


def test_corpus_ffts():
    paths = _corpus_ffts()
    if not paths:
        pytest.skip(f"no corpus module with an fft under {CORPUS}")
    from hlo_opt.api import load
    checked = 0
    for p in paths:
        try:
            m = load(str(p))
        except Exception as e:  # noqa: BLE001 - a module the parser rejects is not ours
            print(f"skip {p.name}: {e}")
            continue
        for comp in m.computations:
            for inst in comp.instructions:
                if inst.opcode == "fft" and fft_plan(inst) is not None:
                    x = inst.operands[0].shape
                    if inst.attrs.get("fft_type", "").strip().upper() == "IRFFT":
                        lengths = [int(v) for v in inst.attr("fft_length", ())]
                        check(inst, x=hermitian_input(x, lengths, 0))
                    else:
                        check(inst)
                    checked += 1
    print(f"{checked} corpus ffts checked in {len(paths)} modules")
