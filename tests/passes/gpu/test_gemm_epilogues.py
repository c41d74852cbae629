"""cublas-gemm-rewriter's cuBLASLt epilogues: XLA's CublasLtGemmRewriteTest cases
(gemm_rewriter_test.cc) for RELU, BIAS, BIAS_RELU, GELU, BIAS_GELU, GELU_AUX and
BIAS_GELU_AUX, plain and through a slice or a bitcast of the gemm.  Every case is checked
on the rewritten graph and by the interpreter (the module before and after computes the
same), which runs the custom-calls with the semantics they replaced."""
from __future__ import annotations

import pytest

from passes.gpu.gemm_rewriter import LT_TARGET, gemm_config

from .util import check, entry_ops, run

LT = dict(xla_gpu_enable_cublaslt=True, xla_gpu_gemm_rewrite_size_threshold=0)
PASS = "cublas-gemm-rewriter"


def _lt(text, passes=PASS, rtol=1e-4, atol=1e-5, **flags):
    r = check(text, passes, rtol=rtol, atol=atol, **{**LT, **flags})
    assert r.changed and r.compared_runs == 2
    return r.module


def _gemms(m):
    return [i for i in m.entry.instructions if i.opcode == "custom-call"]


def _one_gemm(m):
    (g,) = _gemms(m)
    assert g.custom_call_target == LT_TARGET
    return g, gemm_config(g)


def _operand_names(g):
    return [o.name for o in g.operands]


# ---- ReLU -----------------------------------------------------------------------------------

def test_relu_activation():
    m = _lt("""HloModule test
ENTRY test {
  x = f32[2,3] parameter(0)
  y = f32[3,4] parameter(1)
  dot_a = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0)
  c_bcast = f32[2,4] broadcast(c), dimensions={}
  ROOT out = f32[2,4] maximum(dot_a, c_bcast)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "RELU" and cfg["beta"] == 0
    assert g.shape.to_text().startswith("(f32[2,4]{1,0}, s8[")
    assert "maximum" not in entry_ops(m)


def test_relu_activation_sliced():
    m = _lt("""HloModule test
ENTRY test {
  x = f32[2,3] parameter(0)
  y = f32[3,4] parameter(1)
  dot_a = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0)
  c_bcast = f32[2,2] broadcast(c), dimensions={}
  slice_a = f32[2,2] slice(dot_a), slice={[0:2], [0:2]}
  ROOT out = f32[2,2] maximum(slice_a, c_bcast)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "RELU"
    root = m.entry.root
    assert root.opcode == "slice" and root.operands[0].opcode == "get-tuple-element"
    assert root.operands[0].operands[0] is g


def test_matrix_bias_relu_activation():
    for n in (2, 4):  # MatrixBiasReluActivation and SquareMatrixBiasReluActivation
        m = _lt(f"""HloModule test
ENTRY test {{
  x = f32[{n},3] parameter(0)
  y = f32[3,4] parameter(1)
  z = f32[{n},4] parameter(2)
  dot_a = f32[{n},4] dot(x, y), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  add = f32[{n},4] add(dot_a, z)
  c = f32[] constant(0)
  c_bcast = f32[{n},4] broadcast(c), dimensions={{}}
  ROOT out = f32[{n},4] maximum(add, c_bcast)
}}
""")
        g, cfg = _one_gemm(m)
        assert cfg["epilogue"] == "RELU" and cfg["beta"] == 1
        assert _operand_names(g) == ["x", "y", "z"]


def test_vector_bias_relu_activation():
    m = _lt("""HloModule test
ENTRY test {
  x = f32[2,3] parameter(0)
  y = f32[3,4] parameter(1)
  z = f32[4] parameter(2)
  dot_a = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z_bcast = f32[2,4] broadcast(z), dimensions={1}
  add = f32[2,4] add(dot_a, z_bcast)
  c = f32[] constant(0)
  c_bcast = f32[2,4] broadcast(c), dimensions={}
  ROOT out = f32[2,4] maximum(add, c_bcast)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "BIAS_RELU" and cfg["beta"] == 0
    assert _operand_names(g) == ["x", "y", "z"]


def test_vector_bias_transposed_relu_activation():
    # after layout assignment the transpose is the gemm's {0,1} layout: the bias runs
    # along dim 0, the output's most minor physical dimension
    m = _lt("""HloModule test
ENTRY test {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[3,4]{1,0} parameter(1)
  z = f32[2]{0} parameter(2)
  dot_a = f32[2,4]{0,1} dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z_bcast = f32[2,4]{0,1} broadcast(z), dimensions={0}
  add = f32[2,4]{0,1} add(dot_a, z_bcast)
  c = f32[] constant(0)
  c_bcast = f32[2,4]{0,1} broadcast(c), dimensions={}
  maximum = f32[2,4]{0,1} maximum(add, c_bcast)
  ROOT out = f32[4,2]{1,0} bitcast(maximum)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "BIAS_RELU"
    assert g.shape.tuple_shapes[0].to_text() == "f32[2,4]{0,1}"


def test_vector_bias_incorrect_axis_fused_as_matrix():
    # same layout, bias along dim 1: not the minor dim, so the bias is a matrix (beta)
    m = _lt("""HloModule test
ENTRY test {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[3,4]{1,0} parameter(1)
  z = f32[4]{0} parameter(2)
  dot_a = f32[2,4]{0,1} dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z_bcast = f32[2,4]{0,1} broadcast(z), dimensions={1}
  ROOT add = f32[2,4]{0,1} add(dot_a, z_bcast)
}
""")
    assert "add" in entry_ops(m)  # a broadcast is never fused as a matrix bias
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "DEFAULT" and cfg["beta"] == 0


def test_vector_bias_then_matrix_bias_relu_activation():
    m = _lt("""HloModule test
ENTRY test {
  x = f32[2,3] parameter(0)
  y = f32[3,4] parameter(1)
  z_vec = f32[4] parameter(2)
  z_matrix = f32[2,4] parameter(3)
  dot_a = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z_bcast = f32[2,4] broadcast(z_vec), dimensions={1}
  add0 = f32[2,4] add(dot_a, z_bcast)
  add1 = f32[2,4] add(add0, z_matrix)
  c = f32[] constant(0)
  c_bcast = f32[2,4] broadcast(c), dimensions={}
  ROOT out = f32[2,4] maximum(add1, c_bcast)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "BIAS_RELU" and cfg["beta"] == 1
    assert _operand_names(g) == ["x", "y", "z_matrix", "z_vec"]


# ---- vector bias ----------------------------------------------------------------------------

def test_vector_bias():
    m = _lt("""HloModule test
ENTRY test {
  x = f32[2,3] parameter(0)
  y = f32[3,4] parameter(1)
  z = f32[4] parameter(2)
  dot_a = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z_bcast = f32[2,4] broadcast(z), dimensions={1}
  ROOT out = f32[2,4] add(dot_a, z_bcast)
}
""")
    _, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "BIAS"


def test_vector_bias_sliced():
    # the vector covers the first 3 of the gemm's 4 columns; the slice drops the rest
    m = _lt("""HloModule test
ENTRY test {
  x = f32[4,3] parameter(0)
  y = f32[3,4] parameter(1)
  z = f32[3] parameter(2)
  dot_a = f32[4,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  slice_a = f32[2,3] slice(dot_a), slice={[0:2], [0:3]}
  z_bcast = f32[2,3] broadcast(z), dimensions={1}
  ROOT out = f32[2,3] add(slice_a, z_bcast)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "BIAS" and _operand_names(g) == ["x", "y", "z"]
    assert g.shape.tuple_shapes[0].dims == (4, 4)
    assert m.entry.root.opcode == "slice"


def test_vector_bias_of_offset_slice_is_not_fused():
    # a slice that does not start at 0 would shift the bias: left alone
    m = run("""HloModule test
ENTRY test {
  x = f32[4,3] parameter(0)
  y = f32[3,4] parameter(1)
  z = f32[3] parameter(2)
  dot_a = f32[4,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  slice_a = f32[2,3] slice(dot_a), slice={[0:2], [1:4]}
  z_bcast = f32[2,3] broadcast(z), dimensions={1}
  ROOT out = f32[2,3] add(slice_a, z_bcast)
}
""", PASS, **LT)
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "DEFAULT" and "add" in entry_ops(m)


# ---- matrix bias ---------------------------------------------------------------------------

def test_matrix_bias_where_bias_is_not_a_parameter():
    m = _lt("""HloModule test
ENTRY test {
  w = f32[2,3] parameter(0)
  x = f32[3,4] parameter(1)
  first_dot = f32[2,4] dot(w, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  y = f32[2,3] parameter(2)
  z = f32[3,4] parameter(3)
  second_dot = f32[2,4] dot(y, z), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = f32[2,4] add(second_dot, first_dot)
}
""")
    first, second = sorted(_gemms(m), key=lambda g: len(g.operands))
    assert gemm_config(first)["beta"] == 0 and gemm_config(second)["beta"] == 1
    assert second.operands[2].opcode == "get-tuple-element"
    assert second.operands[2].operands[0] is first
    assert second.attrs["output_to_operand_aliasing"] == "{{0}: (2, {})}"


def test_matrix_bias_f16():
    m = _lt("""HloModule test
ENTRY test {
  x = f16[8,16] parameter(0)
  y = f16[16,8] parameter(1)
  z = f16[8,8] parameter(2)
  dot_a = f16[8,8] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = f16[8,8] add(dot_a, z)
}
""", rtol=1e-2, atol=1e-2)
    g, cfg = _one_gemm(m)
    assert cfg["beta"] == 1 and cfg["epilogue"] == "DEFAULT"


def test_matrix_bias_through_a_bitcast():
    # add(bitcast(gemm), bias) -> bitcast(gemm(a, b, bitcast(bias)))
    m = _lt("""HloModule test
ENTRY test {
  x = f32[6,4] parameter(0)
  y = f32[4,30] parameter(1)
  z = f32[2,3,5,6] parameter(2)
  dot_a = f32[6,30] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bc = f32[2,3,5,6] bitcast(dot_a)
  ROOT out = f32[2,3,5,6] add(bc, z)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["beta"] == 1
    assert g.operands[2].opcode == "bitcast" and g.operands[2].operands[0].name == "z"
    assert m.entry.root.opcode == "bitcast"


def test_batched_shared_vector_bias_is_a_matrix_bias():
    # XLA's BatchedSharedVectorBias after dot decomposition: the broadcast vector along
    # the bitcast's minor dim (6) is not the gemm's minor dim (30): matrix bias, beta 1
    m = _lt("""HloModule test
ENTRY test {
  x = f32[6,4] parameter(0)
  y = f32[4,30] parameter(1)
  z = f32[6] parameter(2)
  dot_a = f32[6,30] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bc = f32[2,3,5,6] bitcast(dot_a)
  z_bcast = f32[2,3,5,6] broadcast(z), dimensions={3}
  ROOT out = f32[2,3,5,6] add(bc, z_bcast)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["beta"] == 1 and cfg["epilogue"] == "DEFAULT"
    assert g.attrs["output_to_operand_aliasing"] == "{{0}: (2, {})}"
    assert m.entry.root.opcode == "bitcast"


def test_matrix_bias_of_padded_gemm_is_padded():
    m = _lt("""HloModule test
ENTRY test {
  x = f32[4,3] parameter(0)
  y = f32[3,4] parameter(1)
  z = f32[2,3] parameter(2)
  n = f32[2,3] negate(z)
  dot_a = f32[4,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  slice_a = f32[2,3] slice(dot_a), slice={[0:2], [0:3]}
  ROOT out = f32[2,3] add(slice_a, n)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["beta"] == 1
    pad = g.operands[2]
    assert pad.opcode == "pad" and pad.shape.dims == (4, 4)
    assert pad.attrs["padding"] == "0_2x0_1"


def test_bias_broadcast_of_a_constant_is_materialised():
    # MaybeConstantFoldBias: reshape(broadcast(non-scalar constant)) becomes a constant
    m = _lt("""HloModule test
ENTRY test {
  x = f32[2,3] parameter(0)
  y = f32[3,4] parameter(1)
  c = f32[4] constant({1, 2, 3, 4})
  b = f32[1,2,4] broadcast(c), dimensions={2}
  r = f32[2,4] reshape(b)
  dot_a = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = f32[2,4] add(dot_a, r)
}
""")
    g, cfg = _one_gemm(m)
    assert cfg["beta"] == 1 and g.operands[2].opcode == "constant"
    assert "broadcast" not in entry_ops(m)


# ---- GELU -----------------------------------------------------------------------------------

def _gelu(x: str, shape: str, out: str, root: str | None = None, c0="0.044715") -> str:
    """XLA's tanh-approximate GELU of ``x`` (every const broadcast to ``shape``)."""
    t = shape
    lines = [
        f"  mul.0 = {t} multiply({x}, {x})",
        f"  mul.1 = {t} multiply({x}, mul.0)",
        f"  const.0 = {t.split('[')[0]}[] constant({c0})",
        f"  bcast.0 = {t} broadcast(const.0), dimensions={{}}",
        f"  mul.2 = {t} multiply(mul.1, bcast.0)",
        f"  add.0 = {t} add({x}, mul.2)",
        f"  const.1 = {t.split('[')[0]}[] constant(0.797884583)",
        f"  bcast.1 = {t} broadcast(const.1), dimensions={{}}",
        f"  mul.3 = {t} multiply(add.0, bcast.1)",
        f"  tanh = {t} tanh(mul.3)",
        f"  const.2 = {t.split('[')[0]}[] constant(1)",
        f"  bcast.2 = {t} broadcast(const.2), dimensions={{}}",
        f"  add.2 = {t} add(tanh, bcast.2)",
        f"  const.3 = {t.split('[')[0]}[] constant(0.5)",
        f"  bcast.3 = {t} broadcast(const.3), dimensions={{}}",
        f"  mul.4 = {t} multiply(add.2, bcast.3)",
        f"  {'ROOT ' if root is None else ''}{out} = {t} multiply({x}, mul.4)"]
    if root is not None:
        lines.append(f"  ROOT {root}")
    return "\n".join(lines)


HEAD = """HloModule test
ENTRY test {
  x = f32[2,3] parameter(0)
  y = f32[3,4] parameter(1)
"""


def test_approx_gelu_activation():
    m = _lt(HEAD + "  dot = f32[2,4] dot(x, y), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}\n" + _gelu("dot", "f32[2,4]", "out") + "\n}\n")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "GELU" and len(g.shape.tuple_shapes) == 2
    assert "tanh" not in entry_ops(m)


def test_approx_gelu_activation_wrong_constant():
    m = run(HEAD + "  dot = f32[2,4] dot(x, y), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}\n" + _gelu("dot", "f32[2,4]", "out", c0="0.05") + "\n}\n",
            PASS, **LT)
    _, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "DEFAULT" and "tanh" in entry_ops(m)


def test_vector_bias_then_approx_gelu_activation():
    m = _lt(HEAD + """  z = f32[4] parameter(2)
  dot = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z_bcast = f32[2,4] broadcast(z), dimensions={1}
  add = f32[2,4] add(dot, z_bcast)
""" + _gelu("add", "f32[2,4]", "out") + "\n}\n")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "BIAS_GELU" and _operand_names(g) == ["x", "y", "z"]


def test_approx_gelu_activation_with_aux():
    m = _lt(HEAD + "  dot = f32[2,4] dot(x, y), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}\n" +
            _gelu("dot", "f32[2,4]", "mul.5",
                  "out = (f32[2,4], f32[2,4]) tuple(mul.5, dot)") + "\n}\n")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "GELU_AUX"
    # (gelu, pre-activation, workspace), as XLA's CHECK line
    texts = [s.to_text() for s in g.shape.tuple_shapes]
    assert texts[:2] == ["f32[2,4]{1,0}", "f32[2,4]{1,0}"] and texts[2].startswith("s8[")
    root = m.entry.root
    assert [(o.opcode, o.attr("index")) for o in root.operands] == [
        ("get-tuple-element", 0), ("get-tuple-element", 1)]
    assert all(o.operands[0] is g for o in root.operands)


def test_vector_bias_then_approx_gelu_activation_with_aux():
    m = _lt(HEAD + """  z = f32[4] parameter(2)
  dot = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z_bcast = f32[2,4] broadcast(z), dimensions={1}
  add = f32[2,4] add(dot, z_bcast)
""" + _gelu("add", "f32[2,4]", "mul.5", "out = (f32[2,4], f32[2,4]) tuple(mul.5, add)")
            + "\n}\n")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "BIAS_GELU_AUX" and _operand_names(g) == ["x", "y", "z"]
    assert len(g.shape.tuple_shapes) == 3


BITCAST_DOT = HEAD + """  dot = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bitcasted_dot = f32[8] bitcast(dot)
"""


def test_approx_gelu_activation_with_aux_and_bitcast_and_extra_bitcast_user():
    m = _lt(BITCAST_DOT + _gelu("bitcasted_dot", "f32[8]", "mul.5",
                                "out = (f32[8], f32[8]) tuple(mul.5, bitcasted_dot)") + "\n}\n")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "GELU_AUX"
    root = m.entry.root
    assert [o.opcode for o in root.operands] == ["bitcast", "bitcast"]
    assert [o.operands[0].attr("index") for o in root.operands] == [0, 1]


def test_approx_gelu_activation_with_aux_and_bitcast_and_extra_dot_user():
    m = _lt(BITCAST_DOT + _gelu("bitcasted_dot", "f32[8]", "mul.5",
                                "out = (f32[8], f32[2,4]) tuple(mul.5, dot)") + "\n}\n")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "GELU_AUX"
    gelu_out, dot_out = m.entry.root.operands
    assert gelu_out.opcode == "bitcast" and gelu_out.operands[0].attr("index") == 0
    assert dot_out.opcode == "get-tuple-element" and dot_out.attr("index") == 1


def test_approx_gelu_activation_bitcast():
    m = _lt("""HloModule test
ENTRY test {
  x = f32[2,3] parameter(0)
  y = f32[3,4] parameter(1)
  dot = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  dot_bitcast = f32[2,2,2] bitcast(dot)
""" + _gelu("dot_bitcast", "f32[2,2,2]", "out") + "\n}\n")
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "GELU"
    root = m.entry.root
    assert root.opcode == "bitcast" and root.shape.dims == (2, 2, 2)
    assert root.operands[0].opcode == "get-tuple-element"
    assert root.operands[0].operands[0] is g
    assert [o.name for o in g.operands] == ["x", "y"]


def test_approx_gelu_activation_bf16_padded():
    # XLA's ApproxGeluActivationBF16: cublas-pad-for-gemms pads the bf16 operands to
    # multiples of 8, the gemm's GELU reads through the slice back
    text = """HloModule test
ENTRY test {
  x = bf16[2,3] parameter(0)
  y = bf16[3,4] parameter(1)
  dot = bf16[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
""" + _gelu("dot", "bf16[2,4]", "out") + "\n}\n"
    m = _lt(text, "cublas-pad-for-gemms,cublas-gemm-rewriter", rtol=2e-2, atol=2e-2,
            xla_gpu_enable_triton_gemm=False)
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "GELU"
    pads = sorted(o.attrs["padding"] for o in g.operands)
    assert pads == ["0_5x0_4", "0_6x0_5"]
    assert all(o.shape.dims == (8, 8) for o in g.operands)
    assert m.entry.root.opcode == "slice"


def test_bf16_vector_bias_padded():
    m = _lt("""HloModule test
ENTRY test {
  x = bf16[2,3] parameter(0)
  y = bf16[3,4] parameter(1)
  z = bf16[4] parameter(2)
  dot_a = bf16[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z_bcast = bf16[2,4] broadcast(z), dimensions={1}
  ROOT out = bf16[2,4] add(dot_a, z_bcast)
}
""", "cublas-pad-for-gemms,cublas-gemm-rewriter", rtol=2e-2, atol=2e-2,
       xla_gpu_enable_triton_gemm=False)
    g, cfg = _one_gemm(m)
    assert cfg["epilogue"] == "BIAS" and g.operands[2].name == "z"
    assert g.shape.tuple_shapes[0].dims == (8, 8)


@pytest.mark.parametrize("epilogue_ops", ["relu", "gelu"])
def test_no_epilogue_with_legacy_cublas(epilogue_ops):
    body = HEAD + "  dot = f32[2,4] dot(x, y), lhs_contracting_dims={1}, " \
        "rhs_contracting_dims={0}\n"
    if epilogue_ops == "gelu":
        body += _gelu("dot", "f32[2,4]", "out") + "\n}\n"
    else:
        body += ("  c = f32[] constant(0)\n  cb = f32[2,4] broadcast(c), dimensions={}\n"
                 "  ROOT out = f32[2,4] maximum(dot, cb)\n}\n")
    m = run(body, PASS, xla_gpu_gemm_rewrite_size_threshold=0, xla_gpu_enable_cublaslt=False)
    (g,) = _gemms(m)
    assert gemm_config(g)["epilogue"] == "DEFAULT"


def test_aux_gemm_in_the_gpu_pipeline():
    # a training step keeps the pre-activation: GELU_AUX survives fusion and the rest
    from passes.pipelines import build_pipeline
    text = """HloModule test
ENTRY test {
  x = f32[64,32] parameter(0)
  y = f32[32,128] parameter(1)
  dot = f32[64,128] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
""" + _gelu("dot", "f32[64,128]", "mul.5", "out = (f32[64,128], f32[64,128]) "
                                            "tuple(mul.5, dot)") + "\n}\n"
    r = check(text, build_pipeline("gpu"), seeds=(0,), rtol=1e-4, atol=1e-4,
              xla_gpu_enable_cublaslt=True)
    (g,) = _gemms(r.module)
    assert gemm_config(g)["epilogue"] == "GELU_AUX"
    assert "fusion" not in entry_ops(r.module)


# ---- combinations through cublas-pad-for-gemms ---------------------------------------------

def _combo(dtype: str, bias: str, act: str) -> str:
    """x[10,6] . y[6,12] (+ bias) (activation), dims that f16/bf16 padding changes."""
    t = f"{dtype}[10,12]"
    lines = [f"  x = {dtype}[10,6] parameter(0)", f"  y = {dtype}[6,12] parameter(1)",
             f"  dot = {t} dot(x, y), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"]
    v = "dot"
    if bias == "vector":
        lines += [f"  z = {dtype}[12] parameter(2)",
                  f"  zb = {t} broadcast(z), dimensions={{1}}", f"  biased = {t} add(dot, zb)"]
        v = "biased"
    elif bias == "matrix":
        lines += [f"  z = {t} parameter(2)", f"  zn = {t} negate(z)",
                  f"  biased = {t} add(dot, zn)"]
        v = "biased"
    if act == "relu":
        lines += [f"  c = {dtype}[] constant(0)", f"  cb = {t} broadcast(c), dimensions={{}}",
                  f"  ROOT out = {t} maximum({v}, cb)"]
        return "HloModule combo\nENTRY e {\n" + "\n".join(lines) + "\n}\n"
    root = f"out = ({t}, {t}) tuple(act, {v})" if act == "gelu_aux" else None
    return ("HloModule combo\nENTRY e {\n" + "\n".join(lines) + "\n" +
            _gelu(v, t, "act" if root else "out", root) + "\n}\n")


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("bias", ["none", "vector", "matrix"])
@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_aux"])
def test_epilogue_combinations_padded_and_not(dtype, bias, act):
    tol = 1e-4 if dtype == "f32" else 3e-2
    r = check(_combo(dtype, bias, act), "cublas-pad-for-gemms,cublas-gemm-rewriter",
              rtol=tol, atol=tol, xla_gpu_enable_triton_gemm=False, **LT)
    assert r.changed and r.compared_runs == 2
    g, cfg = _one_gemm(r.module)
    padded = dtype != "f32"
    assert (g.operands[0].opcode == "pad") == padded
    want = {"relu": "RELU", "gelu": "GELU", "gelu_aux": "GELU_AUX"}[act]
    if bias == "vector":
        want = "BIAS_" + want
    # a folded matrix bias (beta 1) leaves the epilogue free for the activation after it
    assert cfg["epilogue"] == want
    assert cfg["beta"] == (1 if bias == "matrix" else 0)
