"""``fusion-wrapper``: XLA's GPU FusionWrapper (the last HLO pass before IR emission).

Every instruction left unfused that the fusion emitters generate a kernel for is wrapped
in a single-instruction fusion of its own, named ``wrapped_<opcode>`` (its computation
``wrapped_<opcode>_computation``), of the kind ``ChooseFusionKind`` gives it (kInput for a
reduction or tiled-transpose hero, else kLoop).  The entry computation is walked in post
order, and the computations of its while loops, conditionals and calls as they are met
(not reducers or other applied computations).  Copies stay as they are (a copy is a
memcpy, not a kernel).

Differs from XLA: dots and convolutions are not wrapped (XLA wraps the ones no library
call took; here an unfused dot or convolution is the backend's library call).
"""
from __future__ import annotations

from hlo_opt.analysis.gpu.fusible import choose_fusion_kind
from hlo_opt.rewrite.fusion import create_fusion
from hlo_opt.rewrite.graph import rename_computation

# FusionWrapper::MustWrapInstruction, without dot and convolution (see above)
WRAPPED = frozenset({
    "abs", "add", "and", "atan2", "bitcast-convert", "broadcast", "cbrt", "ceil", "clamp",
    "clz", "compare", "complex", "concatenate", "convert", "cosine", "divide",
    "dynamic-slice", "dynamic-update-slice", "erf", "exponential", "exponential-minus-one",
    "floor", "gather", "imag", "iota", "is-finite", "log", "log-plus-one", "map", "maximum",
    "minimum", "multiply", "negate", "not", "or", "pad", "popcnt", "power", "real",
    "reshape", "reduce", "reduce-precision", "reduce-window", "remainder", "reverse",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "scatter", "select",
    "shift-left", "shift-right-logical", "shift-right-arithmetic", "sign", "sine", "slice",
    "sqrt", "subtract", "stochastic-convert", "tan", "tanh", "transpose", "xor"})

_CONTROL = ("while", "conditional", "call", "async-start")


class FusionWrapper:
    name = "fusion-wrapper"

    def run(self, module) -> bool:
        changed = False
        seen: set = set()

        def walk(comp) -> None:
            nonlocal changed
            if comp in seen:
                return
            seen.add(comp)
            for inst in comp.post_order():
                if inst.parent is not comp:
                    continue
                if inst.opcode in _CONTROL:
                    for called in inst.called:
                        walk(called)
                    continue
                if inst.opcode not in WRAPPED or inst.control_predecessors or \
                        inst.control_successors:
                    continue
                kind = choose_fusion_kind(inst, inst)
                fusion = create_fusion(comp, inst, kind, name=f"wrapped_{inst.opcode}")
                rename_computation(module, fusion.called[0],
                                   f"wrapped_{fusion.called[0].root.opcode}_computation")
                changed = True

        walk(module.entry)
        return changed
