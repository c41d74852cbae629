"""hlo_opt.shape_inference: one valid case per rule (the shape XLA infers) and the
operand/attribute errors XLA's ShapeInference reports."""
from __future__ import annotations

import pytest

from hlo_opt.shape_inference import RULES, CannotInfer, ShapeError, infer_shape
from hlo_opt.ir.opcodes import OPCODES
from hlo_opt.text.parser import parse_hlo

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""
ADD_S32 = """add_s32 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
"""
ARGMAX = """argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  v = f32[] select(gt, av, bv)
  i = s32[] select(gt, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
"""
LESS = """less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
"""
GE = """ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}
"""


def root_of(text: str):
    return parse_hlo("HloModule t\n" + text).entry.root


def infer_text(text: str) -> str:
    return infer_shape(root_of(text)).to_text(layout=False)


def entry(body: str, *comps: str) -> str:
    return "".join(comps) + "ENTRY e {\n" + body + "\n}\n"


# (id, module text, expected inferred shape)
VALID = [
    ("abs-complex", entry("p = c64[3] parameter(0)\nROOT r = f32[3] abs(p)"), "f32[3]"),
    ("imag-c128", entry("p = c128[2] parameter(0)\nROOT r = f64[2] imag(p)"), "f64[2]"),
    ("real-of-float", entry("p = f32[2] parameter(0)\nROOT r = f32[2] real(p)"), "f32[2]"),
    ("is-finite", entry("p = bf16[2,3] parameter(0)\nROOT r = pred[2,3] is-finite(p)"),
     "pred[2,3]"),
    ("not-pred", entry("p = pred[4] parameter(0)\nROOT r = pred[4] not(p)"), "pred[4]"),
    ("popcnt", entry("p = u16[4] parameter(0)\nROOT r = u16[4] popcnt(p)"), "u16[4]"),
    ("compare", entry("a = s32[4] parameter(0)\nb = s32[4] parameter(1)\n"
                      "ROOT r = pred[4] compare(a, b), direction=LT"), "pred[4]"),
    ("compare-totalorder", entry("a = f32[4] parameter(0)\nb = f32[4] parameter(1)\n"
                                 "ROOT r = pred[4] compare(a, b), direction=EQ, "
                                 "type=TOTALORDER"), "pred[4]"),
    ("complex", entry("a = f64[4] parameter(0)\nb = f64[4] parameter(1)\n"
                      "ROOT r = c128[4] complex(a, b)"), "c128[4]"),
    ("shift", entry("a = u32[4] parameter(0)\nb = u32[4] parameter(1)\n"
                    "ROOT r = u32[4] shift-left(a, b)"), "u32[4]"),
    ("convert", entry("p = s8[2,3] parameter(0)\nROOT r = f32[2,3] convert(p)"), "f32[2,3]"),
    ("bitcast-convert-narrower", entry("p = f32[4] parameter(0)\n"
                                       "ROOT r = u8[4,4] bitcast-convert(p)"), "u8[4,4]"),
    ("bitcast-convert-wider", entry("p = u16[3,2] parameter(0)\n"
                                    "ROOT r = f32[3] bitcast-convert(p)"), "f32[3]"),
    ("bitcast-convert-same", entry("p = f32[3] parameter(0)\n"
                                   "ROOT r = s32[3] bitcast-convert(p)"), "s32[3]"),
    ("stochastic-convert", entry("p = f32[3] parameter(0)\nq = u32[3] parameter(1)\n"
                                 "ROOT r = bf16[3] stochastic-convert(p, q)"), "bf16[3]"),
    ("reduce-precision", entry("p = f32[3] parameter(0)\nROOT r = f32[3] reduce-precision(p),"
                               " exponent_bits=5, mantissa_bits=10"), "f32[3]"),
    ("select", entry("p = pred[2] parameter(0)\na = f32[2] parameter(1)\n"
                     "b = f32[2] parameter(2)\nROOT r = f32[2] select(p, a, b)"), "f32[2]"),
    ("clamp-scalar-bounds", entry("lo = f32[] parameter(0)\nx = f32[2,3] parameter(1)\n"
                                  "hi = f32[] parameter(2)\nROOT r = f32[2,3] clamp(lo, x, hi)"),
     "f32[2,3]"),
    ("map", entry("a = f32[4] parameter(0)\nb = f32[4] parameter(1)\n"
                  "ROOT r = f32[4] map(a, b), dimensions={0}, to_apply=add", ADD), "f32[4]"),
    ("broadcast", entry("p = f32[3] parameter(0)\nROOT r = f32[2,3] broadcast(p), "
                        "dimensions={1}"), "f32[2,3]"),
    ("broadcast-scalar", entry("p = s32[] parameter(0)\nROOT r = s32[2,3] broadcast(p), "
                               "dimensions={}"), "s32[2,3]"),
    ("reshape", entry("p = f32[2,3] parameter(0)\nROOT r = f32[3,1,2] reshape(p)"),
     "f32[3,1,2]"),
    ("transpose", entry("p = f32[2,3,4] parameter(0)\nROOT r = f32[4,2,3] transpose(p), "
                        "dimensions={2,0,1}"), "f32[4,2,3]"),
    ("slice-strided", entry("p = f32[10,5] parameter(0)\nROOT r = f32[3,5] slice(p), "
                            "slice={[2:10:3], [0:5]}"), "f32[3,5]"),
    ("dynamic-slice", entry("p = f32[10,5] parameter(0)\ni = s32[] parameter(1)\n"
                            "ROOT r = f32[2,5] dynamic-slice(p, i, i), "
                            "dynamic_slice_sizes={2,5}"), "f32[2,5]"),
    ("dynamic-update-slice", entry("p = f32[10,5] parameter(0)\nu = f32[2,5] parameter(1)\n"
                                   "i = s64[] parameter(2)\n"
                                   "ROOT r = f32[10,5] dynamic-update-slice(p, u, i, i)"),
     "f32[10,5]"),
    ("pad-negative-interior", entry("p = f32[4,5] parameter(0)\nz = f32[] constant(0)\n"
                                    "ROOT r = f32[10,4] pad(p, z), padding=1_2_1x-1_0"),
     "f32[10,4]"),
    ("concatenate", entry("a = f32[2,3] parameter(0)\nb = f32[4,3] parameter(1)\n"
                          "ROOT r = f32[6,3] concatenate(a, b), dimensions={0}"), "f32[6,3]"),
    ("reverse", entry("p = f32[2,3] parameter(0)\nROOT r = f32[2,3] reverse(p), "
                      "dimensions={0,1}"), "f32[2,3]"),
    ("iota", entry("ROOT r = s32[4,5] iota(), iota_dimension=1"), "s32[4,5]"),
    ("gather", entry("p = f32[5,7] parameter(0)\ni = s32[4,1] parameter(1)\n"
                     "ROOT r = f32[4,7] gather(p, i), offset_dims={1}, "
                     "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
                     "slice_sizes={1,7}"), "f32[4,7]"),
    ("gather-implicit-index-dim", entry("p = f32[5,7] parameter(0)\ni = s32[4,3] parameter(1)\n"
                                        "ROOT r = f32[4,3,2,7] gather(p, i), "
                                        "offset_dims={2,3}, collapsed_slice_dims={}, "
                                        "start_index_map={0}, index_vector_dim=2, "
                                        "slice_sizes={2,7}"), "f32[4,3,2,7]"),
    ("gather-batching", entry("p = f32[2,5,7] parameter(0)\ni = s32[2,4,1] parameter(1)\n"
                              "ROOT r = f32[2,4,7] gather(p, i), offset_dims={2}, "
                              "collapsed_slice_dims={1}, start_index_map={1}, "
                              "operand_batching_dims={0}, start_indices_batching_dims={0}, "
                              "index_vector_dim=2, slice_sizes={1,1,7}"), "f32[2,4,7]"),
    ("scatter", entry("p = f32[5,7] parameter(0)\ni = s32[4,1] parameter(1)\n"
                      "u = f32[4,7] parameter(2)\nROOT r = f32[5,7] scatter(p, i, u), "
                      "update_window_dims={1}, inserted_window_dims={0}, "
                      "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
                      ADD), "f32[5,7]"),
    ("scatter-variadic", entry("p = f32[5] parameter(0)\nq = s32[5] parameter(1)\n"
                               "i = s32[4] parameter(2)\nu = f32[4] parameter(3)\n"
                               "v = s32[4] parameter(4)\n"
                               "ROOT r = (f32[5], s32[5]) scatter(p, q, i, u, v), "
                               "update_window_dims={}, inserted_window_dims={0}, "
                               "scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
                               "to_apply=argmax", ARGMAX), "(f32[5], s32[5])"),
    ("reduce", entry("p = f32[4,5,6] parameter(0)\nz = f32[] constant(0)\n"
                     "ROOT r = f32[5] reduce(p, z), dimensions={0,2}, to_apply=add", ADD),
     "f32[5]"),
    ("reduce-variadic", entry("v = f32[4,5] parameter(0)\ni = s32[4,5] parameter(1)\n"
                              "z = f32[] constant(0)\nzi = s32[] constant(0)\n"
                              "ROOT r = (f32[4], s32[4]) reduce(v, i, z, zi), "
                              "dimensions={1}, to_apply=argmax", ARGMAX), "(f32[4], s32[4])"),
    ("reduce-window", entry("p = f32[4,6] parameter(0)\nz = f32[] constant(0)\n"
                            "ROOT r = f32[2,2] reduce-window(p, z), "
                            "window={size=2x3 stride=2x3}, to_apply=add", ADD), "f32[2,2]"),
    ("reduce-window-dilated", entry("p = f32[5] parameter(0)\nz = f32[] constant(0)\n"
                                    "ROOT r = f32[4] reduce-window(p, z), window={size=3 "
                                    "stride=2 pad=1_1 lhs_dilate=2 rhs_dilate=2}, "
                                    "to_apply=add", ADD), "f32[4]"),
    ("select-and-scatter", entry("p = f32[4,6] parameter(0)\ns = f32[2,2] parameter(1)\n"
                                 "z = f32[] constant(0)\n"
                                 "ROOT r = f32[4,6] select-and-scatter(p, s, z), "
                                 "window={size=2x3 stride=2x3}, select=ge, scatter=add",
                                 GE, ADD), "f32[4,6]"),
    ("sort-variadic", entry("k = f32[8] parameter(0)\nv = s32[8] parameter(1)\n"
                            "ROOT r = (f32[8], s32[8]) sort(k, v), dimensions={0}, "
                            "to_apply=less", LESS), "(f32[8], s32[8])"),
    ("topk", entry("p = f32[5,10] parameter(0)\n"
                   "ROOT r = (f32[5,3], s32[5,3]) topk(p), k=3, largest=true"),
     "(f32[5,3], s32[5,3])"),
    ("dot-batch", entry("a = f32[2,3,4] parameter(0)\nb = f32[2,4,5] parameter(1)\n"
                        "ROOT r = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, "
                        "rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                        "rhs_contracting_dims={1}"), "f32[2,3,5]"),
    ("dot-vector", entry("a = f32[4] parameter(0)\nb = f32[4] parameter(1)\n"
                         "ROOT r = f32[] dot(a, b), lhs_contracting_dims={0}, "
                         "rhs_contracting_dims={0}"), "f32[]"),
    ("dot-outer-int8-to-s32", entry("a = s8[3] parameter(0)\nb = s8[5] parameter(1)\n"
                                    "ROOT r = s32[3,5] dot(a, b)"), "s32[3,5]"),
    ("ragged-dot-non-contracting", entry("a = f32[11,5] parameter(0)\n"
                                         "b = f32[3,5,7] parameter(1)\n"
                                         "g = s32[3] parameter(2)\n"
                                         "ROOT r = f32[11,7] ragged-dot(a, b, g), "
                                         "lhs_contracting_dims={1}, rhs_contracting_dims={1},"
                                         " lhs_ragged_dims={0}, rhs_group_dims={0}"),
     "f32[11,7]"),
    ("ragged-dot-contracting", entry("a = f32[11,5] parameter(0)\nb = f32[5,7] parameter(1)\n"
                                     "g = s32[3] parameter(2)\n"
                                     "ROOT r = f32[3,11,7] ragged-dot(a, b, g), "
                                     "lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
                                     "lhs_ragged_dims={1}"), "f32[3,11,7]"),
    ("convolution-same", entry("x = f32[1,5,5,3] parameter(0)\nk = f32[3,3,3,8] parameter(1)\n"
                               "ROOT r = f32[1,5,5,8] convolution(x, k), "
                               "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
     "f32[1,5,5,8]"),
    ("convolution-strided-dilated", entry("x = f32[1,3,9,9] parameter(0)\n"
                                          "k = f32[8,3,3,3] parameter(1)\n"
                                          "ROOT r = f32[1,8,3,3] convolution(x, k), "
                                          "window={size=3x3 stride=2x2 rhs_dilate=2x2}, "
                                          "dim_labels=bf01_oi01->bf01"), "f32[1,8,3,3]"),
    ("convolution-feature-groups", entry("x = f32[1,5,5,6] parameter(0)\n"
                                         "k = f32[3,3,3,8] parameter(1)\n"
                                         "ROOT r = f32[1,3,3,8] convolution(x, k), "
                                         "window={size=3x3}, dim_labels=b01f_01io->b01f, "
                                         "feature_group_count=2"), "f32[1,3,3,8]"),
    ("convolution-batch-groups", entry("x = f32[4,5,5,3] parameter(0)\n"
                                       "k = f32[3,3,3,8] parameter(1)\n"
                                       "ROOT r = f32[2,3,3,8] convolution(x, k), "
                                       "window={size=3x3}, dim_labels=b01f_01io->b01f, "
                                       "batch_group_count=2"), "f32[2,3,3,8]"),
    ("convolution-lhs-dilated", entry("x = f32[1,4,2] parameter(0)\nk = f32[3,2,2] parameter(1)\n"
                                      "ROOT r = f32[1,7,2] convolution(x, k), "
                                      "window={size=3 pad=1_1 lhs_dilate=2}, "
                                      "dim_labels=b0f_0io->b0f"), "f32[1,7,2]"),
    ("fft", entry("p = c64[4,8] parameter(0)\nROOT r = c64[4,8] fft(p), fft_type=IFFT, "
                  "fft_length={8}"), "c64[4,8]"),
    ("rfft", entry("p = f32[8,16] parameter(0)\nROOT r = c64[8,9] fft(p), fft_type=RFFT, "
                   "fft_length={16}"), "c64[8,9]"),
    ("irfft", entry("p = c64[8,9] parameter(0)\nROOT r = f32[8,16] fft(p), fft_type=IRFFT, "
                    "fft_length={16}"), "f32[8,16]"),
    ("cholesky", entry("p = f32[2,3,3] parameter(0)\nROOT r = f32[2,3,3] cholesky(p), "
                       "lower=true"), "f32[2,3,3]"),
    ("triangular-solve", entry("a = f32[4,4] parameter(0)\nb = f32[4,2] parameter(1)\n"
                               "ROOT r = f32[4,2] triangular-solve(a, b), left_side=true, "
                               "lower=true, transpose_a=NO_TRANSPOSE"), "f32[4,2]"),
    ("batch-norm-training", entry("x = f32[2,3,4] parameter(0)\ns = f32[4] parameter(1)\n"
                                  "o = f32[4] parameter(2)\n"
                                  "ROOT r = (f32[2,3,4], f32[4], f32[4]) "
                                  "batch-norm-training(x, s, o), epsilon=0.001, "
                                  "feature_index=2"), "(f32[2,3,4], f32[4], f32[4])"),
    ("batch-norm-inference", entry("x = f32[2,3] parameter(0)\ns = f32[3] parameter(1)\n"
                                   "ROOT r = f32[2,3] batch-norm-inference(x, s, s, s, s), "
                                   "epsilon=0.001, feature_index=1"), "f32[2,3]"),
    ("batch-norm-grad", entry("x = f32[2,3] parameter(0)\ns = f32[2] parameter(1)\n"
                              "ROOT r = (f32[2,3], f32[2], f32[2]) "
                              "batch-norm-grad(x, s, s, s, x), epsilon=0.001, "
                              "feature_index=0"), "(f32[2,3], f32[2], f32[2])"),
    ("rng", entry("a = f32[] parameter(0)\nb = f32[] parameter(1)\n"
                  "ROOT r = f32[3,4] rng(a, b), distribution=rng_normal"), "f32[3,4]"),
    ("rng-bit-generator", entry("s = u64[2] parameter(0)\n"
                                "ROOT r = (u64[2], u32[16]) rng-bit-generator(s), "
                                "algorithm=rng_default"), "(u64[2], u32[16])"),
    ("get-dimension-size", entry("p = f32[3,<=5] parameter(0)\n"
                                 "ROOT r = s32[] get-dimension-size(p), dimensions={1}"),
     "s32[]"),
    ("bitcast", entry("p = f32[2,3] parameter(0)\nROOT r = s32[6] bitcast(p)"), "s32[6]"),
    ("copy", entry("p = f32[2,3]{0,1} parameter(0)\nROOT r = f32[2,3]{1,0} copy(p)"),
     "f32[2,3]"),
    ("tuple-gte", entry("a = f32[2] parameter(0)\nb = s32[] parameter(1)\n"
                        "t = (f32[2], s32[]) tuple(a, b)\n"
                        "ROOT r = s32[] get-tuple-element(t), index=1"), "s32[]"),
    ("opt-barrier", entry("a = f32[2] parameter(0)\nt = (f32[2]) tuple(a)\n"
                          "ROOT r = (f32[2]) opt-barrier(t)"), "(f32[2])"),
    ("after-all", entry("a = token[] after-all()\nROOT r = token[] after-all(a, a)"),
     "token[]"),
    ("custom-call", entry("p = f32[2] parameter(0)\nROOT r = (f32[5], s8[]) custom-call(p), "
                          "custom_call_target=\"foo\""), "(f32[5], s8[])"),
    ("call", entry("a = f32[] parameter(0)\nROOT r = f32[] call(a, a), to_apply=add", ADD),
     "f32[]"),
    ("fusion", entry("a = f32[] parameter(0)\nROOT r = f32[] fusion(a, a), kind=kLoop, "
                     "calls=add", ADD), "f32[]"),
    ("while", entry("i = s32[] parameter(0)\nROOT w = s32[] while(i), condition=cond, "
                    "body=body",
                    "cond {\n p = s32[] parameter(0)\n z = s32[] constant(10)\n"
                    " ROOT c = pred[] compare(p, z), direction=LT\n}\n",
                    "body {\n p = s32[] parameter(0)\n one = s32[] constant(1)\n"
                    " ROOT n = s32[] add(p, one)\n}\n"), "s32[]"),
    ("conditional-indexed", entry("i = s32[] parameter(0)\na = f32[] parameter(1)\n"
                                  "ROOT r = f32[] conditional(i, a, a, a), "
                                  "branch_computations={neg, neg, neg}",
                                  "neg {\n p = f32[] parameter(0)\n"
                                  " ROOT n = f32[] negate(p)\n}\n"), "f32[]"),
    ("all-reduce-tuple", entry("a = f32[2] parameter(0)\nb = f32[3] parameter(1)\n"
                               "ROOT r = (f32[2], f32[3]) all-reduce(a, b), "
                               "replica_groups={}, to_apply=add", ADD), "(f32[2], f32[3])"),
    ("all-gather", entry("a = f32[2,8] parameter(0)\n"
                         "ROOT r = f32[8,8] all-gather(a), dimensions={0}, "
                         "replica_groups={{0,1,2,3}}"), "f32[8,8]"),
    ("all-gather-iota-groups", entry("a = s32[4] parameter(0)\n"
                                     "ROOT r = s32[32] all-gather(a), dimensions={0}, "
                                     "replica_groups=[1,8]<=[8], channel_id=1"), "s32[32]"),
    ("reduce-scatter", entry("a = f32[8,8] parameter(0)\n"
                             "ROOT r = f32[8,2] reduce-scatter(a), dimensions={1}, "
                             "replica_groups={{0,1,2,3}}, to_apply=add", ADD), "f32[8,2]"),
    ("all-to-all", entry("a = f32[8,8] parameter(0)\n"
                         "ROOT r = f32[8,8] all-to-all(a), dimensions={0}, "
                         "replica_groups={{0,1}}"), "f32[8,8]"),
    ("collective-permute", entry("a = f32[8] parameter(0)\n"
                                 "ROOT r = f32[8] collective-permute(a), "
                                 "source_target_pairs={{0,1},{1,0}}"), "f32[8]"),
    ("partition-id", entry("ROOT r = u32[] partition-id()"), "u32[]"),
    ("async-start", entry("a = f32[2] parameter(0)\n"
                          "ROOT s = ((f32[2]), f32[2], s32[]) async-start(a), calls=neg2",
                          "neg2 {\n p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p)\n}\n"),
     "((f32[2]), f32[2], s32[])"),
    ("infeed", entry("t = token[] after-all()\n"
                     "ROOT r = (f32[3], token[]) infeed(t)"), "(f32[3], token[])"),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid(text, expected):
    assert infer_text(text) == expected


# (id, module text, expected error substring)
INVALID = [
    ("binary-types", entry("a = f32[2] parameter(0)\nb = s32[2] parameter(1)\n"
                           "ROOT r = f32[2] add(a, b)"), "different element types"),
    ("binary-implicit-broadcast", entry("a = f32[2,3] parameter(0)\nb = f32[3] parameter(1)\n"
                                        "ROOT r = f32[2,3] add(a, b)"), "no implicit broadcast"),
    ("logical-float", entry("a = f32[2] parameter(0)\nROOT r = f32[2] and(a, a)"),
     "pred or integral"),
    ("subtract-pred", entry("a = pred[2] parameter(0)\nROOT r = pred[2] subtract(a, a)"),
     "arithmetic"),
    ("unary-float-only", entry("a = s32[2] parameter(0)\nROOT r = s32[2] floor(a)"),
     "floating-point"),
    ("sign-unsigned", entry("a = u32[2] parameter(0)\nROOT r = u32[2] sign(a)"),
     "signed or complex"),
    ("compare-type", entry("a = s32[2] parameter(0)\n"
                           "ROOT r = pred[2] compare(a, a), direction=LT, type=FLOAT"),
     "type=SIGNED"),
    ("compare-direction", entry("a = s32[2] parameter(0)\n"
                                "ROOT r = pred[2] compare(a, a), direction=XX"),
     "unknown direction"),
    ("select-pred-type", entry("p = s32[2] parameter(0)\na = f32[2] parameter(1)\n"
                               "ROOT r = f32[2] select(p, a, a)"), "must be pred"),
    ("clamp-operand-scalar", entry("lo = f32[2] parameter(0)\nx = f32[] parameter(1)\n"
                                   "ROOT r = f32[] clamp(lo, x, x)"), "clamp bounds"),
    ("bitcast-convert-widths", entry("p = f32[3] parameter(0)\n"
                                     "ROOT r = f64[3] bitcast-convert(p)"), "last dimension"),
    ("bitcast-convert-complex", entry("p = c64[3] parameter(0)\n"
                                      "ROOT r = s64[3] bitcast-convert(p)"),
     "complex and real"),
    ("broadcast-dims", entry("p = f32[3] parameter(0)\nROOT r = f32[3,2] broadcast(p), "
                             "dimensions={1}"), "does not match"),
    ("reshape-count", entry("p = f32[2,3] parameter(0)\nROOT r = f32[5] reshape(p)"),
     "element count"),
    ("transpose-permutation", entry("p = f32[2,3] parameter(0)\nROOT r = f32[2,3] "
                                    "transpose(p), dimensions={0,0}"), "not a permutation"),
    ("slice-limit", entry("p = f32[4] parameter(0)\nROOT r = f32[5] slice(p), slice={[0:5]}"),
     "exceeds"),
    ("dynamic-slice-index-count", entry("p = f32[4,4] parameter(0)\ni = s32[] parameter(1)\n"
                                        "ROOT r = f32[2,2] dynamic-slice(p, i), "
                                        "dynamic_slice_sizes={2,2}"), "start indices"),
    ("dynamic-slice-float-index", entry("p = f32[4] parameter(0)\ni = f32[] parameter(1)\n"
                                        "ROOT r = f32[2] dynamic-slice(p, i), "
                                        "dynamic_slice_sizes={2}"), "integral"),
    ("pad-negative-interior", entry("p = f32[4] parameter(0)\nz = f32[] constant(0)\n"
                                    "ROOT r = f32[4] pad(p, z), padding=0_0_-1"), "interior"),
    ("pad-value-not-scalar", entry("p = f32[4] parameter(0)\n"
                                   "ROOT r = f32[8] pad(p, p), padding=2_2"), "scalar"),
    ("concatenate-dims", entry("a = f32[2,3] parameter(0)\nb = f32[2,4] parameter(1)\n"
                               "ROOT r = f32[4,3] concatenate(a, b), dimensions={0}"),
     "differ in dimension 1"),
    ("reverse-range", entry("p = f32[2] parameter(0)\nROOT r = f32[2] reverse(p), "
                            "dimensions={1}"), "out of range"),
    ("iota-dimension", entry("ROOT r = s32[4] iota(), iota_dimension=1"), "out of range"),
    ("gather-slice-size", entry("p = f32[5,7] parameter(0)\ni = s32[4,1] parameter(1)\n"
                                "ROOT r = f32[4,8] gather(p, i), offset_dims={1}, "
                                "collapsed_slice_dims={0}, start_index_map={0}, "
                                "index_vector_dim=1, slice_sizes={1,8}"), "slice size 8"),
    ("gather-collapse-big", entry("p = f32[5,7] parameter(0)\ni = s32[4,1] parameter(1)\n"
                                  "ROOT r = f32[4,7] gather(p, i), offset_dims={1}, "
                                  "collapsed_slice_dims={0}, start_index_map={0}, "
                                  "index_vector_dim=1, slice_sizes={2,7}"), "collapse"),
    ("scatter-update-dims", entry("p = f32[5,7] parameter(0)\ni = s32[4,1] parameter(1)\n"
                                  "u = f32[3,7] parameter(2)\nROOT r = f32[5,7] "
                                  "scatter(p, i, u), update_window_dims={1}, "
                                  "inserted_window_dims={0}, scatter_dims_to_operand_dims={0},"
                                  " index_vector_dim=1, to_apply=add", ADD),
     "scatter dimension"),
    ("scatter-reducer-types", entry("p = s32[5] parameter(0)\ni = s32[4,1] parameter(1)\n"
                                    "u = s32[4] parameter(2)\nROOT r = s32[5] "
                                    "scatter(p, i, u), update_window_dims={}, "
                                    "inserted_window_dims={0}, scatter_dims_to_operand_dims={0},"
                                    " index_vector_dim=1, to_apply=add", ADD), "init value"),
    ("reduce-reducer-arity", entry("p = f32[4] parameter(0)\nz = f32[] constant(0)\n"
                                   "ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=neg",
                                   "neg {\n a = f32[] parameter(0)\n"
                                   " ROOT n = f32[] negate(a)\n}\n"), "must take 2 parameters"),
    ("reduce-duplicate-dims", entry("p = f32[4] parameter(0)\nz = f32[] constant(0)\n"
                                    "ROOT r = f32[] reduce(p, z), dimensions={0,0}, "
                                    "to_apply=add", ADD), "repeated"),
    ("reduce-init-not-scalar", entry("p = f32[4] parameter(0)\n"
                                     "ROOT r = f32[] reduce(p, p), dimensions={0}, "
                                     "to_apply=add", ADD), "scalars"),
    ("reduce-window-rank", entry("p = f32[4,6] parameter(0)\nz = f32[] constant(0)\n"
                                 "ROOT r = f32[2] reduce-window(p, z), window={size=2 "
                                 "stride=2}, to_apply=add", ADD), "window has 1 dimensions"),
    ("select-and-scatter-source", entry("p = f32[4,6] parameter(0)\ns = f32[2,3] parameter(1)"
                                        "\nz = f32[] constant(0)\n"
                                        "ROOT r = f32[4,6] select-and-scatter(p, s, z), "
                                        "window={size=2x3 stride=2x3}, select=ge, scatter=add",
                                        GE, ADD), "source"),
    ("select-and-scatter-select-type", entry("p = f32[4] parameter(0)\ns = f32[2] parameter(1)"
                                             "\nz = f32[] constant(0)\n"
                                             "ROOT r = f32[4] select-and-scatter(p, s, z), "
                                             "window={size=2 stride=2}, select=add, "
                                             "scatter=add", ADD), "must return pred[]"),
    ("sort-comparator-result", entry("k = f32[8] parameter(0)\n"
                                     "ROOT r = f32[8] sort(k), dimensions={0}, to_apply=add",
                                     ADD), "must return pred[]"),
    ("sort-comparator-params", entry("k = f32[8] parameter(0)\n"
                                     "ROOT r = f32[8] sort(k), dimensions={0}, to_apply=less",
                                     LESS), "must take 2 parameters"),
    ("dot-contracting", entry("a = f32[2,3] parameter(0)\nb = f32[4,5] parameter(1)\n"
                              "ROOT r = f32[2,5] dot(a, b), lhs_contracting_dims={1}, "
                              "rhs_contracting_dims={0}"), "contracting dimension sizes"),
    ("dot-narrowing", entry("a = s32[2] parameter(0)\n"
                            "ROOT r = s8[] dot(a, a), lhs_contracting_dims={0}, "
                            "rhs_contracting_dims={0}"), "narrower"),
    ("convolution-features", entry("x = f32[1,5,5,4] parameter(0)\n"
                                   "k = f32[3,3,3,8] parameter(1)\n"
                                   "ROOT r = f32[1,3,3,8] convolution(x, k), window={size=3x3},"
                                   " dim_labels=b01f_01io->b01f"), "input features"),
    ("convolution-window", entry("x = f32[1,5,5,3] parameter(0)\n"
                                 "k = f32[3,3,3,8] parameter(1)\n"
                                 "ROOT r = f32[1,4,4,8] convolution(x, k), window={size=2x2},"
                                 " dim_labels=b01f_01io->b01f"), "window sizes"),
    ("fft-type", entry("p = f32[8] parameter(0)\nROOT r = f32[8] fft(p), fft_type=FFT, "
                       "fft_length={8}"), "complex operand"),
    ("cholesky-square", entry("p = f32[3,4] parameter(0)\nROOT r = f32[3,4] cholesky(p)"),
     "square"),
    ("batch-norm-feature", entry("x = f32[2,3] parameter(0)\ns = f32[2] parameter(1)\n"
                                 "ROOT r = f32[2,3] batch-norm-inference(x, s, s, s, s), "
                                 "epsilon=0.001, feature_index=1"), "feature count"),
    ("gte-index", entry("a = f32[] parameter(0)\nt = (f32[]) tuple(a)\n"
                        "ROOT r = f32[] get-tuple-element(t), index=1"), "out of range"),
    ("gte-non-tuple", entry("a = f32[] parameter(0)\n"
                            "ROOT r = f32[] get-tuple-element(a), index=0"), "non-tuple"),
    ("call-arity", entry("a = f32[] parameter(0)\nROOT r = f32[] call(a), to_apply=add", ADD),
     "takes 2 parameter(s)"),
    ("fusion-param-shape", entry("a = s32[] parameter(0)\nROOT r = f32[] fusion(a, a), "
                                 "kind=kLoop, calls=add", ADD), "parameter 0 is f32[]"),
    ("while-body", entry("i = s32[] parameter(0)\nROOT w = s32[] while(i), condition=cond, "
                         "body=body",
                         "cond {\n p = s32[] parameter(0)\n"
                         " ROOT c = pred[] compare(p, p), direction=LT\n}\n",
                         "body {\n p = s32[] parameter(0)\n"
                         " ROOT n = f32[] convert(p)\n}\n"), "body %body result"),
    ("while-condition", entry("i = s32[] parameter(0)\nROOT w = s32[] while(i), "
                              "condition=body, body=body",
                              "body {\n p = s32[] parameter(0)\n"
                              " ROOT n = s32[] negate(p)\n}\n"), "must return pred[]"),
    ("conditional-results", entry("b = pred[] parameter(0)\na = f32[] parameter(1)\n"
                                  "ROOT r = f32[] conditional(b, a, a), "
                                  "true_computation=t, false_computation=f",
                                  "t {\n p = f32[] parameter(0)\n"
                                  " ROOT n = f32[] negate(p)\n}\n",
                                  "f {\n p = f32[] parameter(0)\n"
                                  " ROOT n = s32[] convert(p)\n}\n"), "different shapes"),
    ("conditional-index-type", entry("b = u32[] parameter(0)\na = f32[] parameter(1)\n"
                                     "ROOT r = f32[] conditional(b, a), "
                                     "branch_computations={t}",
                                     "t {\n p = f32[] parameter(0)\n"
                                     " ROOT n = f32[] negate(p)\n}\n"), "pred[] or s32[]"),
    ("map-arity", entry("a = f32[4] parameter(0)\n"
                        "ROOT r = f32[4] map(a), dimensions={0}, to_apply=add", ADD),
     "takes 2 parameter(s)"),
    ("all-gather-shards", entry("a = f32[2,8] parameter(0)\n"
                                "ROOT r = f32[6,8] all-gather(a), dimensions={0}, "
                                "replica_groups={{0,1,2,3}}"), "replica group size is 4"),
    ("replica-groups-repeat", entry("a = f32[2] parameter(0)\n"
                                    "ROOT r = f32[2] all-reduce(a), replica_groups={{0,0}}, "
                                    "to_apply=add", ADD), "repeated"),
    ("reduce-scatter-divisible", entry("a = f32[6] parameter(0)\n"
                                       "ROOT r = f32[1] reduce-scatter(a), dimensions={0}, "
                                       "replica_groups={{0,1,2,3}}, to_apply=add", ADD),
     "replica group size is 4"),
    ("after-all-operand", entry("a = f32[] parameter(0)\nROOT r = token[] after-all(a)"),
     "must be a token"),
    ("topk-k", entry("p = f32[5,2] parameter(0)\n"
                     "ROOT r = (f32[5,3], s32[5,3]) topk(p), k=3"), "exceeds"),
    ("rng-types", entry("a = f32[] parameter(0)\nb = s32[] parameter(1)\n"
                        "ROOT r = f32[3] rng(a, b), distribution=rng_uniform"),
     "share a type"),
    ("custom-call-aliasing", entry("p = f32[2] parameter(0)\n"
                                   "ROOT r = f32[3] custom-call(p), custom_call_target=\"x\", "
                                   "output_to_operand_aliasing={{}: (0, {})}"),
     "output_to_operand_aliasing"),
]


@pytest.mark.parametrize("text,message", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid(text, message):
    with pytest.raises(ShapeError) as err:
        infer_shape(root_of(text))
    assert message in str(err.value)


def test_every_opcode_has_a_rule():
    assert sorted(set(OPCODES) - set(RULES)) == []


@pytest.mark.parametrize("body", [
    "p = f32[2] parameter(0)\nROOT r = f32[2] convert(p)",
    "ROOT r = f32[2] custom-call(), custom_call_target=\"x\"",
    "p = f32[6] parameter(0)\nROOT r = f32[2,3] reshape(p)",
])
def test_declared_parts_cannot_be_inferred_without_a_shape(body):
    inst = root_of(entry(body))
    inst.shape = None
    with pytest.raises(CannotInfer) as err:
        infer_shape(inst)
    assert not isinstance(err.value, ShapeError)


def test_parser_fills_omitted_shapes_from_the_rules():
    m = parse_hlo("HloModule t\nENTRY e {\n a = f32[2,3] parameter(0)\n"
                  " b = f32[3,2] parameter(1)\n d = dot(a, b), lhs_contracting_dims={1}, "
                  "rhs_contracting_dims={0}\n c = compare(d, d), direction=LT\n"
                  " ROOT t = tuple(d, c)\n}\n")
    assert m.entry.root.shape.to_text(layout=False) == "(f32[2,2], pred[2,2])"


def test_dynamic_dimensions_are_propagated():
    inst = root_of(entry("p = f32[<=4,3] parameter(0)\n"
                         "ROOT r = f32[3,<=4] transpose(p), dimensions={1,0}"))
    assert infer_shape(inst).dynamic == (False, True)
