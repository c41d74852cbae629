"""cublas-pad-for-gemms: XLA's CublasGemmPadForTensorCoresTest cases
(cublas_pad_for_gemms_test.cc) on the graph and through the interpreter, plus the
pipeline order and the per-GPU requirements."""
from __future__ import annotations

import functools

from hlo_opt.analysis.device import A100, DeviceInfo
from hlo_opt.api import parse_hlo
from hlo_opt.flags import DebugOptions
from passes.gpu.cublas_pad_for_gemms import CublasPadForGemms

from . import util
from .util import entry_ops

PASS = "cublas-pad-for-gemms"
# XLA's cuBLAS tests turn the Triton GEMM emitter off, so cuBLAS gets (and pads) the dots
NO_TRITON = dict(xla_gpu_enable_triton_gemm=False)
check = functools.partial(util.check, **NO_TRITON)


def _pad(module, *args) -> bool:
    module.config = module.config.replace(debug_options=DebugOptions(**NO_TRITON))
    return CublasPadForGemms(*args).run(module)


def _text(lhs, rhs, out, dims="lhs_contracting_dims={1}, rhs_contracting_dims={0}",
          extra="", rhs_layout="{0,1}"):
    rank = lhs.count(",") + 1
    lay = "{" + ",".join(str(d) for d in range(rank - 1, -1, -1)) + "}"
    return f"""HloModule TestModule

ENTRY TestComputation {{
  %param1 = {lhs}{lay} parameter(0)
  %param2 = {rhs}{rhs_layout if rank == 2 else lay} parameter(1)
  ROOT %dot.2309 = {out}{lay} dot({lhs}{lay} %param1, {rhs}{rhs_layout if rank == 2 else lay} %param2), {dims}{extra}
}}
"""


def _root_slice_of_padded_dot(m, out_dims, padded_out, lhs_padded, rhs_padded):
    root = m.entry.root
    assert root.opcode == "slice" and root.shape.dims == out_dims
    dot = root.operands[0]
    assert dot.opcode == "dot" and dot.shape.dims == padded_out
    lpad, rpad = dot.operands
    assert lpad.opcode == "pad" and lpad.shape.dims == lhs_padded
    assert rpad.opcode == "pad" and rpad.shape.dims == rhs_padded
    for pad in (lpad, rpad):
        assert pad.operands[0].opcode == "parameter"
        zero = pad.operands[1]
        assert zero.opcode == "constant" and zero.shape.rank == 0
    return dot


def test_one_dot_root_computation():
    # shapes scaled down from XLA's f16[2048,1024] x f16[1024,33708] (the interpreter runs
    # both); 33708 -> 33712 becomes 60 -> 64
    r = check(_text("f16[64,32]", "f16[32,60]", "f16[64,60]"), PASS, rtol=1e-2, atol=1e-2)
    assert r.changed
    dot = _root_slice_of_padded_dot(r.module, (64, 60), (64, 64), (64, 32), (32, 64))
    assert dot.operands[1].shape.to_text() == "f16[32,64]{0,1}"  # the operand's layout
    assert dot.operands[1].attrs["padding"] == "0_0x0_4"


def test_xla_shapes_on_the_graph():
    # XLA's own shapes (too big to interpret): the pads and the slice
    m = parse_hlo(_text("f16[2048,1024]", "f16[1024,33708]", "f16[2048,33708]"))
    assert _pad(m)
    _root_slice_of_padded_dot(m, (2048, 33708), (2048, 33712), (2048, 1024), (1024, 33712))
    assert m.entry.root.attrs["slice"] == "{[0:2048], [0:33708]}"


def test_one_dot_s8_root_computation():
    text = _text("s8[63,31]", "s8[31,59]", "s32[63,59]")
    r = check(text, PASS)
    _root_slice_of_padded_dot(r.module, (63, 59), (64, 60), (64, 32), (32, 60))
    assert r.module.entry.root.operands[0].shape.element_type == "s32"


def test_s8_with_an_explicit_requirement():
    m = parse_hlo(_text("s8[2047,1023]", "s8[1023,33707]", "s32[2047,33707]"))
    assert _pad(m, "s8", 4)
    _root_slice_of_padded_dot(m, (2047, 33707), (2048, 33708), (2048, 1024), (1024, 33708))


def test_two_dots_computation():
    # the first dot is padded; its slice feeds the second, a matrix-vector product
    # (f16[.., 1]) that current XLA's IsCublasSupportedMatMul leaves alone (the older
    # test padded it to [.., 8])
    text = """HloModule TestModule

ENTRY TestComputation {
  %param1 = f16[64,32]{1,0} parameter(0)
  %param2 = f16[32,60]{1,0} parameter(1)
  %param3 = f16[60,1]{1,0} parameter(2)
  %dot1 = f16[64,60]{1,0} dot(f16[64,32]{1,0} %param1, f16[32,60]{1,0} %param2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %dot2 = f16[64,1]{1,0} dot(f16[64,60]{1,0} %dot1, f16[60,1]{1,0} %param3), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    r = check(text, PASS, rtol=1e-2, atol=5e-2)
    root = r.module.entry.root
    assert root.opcode == "dot" and root.shape.dims == (64, 1)
    sl = root.operands[0]
    assert sl.opcode == "slice" and sl.operands[0].shape.dims == (64, 64)


def test_dot_with_batch_dimensions():
    text = _text("f16[3,5,16,8]", "f16[3,5,8,20]", "f16[3,5,16,20]",
                 dims="lhs_batch_dims={0, 1}, rhs_batch_dims={0, 1}, "
                      "lhs_contracting_dims={3}, rhs_contracting_dims={2}")
    r = check(text, PASS, rtol=1e-2, atol=1e-2)
    _root_slice_of_padded_dot(r.module, (3, 5, 16, 20), (3, 5, 16, 24), (3, 5, 16, 8),
                              (3, 5, 8, 24))


def test_no_dot_f32_f64_and_multiples_of_8_are_left_alone():
    no_dot = """HloModule TestModule
ENTRY TestComputation {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %maximum = f32[] maximum(f32[] %x, f32[] %y)
}
"""
    for text in (no_dot, _text("f32[64,32]", "f32[32,60]", "f32[64,60]"),
                 _text("f64[64,32]", "f64[32,60]", "f64[64,60]"),
                 _text("f16[64,32]", "f16[32,64]", "f16[64,64]")):
        assert not check(text, PASS).changed


def test_check_saving_metadata():
    meta = ('metadata={op_type="MatMul" op_name="transformer_v2/Transformer/decode/'
            'embedding_shared_weights_1/presoftmax_linear/MatMul"}')
    r = check(_text("f16[64,32]", "f16[32,60]", "f16[64,60]", extra=", " + meta), PASS,
              rtol=1e-2, atol=1e-2)
    root = r.module.entry.root
    assert root.attrs["metadata"] == meta.split("=", 1)[1]
    for inst in (root.operands[0], *root.operands[0].operands):
        assert inst.attrs["metadata"] == root.attrs["metadata"]


def test_not_canonicalized_dot():
    text = """HloModule TestModule
ENTRY TestComputation {
  %param1 = f16[3,5,16,8]{3,2,1,0} parameter(0)
  %param2 = f16[3,5,8,20]{3,2,1,0} parameter(1)
  ROOT %dot.2309 = f16[3,16,20]{2,1,0} dot(f16[3,5,16,8]{3,2,1,0} %param1, f16[3,5,8,20]{3,2,1,0} %param2), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={3, 1}, rhs_contracting_dims={2, 1}
}
"""
    assert not check(text, PASS).changed


def test_bf16_needs_ampere():
    text = _text("bf16[64,30]", "bf16[30,60]", "bf16[64,60]")
    assert check(text, PASS, rtol=2e-2, atol=2e-2).changed  # Hopper by default
    m = parse_hlo(text)
    m.config = m.config.replace(device=A100)
    assert _pad(m)
    m = parse_hlo(text)
    m.config = m.config.replace(device=DeviceInfo(name="V100", compute_capability=(7, 0)))
    assert not _pad(m)  # Volta: f16 and s8 only
    m = parse_hlo(_text("f16[64,30]", "f16[30,60]", "f16[64,60]"))
    m.config = m.config.replace(device=DeviceInfo(name="V100", compute_capability=(7, 0)))
    assert _pad(m)


def test_dots_the_triton_gemm_emitter_takes_are_left_to_it():
    # --xla_gpu_enable_triton_gemm (the default) on Ampere+: a dot XLA's Triton GEMM
    # fusion wants (here: a negated operand fuses into it) is not padded for cuBLAS; a
    # pure matmul is (ShouldTritonHandleGEMM: "Pure Matmul"), and so is s8 -> s32 (no
    # Triton dot); before Ampere there is no Triton
    f16 = _text("f16[64,30]", "f16[30,60]", "f16[64,60]")
    fused = f16.replace("%param1 = f16[64,30]{1,0} parameter(0)",
                        "%param0 = f16[64,30]{1,0} parameter(0)\n"
                        "  %param1 = f16[64,30]{1,0} negate(%param0)")
    assert not util.check(fused, PASS).changed
    assert util.check(f16, PASS).changed
    assert util.check(_text("s8[63,31]", "s8[31,59]", "s32[63,59]"), PASS).changed
    m = parse_hlo(fused)
    m.config = m.config.replace(device=DeviceInfo(name="V100", compute_capability=(7, 0)))
    assert CublasPadForGemms().run(m)


def test_pads_of_constants_fold_and_the_gemm_rewriter_takes_the_padded_dot():
    # the pipeline order (nvptx post-layout-assignment part 1, then the rewriter): a
    # padded constant operand folds to a constant; the rewriter turns the padded dot into
    # the cuBLAS call and the slice stays outside
    text = """HloModule folded
ENTRY e {
  x = f16[64,30]{1,0} parameter(0)
  w = f16[30,60]{1,0} constant({...})
  ROOT d = f16[64,60]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    text = text.replace("constant({...})", "iota(), iota_dimension=1")
    r = check(text, "cublas-pad-for-gemms,constant_folding,cublas-gemm-rewriter",
              rtol=1e-2, atol=1e-1)
    ops = entry_ops(r.module)
    assert "custom-call" in ops and ops[-1] == "slice" and "dot" not in ops
    (g,) = [i for i in r.module.entry.instructions if i.opcode == "custom-call"]
    assert g.operands[1].opcode == "constant" and g.operands[1].shape.dims == (32, 64)
    assert g.operands[0].opcode == "pad" and g.operands[0].shape.dims == (64, 32)
