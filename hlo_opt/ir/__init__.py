"""The in-memory HLO IR: Shape, Layout, Literal, Instruction, Computation, HloModule."""
from .computation import Computation
from .instruction import Instruction
from .literal import Literal
from .module import HloModule
from .shape import Layout, Shape

__all__ = ["Computation", "HloModule", "Instruction", "Layout", "Literal", "Shape"]
