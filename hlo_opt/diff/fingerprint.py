"""Structural fingerprints, name-free: what the exact-subgraph matcher compares.

* ``attr_fp``: typed attributes (verbatim text, canonically spaced) plus the payload
  (literal of a constant, number of a parameter); never metadata, names or computation
  references.
* ``local_fp``: opcode, shape without layout, ``attr_fp``.
* ``fp`` (subgraph fingerprint): ``local_fp`` and the ``fp`` of every operand in order and
  of every called computation, bottom-up; equal ``fp`` means an identical subgraph.
* ``height``: 1 for leaves, else 1 + the tallest operand.
* ``comp_fp``: the root's ``fp`` and the parameters' (for the call graph).
"""
from __future__ import annotations

from .graph import Side, attr_items


def fingerprint(side: Side) -> None:
    """Fill ``attr_fp``, ``shape_fp``, ``local_fp``, ``fp``, ``height``, ``comp_fp``."""
    n = side.n
    insts = side.insts
    attr_fp = [0] * n
    shape_fp = [0] * n
    local_fp = [0] * n
    fp = [0] * n
    height = [1] * n
    comp_fp = [0] * len(side.comps)
    ops_all = side.ops
    called_all = side.called
    opcode = side.opcode
    attr_cache: dict = {}
    for ci, (start, end) in enumerate(side.comp_range):
        for i in range(start, end):
            inst = insts[i]
            attrs = inst.attrs
            if len(attrs) == 1 and "metadata" in attrs or not attrs:
                a = attr_cache.get(inst.payload)
                if a is None:
                    a = attr_cache[inst.payload] = hash(((), inst.payload))
            else:
                a = hash((attr_items(inst), inst.payload))
            s = hash(inst.shape)
            attr_fp[i] = a
            shape_fp[i] = s
            loc = hash((opcode[i], s, a))
            local_fp[i] = loc
            ops = ops_all[i]
            called = called_all[i]
            if ops or called:
                fp[i] = hash((loc, tuple([fp[o] for o in ops]),
                               tuple([comp_fp[c] for c in called])))
                if ops:
                    height[i] = 1 + max([height[o] for o in ops])
            else:
                fp[i] = loc
        root = side.comp_root[ci]
        comp_fp[ci] = hash((fp[root] if root >= 0 else 0,
                            tuple(fp[p] if p >= 0 else 0 for p in side.comp_params[ci])))
    side.attr_fp = attr_fp
    side.shape_fp = shape_fp
    side.local_fp = local_fp
    side.fp = fp
    side.height = height
    side.comp_fp = comp_fp
