"""HLO text: the fast parser, the reference lark grammar (errors), the canonical printer.

Importing the package registers the printer with the IR (:mod:`hlo_opt.ir.printing`)."""
from . import printer  # noqa: F401  (registers the IR's to_text)
