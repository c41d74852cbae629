"""``cublas-pad-for-gemms``: XLA's CublasPadForGemms, for every entry of XLA's
CublasPaddingRequirements the target GPU meets, in XLA's order:

    s8 to multiples of 4 (Volta+), f16 to multiples of 8 (Volta+), bf16 to multiples of 8
    (Ampere+)

A canonical matrix-matrix ``dot`` (batch dimensions leading and the same on both sides,
then exactly one non-batch non-contracting and one contracting dimension per operand, of
a type cuBLAS supports; ``IsCublasSupportedMatMul`` without matrix-vector products) whose
operands are both of that type gets the last two dimensions of each operand (and of the
result) rounded up: ``pad(operand, 0)`` with high padding, the dot on the padded shapes,
then a ``slice`` of the original result.  Tensor cores need these multiples; the zero
rows and columns add nothing to the products.  The pads, the zero and the slice take the
dot's metadata.  Runs before cublas-gemm-rewriter (which folds the slice into epilogues
where it can) and constant_folding (which folds pads of constants).

As XLA, a dot is left alone when ``--xla_gpu_enable_triton_gemm`` (the default) is on and
the Triton GEMM emitter would take it (``ShouldTritonHandleGEMM``:
``_triton_gemm.should_triton_handle_gemm``, the decision of ``triton-gemm-rewriter``,
which then fuses it); with the flag off every candidate is padded, as in XLA.
"""
from __future__ import annotations

from hlo_opt.ir.attributes import PaddingConfig, SliceSpec
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.graph import remove

from ._triton_gemm import should_triton_handle_gemm

# (minimum compute capability, element type, multiple): CublasPaddingRequirements
PADDING_REQUIREMENTS = (((7, 0), "s8", 4), ((7, 0), "f16", 8), ((8, 0), "bf16", 8))

_MATMUL_TYPES = frozenset({"f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64", "c64"})
_MATMUL_ONLY_TYPES = frozenset({"f8e3m4", "f8e4m3", "f8e4m3fnuz", "f8e5m2fnuz", "c128"})


def is_cublas_supported_matmul(dot: Instruction, allow_matrix_vector: bool = False) -> bool:
    """IsCublasSupportedMatMul."""
    if dot.opcode != "dot":
        return False
    matrix_operands = 0
    for i, side in ((0, "lhs"), (1, "rhs")):
        shape = dot.operands[i].shape
        batch = list(dot.attr(f"{side}_batch_dims", ()))
        contracting = list(dot.attr(f"{side}_contracting_dims", ()))
        if len(contracting) != 1 or shape.rank - 1 in batch:
            return False
        free = [d for d in range(shape.rank) if d not in batch and d not in contracting]
        if len(free) > 1:
            return False
        if free and shape.dims[free[0]] != 1:
            matrix_operands += 1
    if matrix_operands == 0 or (matrix_operands == 1 and not allow_matrix_vector):
        return False
    out = dot.shape.element_type
    if out in _MATMUL_TYPES:
        return True
    if out == "s32":
        return all(o.shape.element_type == "s8" for o in dot.operands[:2])
    return out in _MATMUL_ONLY_TYPES and matrix_operands == 2


def is_canonical(dot: Instruction) -> bool:
    """CheckCanonical: all but the last two dimensions of each operand are batch
    dimensions, numbered 0..n-1 on both sides."""
    dnums = dot.dot_dimension_numbers
    lb = list(dnums.lhs_batch_dims)
    rb = list(dnums.rhs_batch_dims)
    if len(lb) + 2 != dot.operands[0].shape.rank or len(rb) + 2 != dot.operands[1].shape.rank:
        return False
    return lb == list(range(len(lb))) and rb == list(range(len(lb)))


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _pad_matrix_dims(shape: Shape, multiple: int) -> Shape:
    dims = list(shape.dims)
    for d in (len(dims) - 2, len(dims) - 1):
        dims[d] = _round_up(dims[d], multiple)
    return shape.with_dims(dims, shape.layout)


def _with_metadata(inst: Instruction, dot: Instruction) -> Instruction:
    if "metadata" in dot.attrs:
        inst.attrs["metadata"] = dot.attrs["metadata"]
    return inst


def pad_for_gemm(dot: Instruction, datatype: str, multiple: int) -> bool:
    """PadForGemm: pad ``dot``'s operands (both of ``datatype``) and slice the result."""
    lhs, rhs = dot.operands[0], dot.operands[1]
    if lhs.shape.element_type != datatype or rhs.shape.element_type != datatype:
        return False
    new_l = _pad_matrix_dims(lhs.shape, multiple)
    new_r = _pad_matrix_dims(rhs.shape, multiple)
    if new_l.dims == lhs.shape.dims and new_r.dims == rhs.shape.dims:
        return False
    new_out = _pad_matrix_dims(dot.shape, multiple)
    comp = dot.parent
    zero = _with_metadata(comp.add("constant", Shape.array(datatype, ()), name="constant",
                                   payload="0"), dot)
    pads = []
    for x, shape in ((lhs, new_l), (rhs, new_r)):
        pad = comp.add("pad", shape, [x, zero], name="pad")
        pad.set_attr("padding", PaddingConfig([(0, n - o, 0)
                                               for o, n in zip(x.shape.dims, shape.dims)]))
        pads.append(_with_metadata(pad, dot))
    new_dot = comp.add("dot", new_out, pads, name=dot.name, attrs=dict(dot.attrs))
    sl = comp.add("slice", dot.shape, [new_dot], name="slice")
    sl.set_attr("slice", SliceSpec([(0, d, 1) for d in dot.shape.dims]))
    _with_metadata(sl, dot)
    dot.replace_all_uses_with(sl)
    remove(comp, dot)
    return True


def relevant_dots(comp, datatype: str, triton_gemm: bool = False, device=None) -> list:
    """GetRelevantDots (``triton_gemm``: --xla_gpu_enable_triton_gemm)."""
    return [i for i in comp.instructions
            if i.opcode == "dot" and i.operands[0].shape.element_type == datatype
            and "sparsity" not in i.attrs and is_cublas_supported_matmul(i)
            and is_canonical(i) and not (triton_gemm and should_triton_handle_gemm(i, device))]


class CublasPadForGemms:
    name = "cublas-pad-for-gemms"

    def __init__(self, datatype: str | None = None, pad_to_multiple_of: int | None = None):
        """With no arguments: XLA's whole list of requirements the target GPU meets (one
        pass instance per requirement in XLA)."""
        self.datatype = datatype
        self.multiple = pad_to_multiple_of

    def _requirements(self, module):
        if self.datatype is not None:
            return [(self.datatype, self.multiple or 8)]
        cc = module.config.device.compute_capability
        return [(t, m) for min_cc, t, m in PADDING_REQUIREMENTS if cc >= min_cc]

    def run(self, module) -> bool:
        changed = False
        triton = module.config.debug_options.xla_gpu_enable_triton_gemm
        device = module.config.device
        for datatype, multiple in self._requirements(module):
            for comp in module.nonfusion_computations(post_order=True):
                for dot in relevant_dots(comp, datatype, triton, device):
                    changed |= pad_for_gemm(dot, datatype, multiple)
        return changed
