"""Typed dimension numbers of dot, gather and scatter (XLA's DotDimensionNumbers,
GatherDimensionNumbers, ScatterDimensionNumbers), read from an instruction's attributes;
a convolution's (one ``dim_labels`` attribute) are
:class:`~hlo_opt.ir.attributes.ConvolutionDimensionNumbers`, re-exported here.

HLO text spells each list as its own attribute (``lhs_contracting_dims={1}``); the
instruction keeps them so (printing reproduces them byte for byte) and parses each once
(:meth:`Instruction.attr`).  These frozen values group them: ``of(inst)`` reads them,
``attrs()`` gives the attribute texts to write for a new instruction, in XLA's order.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from .attributes import ConvolutionDimensionNumbers, int_list_text

__all__ = ["ConvolutionDimensionNumbers", "DotDimensionNumbers", "GatherDimensionNumbers",
           "ScatterDimensionNumbers"]


def _read(cls, inst):
    values = {}
    for f in fields(cls):
        v = inst.attr(f.name)
        values[f.name] = v if v is not None else f.default
    return cls(**values)


@dataclass(frozen=True)
class DotDimensionNumbers:
    lhs_batch_dims: tuple[int, ...] = ()
    lhs_contracting_dims: tuple[int, ...] = ()
    rhs_batch_dims: tuple[int, ...] = ()
    rhs_contracting_dims: tuple[int, ...] = ()

    @staticmethod
    def of(inst) -> "DotDimensionNumbers":
        return _read(DotDimensionNumbers, inst)

    def lists(self) -> tuple[list, list, list, list]:
        """(lhs batch, lhs contracting, rhs batch, rhs contracting) as lists."""
        return (list(self.lhs_batch_dims), list(self.lhs_contracting_dims),
                list(self.rhs_batch_dims), list(self.rhs_contracting_dims))

    def attrs(self) -> dict[str, str]:
        """The attribute texts as XLA prints them (batch dims only when there are any)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v or f.name.endswith("contracting_dims"):
                out[f.name] = int_list_text(v)
        return out


@dataclass(frozen=True)
class GatherDimensionNumbers:
    offset_dims: tuple[int, ...] = ()
    collapsed_slice_dims: tuple[int, ...] = ()
    start_index_map: tuple[int, ...] = ()
    index_vector_dim: int | None = None
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()

    @staticmethod
    def of(inst) -> "GatherDimensionNumbers":
        return _read(GatherDimensionNumbers, inst)


@dataclass(frozen=True)
class ScatterDimensionNumbers:
    update_window_dims: tuple[int, ...] = ()
    inserted_window_dims: tuple[int, ...] = ()
    scatter_dims_to_operand_dims: tuple[int, ...] = ()
    index_vector_dim: int | None = None
    input_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()

    @staticmethod
    def of(inst) -> "ScatterDimensionNumbers":
        return _read(ScatterDimensionNumbers, inst)
