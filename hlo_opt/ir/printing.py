"""How the IR prints itself without importing ``hlo_opt.text`` (text depends on the IR,
never the reverse).

All printing lives in :mod:`hlo_opt.text.printer`, which registers its functions here
when it is imported (importing anything of ``hlo_opt.text``, the parser included, does
that).  ``Instruction.to_text``, ``Computation.to_text`` and ``HloModule.to_text`` are
thin methods that call the registered functions.
"""
from __future__ import annotations

_PRINTERS: dict = {}


def register(**printers) -> None:
    """``instruction=``, ``computation=``, ``module=``: the text printer's functions."""
    _PRINTERS.update(printers)


def printer(kind: str):
    fn = _PRINTERS.get(kind)
    if fn is None:
        raise RuntimeError(f"no {kind} printer registered: import hlo_opt.text (its "
                           "printer registers itself)")
    return fn
