"""The in-memory HLO IR: Shape, Layout, Literal, Instruction, Computation, HloModule.

``Literal`` (numpy-backed) loads lazily so that parsing and printing never import numpy.
"""
from .computation import Computation
from .instruction import Instruction
from .module import HloModule
from .shape import Layout, Shape

__all__ = ["Computation", "HloModule", "Instruction", "Layout", "Literal", "Shape"]


def __getattr__(name):
    if name == "Literal":
        from .literal import Literal
        return Literal
    raise AttributeError(name)
