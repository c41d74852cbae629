"""AlgebraicSimplifierOptions: XLA's option names and defaults, plus one of ours.

Only options that change what the rules do are modelled.  ``approximate_float_rewrites``
is ours: XLA applies a few value-changing float rewrites unconditionally (A/C => A*(1/C)
for any constant C, log(sqrt(A)) => 0.5*log(A), A/sqrt(B) => A*rsqrt(B), pow(A,3) =>
A*A*A, mul(convert(pred), x) => select(pred, x, 0) ...).  By default we keep float results
bit-identical except for reassociation (``float_reassociation``), and apply those only
when ``approximate_float_rewrites=True`` (XLA's behaviour).
"""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class AlgebraicSimplifierOptions:
    is_layout_sensitive: bool = False
    enable_dot_strength_reduction: bool = True
    supports_non_canonical_dots: bool = True
    enable_dot_to_multiply_rewrite: bool = True
    enable_conv_simplification: bool = True
    enable_conv_operand_swap: bool = True
    enable_floats_are_real: bool = False
    enable_window_reduce_to_reduce_replacement: bool = True
    enable_reduce_of_reshape: bool = True
    enable_negative_padding_replacement: bool = True
    enable_sink_broadcast: bool = True
    unconditionally_simplify_reduce_of_transpose_or_reshape: bool = False
    very_small_gather_size: int = 4
    minmax_propagate_nan: bool = True
    enable_unconditional_reduce_of_concat_replacement: bool = True
    executing_on_cpu: bool = False
    use_convert_constant_folding: bool = False
    disable_dynamic_slice_to_slice_conversion: bool = False
    enable_fast_math: bool = False
    enable_broadcast_degenerate_dimension: bool = True
    enable_remove_no_op_reduce_precision: bool = False
    run_to_fixed_point: bool = True
    enable_conditional_simplification: bool = False
    enable_folding_pad_into_convolution: bool = True
    enable_dynamic_update_slice_to_pad_replacement: bool = True
    # ours (see the module docstring)
    float_reassociation: bool = True
    approximate_float_rewrites: bool = False

    def same_shape(self, a, b) -> bool:
        """XLA's SameShape: layouts count only when layout sensitive."""
        if self.is_layout_sensitive:
            return a == b
        return a.same_dims_and_type(b)

    def replace(self, **changes) -> "AlgebraicSimplifierOptions":
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return AlgebraicSimplifierOptions(**values)


def layout_free(opts: AlgebraicSimplifierOptions) -> bool:
    """``when=`` of the rules that may change layouts: off when layout sensitive."""
    return not opts.is_layout_sensitive
