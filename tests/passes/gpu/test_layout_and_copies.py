"""layout-assignment, copy-insertion, variadic-op-splitter and the algorithm pickers."""
from __future__ import annotations

from pathlib import Path

from hlo_opt.analysis.device import A100
from hlo_opt.api import parse_hlo
from hlo_opt.ir.shape import Layout

from hlo_opt.flags import DebugOptions
from hlo_opt.ir.config import HloModuleConfig
from passes.pipelines import build_pipeline
from tests.support.harness import check_pass

from .util import check, entry_ops, run

SAMPLES = Path(__file__).resolve().parents[3] / "sample_modules"

CONV_CHAIN = """HloModule chain
ENTRY %main (x: f32[1,8,8,3], w1: f32[3,3,3,4], w2: f32[3,3,4,4]) -> f32[1,8,8,4] {
  %x = f32[1,8,8,3] parameter(0)
  %w1 = f32[3,3,3,4] parameter(1)
  %w2 = f32[3,3,4,4] parameter(2)
  %c1 = f32[1,8,8,4] convolution(%x, %w1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  %e = f32[1,8,8,4] exponential(%c1)
  %k = f32[] constant(2)
  %kb = f32[1,8,8,4] broadcast(%k), dimensions={}
  %m = f32[1,8,8,4] multiply(%e, %kb)
  ROOT %c2 = f32[1,8,8,4] convolution(%m, %w2), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""
NCHW = Layout((2, 1, 3, 0))   # b01f: batch, feature, then spatial (major to minor)
OIHW = Layout((1, 0, 2, 3))   # 01io: out, in, then spatial


def _convs(m):
    return [i for i in m.entry.post_order() if i.opcode == "custom-call"]


def _on(text, device):
    m = parse_hlo(text)
    m.config = m.config.replace(device=device)
    return m


def test_f32_convolutions_get_nchw_before_hopper_and_the_chain_between_follows():
    m = check(_on(CONV_CHAIN, A100), "cudnn-conv-rewriter,layout-assignment").module
    c1, c2 = _convs(m)
    for c in (c1, c2):
        assert c.shape.tuple_shapes[0].effective_layout() == NCHW
        assert c.operands[0].shape.effective_layout() == NCHW
        assert c.operands[1].shape.effective_layout() == OIHW
    # exp and multiply between the convolutions run in NCHW: no transposes in between
    e = [i for i in m.entry.instructions if i.opcode == "exponential"][0]
    assert e.shape.effective_layout() == NCHW
    assert c2.operands[0].opcode == "multiply"
    # copies: x, both filters, and the result back to the entry layout
    assert entry_ops(m).count("copy") == 4
    assert m.entry.root.opcode == "copy"
    assert m.entry.root.shape.effective_layout() == Layout((3, 2, 1, 0))


def test_f32_convolutions_get_nhwc_on_hopper():
    # XLA's HeuristicLayoutAssignment on sm_90: NHWC for every float type but f64
    m = check(CONV_CHAIN, "cudnn-conv-rewriter,layout-assignment").module
    assert m.config.device.compute_capability == (9, 0)
    for c in _convs(m):
        assert c.shape.tuple_shapes[0].effective_layout() == Layout((3, 2, 1, 0))
        assert c.operands[1].shape.effective_layout() == Layout((2, 1, 0, 3))
    # x is already NHWC: only the two filters are copied, nothing after the last conv
    assert entry_ops(m).count("copy") == 2
    f64 = check(CONV_CHAIN.replace("f32", "f64"), "cudnn-conv-rewriter,layout-assignment").module
    assert _convs(f64)[0].shape.tuple_shapes[0].effective_layout() == NCHW


def test_f16_convolutions_get_nhwc():
    text = CONV_CHAIN.replace("f32", "f16")
    m = check(text, "cudnn-conv-rewriter,layout-assignment", rtol=2e-2, atol=2e-2).module
    c1, _ = _convs(m)
    # NHWC is the row-major layout of b01f: only the filters are copied (to OHWI)
    assert c1.shape.tuple_shapes[0].effective_layout() == Layout((3, 2, 1, 0))
    assert c1.operands[1].shape.effective_layout() == Layout((2, 1, 0, 3))


def test_layout_assignment_keeps_mobilenet_values():
    check((SAMPLES / "mobilenet_cluster.hlo").read_text(),
          "cudnn-conv-rewriter,cudnn-fused-convolution-rewriter,gpu-conv-padding-legalization,"
          "layout-assignment", seeds=(0,))


def test_gemm_operands_with_batch_dims_minor_are_copied():
    text = """HloModule g
ENTRY %main (a: f32[8,32,16], b: f32[8,16,32]) -> f32[8,32,32] {
  %a = f32[8,32,16]{0,2,1} parameter(0)
  %b = f32[8,16,32] parameter(1)
  ROOT %d = f32[8,32,32] dot(%a, %b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""
    m = check(text, "cublas-gemm-rewriter,layout-assignment").module
    (g,) = _convs(m)
    assert g.operands[0].opcode == "copy"
    assert g.operands[0].shape.effective_layout() == Layout((2, 1, 0))
    assert g.operands[1].opcode == "parameter"


# The backward pass's canonical dots: a [4,8,16] value contracted over its two major
# dimensions becomes transpose -> reshape -> a 2-D dot with one contracting dimension.
GEMM_OF_TRANSPOSE = """HloModule t
ENTRY %main (x: f32[4,8,16], y: f32[32,24], z: f32[16,32], w: f32[32,24]) -> (f32[16,24], f32[16,24]) {
  %x = f32[4,8,16] parameter(0)
  %e = f32[4,8,16] exponential(%x)
  %t = f32[16,4,8] transpose(%e), dimensions={2,0,1}
  %r = f32[16,32] reshape(%t)
  %y = f32[32,24] parameter(1)
  %d = f32[16,24] dot(%r, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %z = f32[16,32] parameter(2)
  %zt = f32[32,16] transpose(%z), dimensions={1,0}
  %n = f32[32,16] negate(%zt)
  %w = f32[32,24] parameter(3)
  %d2 = f32[16,24] dot(%n, %w), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT %out = (f32[16,24], f32[16,24]) tuple(%d, %d2)
}
"""


def _named(m, name):
    return next(i for i in m.entry.instructions if i.name == name)


def test_matrix_operand_chain_takes_its_producers_layout():
    # XLA leaves a batchless matrix operand unconstrained: the transpose and the reshape
    # take the layouts that make them bitcasts, the dot reads its lhs column-major
    m = check(GEMM_OF_TRANSPOSE, "layout-assignment").module
    assert _named(m, "t").shape.effective_layout() == Layout((0, 2, 1))
    assert _named(m, "r").shape.effective_layout() == Layout((0, 1))
    # a transpose with a non-transpose user between it and the dot keeps its layout
    assert _named(m, "zt").shape.effective_layout() == Layout((1, 0))


def test_matrix_operand_chain_becomes_a_bitcast_in_the_gpu_pipeline():
    options = DebugOptions(xla_gpu_enable_triton_gemm=False)
    m = check_pass(parse_hlo(GEMM_OF_TRANSPOSE),
                   build_pipeline("gpu", HloModuleConfig(options)), options=options).module
    ops = entry_ops(m)
    assert "transpose" not in ops
    gemms = [i for i in m.entry.post_order() if i.opcode == "custom-call"]
    assert gemms[0].operands[0].opcode == "bitcast"
    assert gemms[0].operands[0].shape.effective_layout() == Layout((0, 1))


# The backward pass's weight gradient of a fused qkv projection: three transposed
# pieces concatenated.  The third piece starts in a layout no reshape can carry on, so it
# moves its bytes once (the reshape) and the rest of its chain is free.
CONCAT_OF_TRANSPOSES = """HloModule c
ENTRY %main (a: f32[4,64,128], b: f32[4,64,128], q: f32[4,4,32,64], w: f32[256,128]) -> f32[128,384] {
  %a = f32[4,64,128] parameter(0)
  %ea = f32[4,64,128] exponential(%a)
  %ta = f32[128,4,64] transpose(%ea), dimensions={2,0,1}
  %ra = f32[128,256] reshape(%ta)
  %b = f32[4,64,128] parameter(1)
  %eb = f32[4,64,128] exponential(%b)
  %tb = f32[128,4,64] transpose(%eb), dimensions={2,0,1}
  %rb = f32[128,256] reshape(%tb)
  %q = f32[4,4,32,64] parameter(2)
  %tq = f32[4,64,4,32]{1,3,2,0} transpose(%q), dimensions={0,3,1,2}
  %rq0 = f32[4,64,128] reshape(%tq)
  %tq1 = f32[128,4,64] transpose(%rq0), dimensions={2,0,1}
  %rq = f32[128,256] reshape(%tq1)
  %c = f32[384,256] concatenate(%ra, %rb, %rq), dimensions={0}
  %w = f32[256,128] parameter(3)
  ROOT %d = f32[128,384] dot(%w, %c), lhs_contracting_dims={0}, rhs_contracting_dims={1}
}
"""


def test_concatenated_matrix_operand_takes_its_pieces_layout():
    m = check(CONCAT_OF_TRANSPOSES, "layout-assignment").module
    col = Layout((0, 1))
    for name in ("ra", "rb", "rq", "c"):
        assert _named(m, name).shape.effective_layout() == col, name
    # the reshape out of the transposed layout keeps the default one (it moves bytes)
    assert _named(m, "rq0").shape.effective_layout() == Layout((2, 1, 0))
    assert _named(m, "tq1").shape.effective_layout() == Layout((0, 2, 1))


def test_concatenated_pieces_that_disagree_keep_their_layouts():
    text = CONCAT_OF_TRANSPOSES.replace("%rb = f32[128,256] reshape(%tb)",
                                        "%rb = f32[128,256] negate(%ra)").replace(
        "%c = f32[384,256] concatenate(%ra, %rb, %rq)",
        "%c = f32[384,256] concatenate(%rq, %rb, %ra)")
    text = text.replace("  %b = f32[4,64,128] parameter(1)\n  %eb = f32[4,64,128] exponential(%b)\n"
                        "  %tb = f32[128,4,64] transpose(%eb), dimensions={2,0,1}\n", "  %b = f32[4,64,128] parameter(1)\n")
    m = check(text, "layout-assignment").module
    assert _named(m, "c").shape.effective_layout() == Layout((1, 0))
    assert _named(m, "rq").shape.effective_layout() == Layout((1, 0))


def test_batched_and_multi_dim_operands_keep_their_layouts():
    text = """HloModule b
ENTRY %main (x: f32[2,8,16], y: f32[2,8,4]) -> f32[2,16,4] {
  %x = f32[2,8,16] parameter(0)
  %t = f32[2,16,8] transpose(%x), dimensions={0,2,1}
  %y = f32[2,8,4] parameter(1)
  ROOT %d = f32[2,16,4] dot(%t, %y), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""
    m = check(text, "layout-assignment").module
    assert _named(m, "t").shape.effective_layout() == Layout((2, 1, 0))


# ---- copy-insertion ------------------------------------------------------------------------

def test_copy_insertion_copies_read_only_and_repeated_results():
    text = """HloModule ci
ENTRY %main (a: f32[4], b: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {
  %a = f32[4] parameter(0)
  %b = f32[4] parameter(1)
  %c = f32[4] constant({1, 2, 3, 4})
  %s = f32[4] add(%a, %b)
  ROOT %t = (f32[4], f32[4], f32[4], f32[4]) tuple(%a, %c, %s, %s)
}
"""
    m = check(text, "copy-insertion").module
    ops = [o.opcode for o in m.entry.root.operands]
    assert ops == ["copy", "copy", "add", "copy"]


def test_copy_insertion_respects_input_output_alias():
    text = """HloModule alias, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY %main (a: f32[4]) -> f32[4] {
  ROOT %a = f32[4] parameter(0)
}
"""
    assert not run(text, "copy-insertion").entry.root.opcode == "copy"


def test_copy_insertion_while_loop():
    m = check((SAMPLES / "while_loop.hlo").read_text(), "copy-insertion").module
    w = [i for i in m.entry.instructions if i.opcode == "while"][0]
    init = w.operands[0]
    # read-only initial values (constants / parameters) are copied into the loop state
    assert all(o.opcode not in ("parameter", "constant") for o in init.operands)


# ---- variadic-op-splitter ------------------------------------------------------------------

def test_variadic_op_splitter_splits_big_concatenates():
    n = 300
    params = ", ".join(f"p{i}: f32[2]" for i in range(n))
    lines = [f"  %p{i} = f32[2] parameter({i})" for i in range(n)]
    lines.append(f"  ROOT %c = f32[{2 * n}] concatenate(" +
                 ", ".join(f"%p{i}" for i in range(n)) + "), dimensions={0}")
    text = f"HloModule v\nENTRY %main ({params}) -> f32[{2 * n}] {{\n" + "\n".join(lines) + "\n}\n"
    m = check(text, "variadic-op-splitter", seeds=(0,)).module
    concats = [i for i in m.entry.instructions if i.opcode == "concatenate"]
    assert all(len(c.operands) <= 128 for c in concats)
    assert len(concats) == 4  # 128 + 128 + 44, then the three joined


def test_algorithm_pickers_change_nothing_without_a_gpu():
    text = (SAMPLES / "matmul_bias_gelu.hlo").read_text()
    for level in (0, 4):
        result = check(text, "cublas-gemm-rewriter,gemm-algorithm-picker,"
                             "gpu-conv-algorithm-picker", seeds=(0,),
                       xla_gpu_autotune_level=level)
        assert result.changed  # (the rewriter)
    m = run(text, "gemm-algorithm-picker,gpu-conv-algorithm-picker")
    assert "dot" in entry_ops(m)


def test_carried_h100_specs_are_the_default_device():
    from hlo_opt.analysis.device import DEFAULT_DEVICE, SPECS_DIR
    from hlo_opt.backends.cuda.target import read_specs
    assert read_specs(str(SPECS_DIR / "h100_sxm.txtpb")) == DEFAULT_DEVICE


def test_target_config_file_reaches_the_gpu_pipeline(tmp_path):
    # --xla_gpu_target_config_filename: the same specs with compute capability 8.0 give
    # NCHW convolutions (and the copies around them), as XLA's output differs on sm_80
    import re

    from hlo_opt import passes_api
    from hlo_opt.analysis.device import SPECS_DIR
    from hlo_opt.flags import DebugOptions
    from hlo_opt.text.printer import module_to_text
    text = (SPECS_DIR / "h100_sxm.txtpb").read_text()
    sm80 = tmp_path / "sm80.txtpb"
    sm80.write_text(re.sub(r"major: 9", "major: 8", text))
    one_conv = CONV_CHAIN.split("  %e =")[0] + "  ROOT %r = f32[1,8,8,4] negate(%c1)\n}\n"
    out = {}
    for name, opts in (("sm90", DebugOptions()),
                       ("sm80", DebugOptions(xla_gpu_target_config_filename=str(sm80)))):
        m = passes_api.optimize(parse_hlo(one_conv), opts, pipeline="gpu")
        out[name] = m
    assert out["sm80"].config.device.compute_capability == (8, 0)
    conv = {k: _convs(m)[0] for k, m in out.items()}
    assert conv["sm90"].shape.tuple_shapes[0].effective_layout() == Layout((3, 2, 1, 0))
    assert conv["sm80"].shape.tuple_shapes[0].effective_layout() == NCHW
    assert module_to_text(out["sm90"]).count(" copy(") < module_to_text(out["sm80"]).count(" copy(")
