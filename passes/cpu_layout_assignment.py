"""``cpu-layout-assignment``: the part of XLA's CpuLayoutAssignment that code generation
depends on: a dot that the CPU backend cannot call as one GEMM over its buffers as laid
out gets row-major operands and output (``copy`` instructions to and from the layouts
the producers and users have), as XLA:CPU's dot operand constraints do.

Not ported: the rest of layout assignment (XLA's CPU pass assigns every layout from the
entry computation layout and operand constraints; here the module's layouts are kept,
and the backend handles any layout).
"""
from __future__ import annotations

from hlo_opt.ir.shape import Layout


def _row_major(shape):
    return shape.with_layout(Layout.default(shape.rank))


class CpuLayoutAssignment:
    name = "cpu-layout-assignment"

    def run(self, module) -> bool:
        from hlo_opt.backends.cpu.blas import gemm_plan
        changed = False
        for comp in list(module.computations):
            if comp in module.fusion_computations():
                continue
            for dot in [i for i in comp.instructions if i.opcode == "dot"]:
                if dot.shape.element_type not in ("f32", "f64") or gemm_plan(dot) is not None:
                    continue
                for k, op in enumerate(list(dot.operands)):
                    if not op.shape.is_array() or op.shape == _row_major(op.shape):
                        continue
                    cp = comp.add("copy", _row_major(op.shape), [op],
                                  name=module.unique_name(f"{op.name}.row_major"))
                    dot.replace_operand(k, cp)
                    changed = True
                if dot.shape != _row_major(dot.shape):
                    old_shape = dot.shape
                    new = comp.add_instruction(dot.clone_with(list(dot.operands),
                                                              _row_major(old_shape),
                                                              module.unique_name(dot.name)))
                    back = comp.add("copy", old_shape, [new],
                                    name=module.unique_name(f"{dot.name}.relayout"))
                    dot.replace_all_uses_with(back)
                    comp.remove_instruction(dot)
                    changed = True
        return changed
