"""Building reduces and bitcasts for the reduction rewriters."""
from __future__ import annotations

from hlo_opt.ir.attributes import int_list_text
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape


def make_reduce(comp, shape: Shape, inputs, inits, dims, to_apply, like: Instruction):
    attrs = {"dimensions": int_list_text(sorted(dims)), "to_apply": ""}
    if "metadata" in like.attrs:
        attrs["metadata"] = like.attrs["metadata"]
    return comp.add("reduce", shape, list(inputs) + list(inits), name="reduce", attrs=attrs,
                    called=[to_apply], called_attr="to_apply")


def bitcast(comp, x: Instruction, shape: Shape) -> Instruction:
    return comp.add("bitcast", shape, [x], name="bitcast")


def array(et: str, dims) -> Shape:
    return Shape.array(et, tuple(int(d) for d in dims))


def maybe_tuple(shapes) -> Shape:
    shapes = list(shapes)
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)
