"""Gemm plans (the cuBLASLt calls of a dot) against the interpreter, without a GPU: a numpy
model of cublasLtMatmul (column-major matrices at ``i + j * ld``, op N/T, strided
batches, beta * C, the bias and activation epilogues) runs each plan on the operands'
bytes in memory order, and the result must be the interpreter's."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.api import load, parse_hlo
from hlo_opt.autotune.buffers import from_physical, to_physical
from hlo_opt.backends.cuda.gemm_plan import gemm_plan
from hlo_opt.backends.interpreter.ops_gemm import cublas_gemm, dot_general
from tests.conftest import SAMPLES, ROOT

GELU_C = np.sqrt(2.0 / np.pi)


def _matrix(flat, offset, mat):
    i = np.arange(mat.rows)[:, None]
    j = np.arange(mat.cols)[None, :]
    return offset + i + j * mat.ld


def cublaslt_model(plan, a, b, c, bias, with_aux=False):
    """cublasLtMatmul as documented, on flat arrays (float64; ``c`` also gives D's size);
    returns D's flat array (and, ``with_aux``, the aux buffer: the pre-activation of an
    ``*_AUX`` epilogue at D's positions, its leading dimension D's)."""
    d = np.array(c, dtype=np.float64)
    d_out = d.copy()
    aux = np.zeros_like(d)
    for oa, ob, od in plan.outer or ((0, 0, 0),):
        for q in range(plan.batch):
            ia = _matrix(a, oa + q * plan.a.batch_stride, plan.a)
            ib = _matrix(b, ob + q * plan.b.batch_stride, plan.b)
            idd = _matrix(d, od + q * plan.d.batch_stride, plan.d)
            opa = a[ia].T if plan.trans_a else a[ia]
            opb = b[ib].T if plan.trans_b else b[ib]
            acc = plan.alpha * (opa @ opb)
            if plan.beta:
                acc = acc + plan.beta * d[idd]
            if bias is not None:
                acc = acc + bias[:, None]
            if plan.aux:
                aux[idd] = acc
            if "RELU" in plan.epilogue:
                acc = np.maximum(acc, 0)
            if "GELU" in plan.epilogue:
                acc = 0.5 * acc * (1 + np.tanh(GELU_C * (acc + 0.044715 * acc ** 3)))
            d_out[idd] = acc
    return (d_out, aux) if with_aux else d_out


def run_plan(inst, args):
    plan = gemm_plan(inst)
    assert plan is not None, inst.to_text()
    flat = [to_physical(o.shape, x).reshape(-1).astype(np.float64)
            for o, x in zip(inst.operands, args)]
    ia, ib = plan.operands
    out_shape = inst.shape.tuple_shapes[0] if inst.shape.is_tuple() else inst.shape
    c = flat[plan.c_operand] if plan.c_operand is not None else np.zeros(
        out_shape.num_elements())
    bias = flat[plan.bias_operand] if plan.bias_operand is not None else None
    d, aux = cublaslt_model(plan, flat[ia], flat[ib], c, bias, with_aux=True)
    size = out_shape.num_elements()
    got = from_physical(out_shape, d[:size].astype(out_shape.dtype))
    if plan.aux:  # the aux output has D's layout (gemm_plan checks)
        return plan, (got, from_physical(inst.shape.tuple_shapes[1],
                                         aux[:size].astype(out_shape.dtype)))
    return plan, got


def expected(inst, args):
    if inst.opcode == "dot":
        return dot_general(*(a.astype(np.float64) for a in args[:2]),
                           list(inst.attr("lhs_contracting_dims", ())),
                           list(inst.attr("rhs_contracting_dims", ())),
                           list(inst.attr("lhs_batch_dims", ())),
                           list(inst.attr("rhs_batch_dims", ())))
    r = cublas_gemm(inst, args, None)
    if isinstance(r, tuple) and gemm_plan(inst).aux:
        return r[0], r[1]
    return r[0] if isinstance(r, tuple) else r


def random_args(inst, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(o.shape.dims).astype(o.shape.dtype) for o in inst.operands]


def check(inst, seed=0):
    args = random_args(inst, seed)
    plan, got = run_plan(inst, args)
    want = expected(inst, args)
    pairs = zip(got, want) if plan.aux else [(got, want)]
    for g, w in pairs:
        w = np.asarray(w, dtype=np.float64)
        # the interpreter accumulates in f32, the model in f64: bounds on the result's scale
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-4, atol=1e-5 * scale)
    return plan


def gemm_call(*args, **kwargs):
    return parse_hlo(gemm_text(*args, **kwargs)).entry.root


def gemm_text(lhs, rhs, out, dnums, beta=0, epilogue="DEFAULT", extra=()):
    ops = ", ".join([f"{lhs} %a", f"{rhs} %b"] + [f"{s} %{n}" for n, s in extra])
    params = "\n".join(f"  %{n} = {s} parameter({i})" for i, (n, s) in enumerate(
        [("a", lhs), ("b", rhs)] + list(extra)))
    cfg = ('{"gemm_backend_config":{"alpha_real":1,"alpha_imag":0,"beta":%s,'
           '"dot_dimension_numbers":%s,"epilogue":"%s"}}' % (beta, dnums, epilogue))
    text = f"""HloModule m
ENTRY e {{
{params}
  ROOT %g = ({out}, s8[1024]{{0}}) custom-call({ops}), custom_call_target="__cublas$lt$matmul", backend_config={cfg}
}}"""
    return text


def dnums(lc, rc, lb=(), rb=()):
    f = lambda xs: "[" + ",".join(f'"{x}"' for x in xs) + "]"  # noqa: E731
    return ('{"lhs_contracting_dimensions":%s,"rhs_contracting_dimensions":%s,'
            '"lhs_batch_dimensions":%s,"rhs_batch_dimensions":%s}' % (f(lc), f(rc), f(lb), f(rb)))


# ---- plain dots: every operand layout, row- and column-major outputs ----------------------------
@pytest.mark.parametrize("lhs_l", ["{1,0}", "{0,1}"])
@pytest.mark.parametrize("rhs_l", ["{1,0}", "{0,1}"])
@pytest.mark.parametrize("out_l", ["{1,0}", "{0,1}"])
def test_2d_dot_layouts(lhs_l, rhs_l, out_l):
    m = parse_hlo(f"""HloModule m
ENTRY e {{
  %a = f32[5,7]{lhs_l} parameter(0)
  %b = f32[7,3]{rhs_l} parameter(1)
  ROOT %d = f32[5,3]{out_l} dot(%a, %b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}""")
    plan = check(m.entry.root)
    assert plan.swapped == (out_l == "{1,0}") and plan.batch == 1 and not plan.outer


def test_matrix_vector_and_degenerate_sizes():
    m = parse_hlo("""HloModule m
ENTRY e {
  %a = f32[1,9]{1,0} parameter(0)
  %b = f32[9]{0} parameter(1)
  ROOT %d = f32[1]{0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
    check(m.entry.root)


# ---- batched custom calls ---------------------------------------------------------------------
@pytest.mark.parametrize("lhs_l", ["{3,2,1,0}", "{2,1,3,0}", "{2,3,0,1}"])
def test_batched_gemm_layouts(lhs_l):
    """Two batch dims; a transposed operand layout whose batch dims do not collapse (a host
    loop of calls) and one whose do."""
    inst = gemm_call(f"f32[3,4,6,5]{lhs_l}", "f32[3,4,5,2]{3,2,1,0}", "f32[3,4,6,2]{3,2,1,0}",
                     dnums([3], [2], [0, 1], [0, 1]))
    plan = check(inst)
    if lhs_l == "{3,2,1,0}":
        assert plan.batch == 12 and not plan.outer
    else:
        assert plan.batch * max(len(plan.outer), 1) == 12


def test_batch_on_one_side_only_is_a_zero_stride():
    inst = gemm_call("f32[4,6,5]{2,1,0}", "f32[5,2]{1,0}", "f32[4,6,2]{2,1,0}",
                     dnums([2], [0], [0], []))
    plan = check(inst)
    assert plan.batch == 4 and 0 in (plan.a.batch_stride, plan.b.batch_stride)


def test_beta_and_bias_epilogues():
    inst = gemm_call("f32[6,5]{1,0}", "f32[5,4]{1,0}", "f32[6,4]{1,0}", dnums([1], [0]),
                     beta=1, extra=[("c", "f32[6,4]{1,0}")])
    plan = check(inst)
    assert plan.c_operand == 2 and plan.beta == 1
    for epi in ("BIAS", "BIAS_RELU", "BIAS_GELU", "RELU", "GELU"):
        extra = [("bias", "f32[4]{0}")] if epi.startswith("BIAS") else []
        check(gemm_call("f32[6,5]{1,0}", "f32[4,5]{1,0}", "f32[6,4]{1,0}", dnums([1], [1]),
                        epilogue=epi, extra=extra), seed=3)


@pytest.mark.parametrize("epi", ["GELU_AUX", "BIAS_GELU_AUX"])
@pytest.mark.parametrize("out_l", ["{1,0}", "{0,1}"])
def test_aux_epilogues_return_the_pre_activation(epi, out_l):
    extra = [("bias", "f32[8]{0}" if out_l == "{1,0}" else "f32[16]{0}")] \
        if epi.startswith("BIAS") else []
    out = f"f32[16,8]{out_l}, f32[16,8]{out_l}"
    plan = check(gemm_call("f32[16,5]{1,0}", "f32[5,8]{1,0}", out, dnums([1], [0]),
                           epilogue=epi, extra=extra), seed=4)
    assert plan.aux and plan.first_workspace == 2


def test_refused_forms():
    # two contracting dims; an aux epilogue without its output, or with an aux in another
    # layout, or a leading dimension cuBLASLt refuses (not a multiple of 8); C in another
    # layout than the output
    assert gemm_plan(gemm_call("f32[6,5,2]{2,1,0}", "f32[5,2,4]{2,1,0}", "f32[6,4]{1,0}",
                               dnums([1, 2], [0, 1]))) is None
    assert gemm_plan(gemm_call("f32[6,5]{1,0}", "f32[5,4]{1,0}", "f32[6,4]{1,0}",
                               dnums([1], [0]), epilogue="GELU_AUX")) is None
    assert gemm_plan(gemm_call("f32[6,5]{1,0}", "f32[5,8]{1,0}",
                               "f32[6,8]{1,0}, f32[6,8]{0,1}", dnums([1], [0]),
                               epilogue="GELU_AUX")) is None
    assert gemm_plan(gemm_call("f32[6,5]{1,0}", "f32[5,4]{1,0}",
                               "f32[6,4]{1,0}, f32[6,4]{1,0}", dnums([1], [0]),
                               epilogue="GELU_AUX")) is None
    assert gemm_plan(gemm_call("f32[6,5]{1,0}", "f32[5,4]{1,0}", "f32[6,4]{1,0}",
                               dnums([1], [0]), beta=1, extra=[("c", "f32[6,4]{0,1}")])) is None


# ---- every gemm of the gpu pipeline on the benchmark modules and samples ------------------------
@pytest.mark.parametrize("path", [
    ROOT / "benchmarks" / "xla_gpu_modules" / "transformer_step.hlo",
    ROOT / "benchmarks" / "xla_gpu_modules" / "attention_f32.hlo",
    ROOT / "benchmarks" / "xla_gpu_modules" / "attention_bf16.hlo",
    SAMPLES / "mlp_train_step.hlo", SAMPLES / "matmul_bias_gelu.hlo",
    SAMPLES / "transformer_step.hlo"], ids=lambda p: p.stem)
def test_pipeline_gemms_all_planned(path):
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    m = passes_api.optimize(load(str(path)), DebugOptions.from_sources([]), pipeline="gpu")
    calls = [i for c in m.computations for i in c.instructions
             if i.opcode == "custom-call" and "cublas" in i.attrs.get("custom_call_target", "")]
    assert calls
    seen = set()
    for inst in calls:
        key = (tuple(o.shape.to_text() for o in inst.operands), inst.shape.to_text(),
               inst.attrs.get("backend_config"))
        if key in seen:
            continue
        seen.add(key)
        if inst.operands[0].shape.element_type in ("bf16", "f16"):
            args = random_args(inst)
            plan, got = run_plan(inst, args)
            want = np.asarray(expected(inst, args), dtype=np.float64)
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2, atol=2e-2)
        else:
            check(inst)


def test_autotune_gemm_candidates_pass_the_plans_operands():
    """The CUDA provider's cuBLASLt algorithm candidates hand cuBLASLt the tuner's buffers
    in the plan's roles (A/B swapped for a row-major output, C, bias) and the algorithm
    index; a cuBLAS error disqualifies the candidate."""
    from types import SimpleNamespace

    from hlo_opt.autotune.candidates import CandidateError
    from hlo_opt.backends.cuda.autotune import GemmCandidate

    class FakeLt:
        def __init__(self, fail=False):
            self.calls, self.fail = [], fail

        def run(self, plan, a, b, c, d, bias, aux):
            if self.fail:
                raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")
            self.calls.append((plan.algorithm, a, b, c, d, bias, aux))

    inst = gemm_call("f32[6,5]{1,0}", "f32[5,4]{1,0}", "f32[6,4]{1,0}", dnums([1], [0]),
                     beta=1, epilogue="BIAS", extra=[("c", "f32[6,4]{1,0}"),
                                                     ("bias", "f32[4]{0}")])
    plan = gemm_plan(inst)
    buf = lambda a: SimpleNamespace(address=a)  # noqa: E731
    lt = FakeLt()
    GemmCandidate(lt, plan, 3).run([buf(100), buf(200), buf(300), buf(400)],
                                   [buf(500), buf(600)], None)
    assert lt.calls == [(3, 200, 100, 300, 500, 400, None)]
    aux = gemm_plan(gemm_call("f32[16,5]{1,0}", "f32[5,8]{1,0}", "f32[16,8]{1,0}, f32[16,8]{1,0}",
                              dnums([1], [0]), epilogue="GELU_AUX"))
    lt = FakeLt()
    GemmCandidate(lt, aux, 0).run([buf(100), buf(200)], [buf(500), buf(600), buf(700)], None)
    assert lt.calls == [(0, 200, 100, 500, 500, None, 600)]
    with pytest.raises(CandidateError, match="NOT_SUPPORTED"):
        GemmCandidate(FakeLt(fail=True), plan, 0).run([buf(1)] * 4, [buf(2)] * 2, None)


def test_workspace_zeroed_only_when_read():
    """A gemm's workspace output is zeroed (the interpreter's value) only where something
    can read it: not behind a get-tuple-element of the value alone (cuBLASLt's 32 MB
    workspace per call was memset on every gemm)."""
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.backends.cuda.target import target_device
    text = gemm_text("f32[6,5]{1,0}", "f32[5,4]{1,0}", "f32[6,4]{1,0}", dnums([1], [0]))
    module = parse_hlo(text)
    gte = parse_hlo(text.replace("ROOT %g = ", "%g = ").replace(
        "\n}", "\n  ROOT %v = f32[6,4]{1,0} get-tuple-element(%g), index=0\n}"))
    for mod, zeroed in ((module, 1), (gte, 0)):
        prog = build_program(mod, target_device(mod, None), use_libraries=True)
        (lib,) = [t for t in prog.entry.thunks if t.kind == "library"]
        assert len(lib.workspaces) == zeroed
