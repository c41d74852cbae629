"""``triton-softmax-rewriter``: XLA's SoftmaxRewriterTriton, with the merging of its
fusions that XLA's priority fusion then does.

A *normalisation diamond* is an elementwise binary ``root`` whose second operand reaches a
``broadcast`` of a ``reduce`` over the last dimension through trivially fusible ops, where
the reduce's operand and the root's first operand both come, through trivially fusible ops,
from one ``producer``::

    producer -> ... -> reduce(last dim) -> ... -> broadcast -> root(op0, op1)
        \\---------------------------------------------------/ (op0)

Trivially fusible (XLA's ``IsTriviallyFusible``): at most one user and the default
layout, and a bitcast, a supported unary elementwise op, or a binary elementwise op whose
two operands are the same or exactly one of them is a broadcast of a scalar constant or of
a parameter.  XLA's conditions are kept: the root a supported elementwise binary op; the
reduce one dimension, the operand's last, with a constant (or converted constant) init
and a supported reducer; broadcast and reduce in the default layout with one user each;
the broadcast not along the last dimension; for a root whose first operand is not the
producer itself, that operand has one user.  Supported types are those XLA's Triton
emitter takes for normalisations (f16, bf16, f32, f64 and signed integers; XLA declines
unsigned ones); a row must fit one Triton tensor (its length rounded up to a power of
two at most 2**20 elements).

Each diamond becomes a fusion ``triton_softmax`` of kind kCustom whose backend_config is
``{"fusion_backend_config":{"kind":"__triton", "block_level_fusion_config": ...}}`` (one
row per block, the whole row as the tile), as XLA prints it.  Diamonds are fused in
reverse post order (a diamond's root may be the next one's producer).  Then, as XLA's
priority fusion does for Triton fusions, each fusion grows while it stays one row
normalisation (``hlo_opt.codegen.row_norm.analyze``) and reads no more: producers used only
by it (elementwise ops, broadcasts, and other ``__triton`` normalisations of the same rows)
move in, and so does its only user when that is an elementwise op over the same rows.
Softmax (max, subtract, exp, sum, divide) and layer norm (mean, variance, scale, shift)
become one fusion each, as XLA's output has them.

Priority fusion also fuses a producer into all its Triton consumers at once, recomputing
it in each, which is how XLA's backward passes become one kernel per output: every value
of a normalisation's rows that something outside still reads becomes the root of one
fusion with its *cone*, its producers of the same rows (elementwise ops, reductions of
the row, per-row values, broadcasts, other normalisations of the rows), those used
elsewhere included when recomputing them reads no more than loading them (a layer norm's
statistics, a softmax's exponentials: see ``_cone``).  A cone becomes a fusion when it
holds one of the normalisations and stays one row normalisation.  Elementwise ops on a
bitcast of the rows (a gemm's 2-D view) are first rewritten onto the rows themselves.
Layer-norm backward (``dx`` and the ``dy * xhat`` of the scale's gradient) and softmax
backward (``y * (dy - sum(dy * y))``) each become one fusion, as in XLA's output.

XLA runs the pass for Ampere and newer (``module.config.device``) after
reduction-layout-normalizer; ``gpu_pipelines.post_layout_assignment`` places it there.
"""
from __future__ import annotations

import json
import math

from hlo_opt.analysis.layout import has_default_layout, with_default_layout
from hlo_opt.codegen.row_norm import (TRITON_FUSION_KIND, analyze, analyze_instructions,
                                      is_per_row, is_triton_norm_fusion)
from hlo_opt.ir.opcodes import is_elementwise
from hlo_opt.rewrite.fusion import absorb, absorb_consumer, create_fusion
from hlo_opt.rewrite.graph import (fusible_computations, post_order_from,
                                   remove_dead_operands, rename_computation)

# XLA's Triton emitter takes these for normalisations (unsigned integers it declines)
SUPPORTED_TYPES = frozenset({"f16", "bf16", "f32", "f64", "s8", "s16", "s32", "s64"})
MAX_TENSOR_ELEMENTS = 1 << 20   # Triton's limit on one tensor
_REDUCERS = frozenset({"add", "maximum", "minimum", "multiply"})
_UNSUPPORTED_ELEMENTWISE = frozenset({"rng", "stochastic-convert", "reduce-precision",
                                      "complex", "real", "imag", "bitcast-convert",
                                      "popcnt", "count-leading-zeros", "erf"})


def _default_layout(shape) -> bool:
    return shape.is_array() and has_default_layout(shape)


def _supported_type(inst) -> bool:
    if not inst.shape.is_array():
        return False
    et = inst.shape.element_type
    if et in SUPPORTED_TYPES:
        return True
    # predicates: compare results and select conditions
    return et == "pred" and all(o.shape.element_type in SUPPORTED_TYPES | {"pred"}
                                for o in inst.operands)


def _supported(inst) -> bool:
    """XLA's IsTritonSupportedInstruction, for the ops a normalisation may hold."""
    if not _supported_type(inst):
        return False
    op = inst.opcode
    if op == "convert":
        return inst.operands[0].shape.element_type in SUPPORTED_TYPES
    if is_elementwise(op):
        return op not in _UNSUPPORTED_ELEMENTWISE
    if op == "reduce":
        return _supported_reducer(inst)
    return op in ("broadcast", "bitcast", "reshape", "constant", "parameter")


def _supported_reducer(reduce) -> bool:
    if len(reduce.operands) != 2 or reduce.shape.is_tuple():
        return False
    body = reduce.called[0] if reduce.called else None
    if body is None:
        return False
    root = body.root
    params = body.parameters
    return root.opcode in _REDUCERS and len(params) == 2 and \
        set(root.operands) == set(params)


def _is_scalar_constant(inst) -> bool:
    return inst.opcode == "constant" and inst.shape.is_array() and inst.shape.rank == 0


def _is_splat(inst) -> bool:
    """XLA's IsBroadcastOfScalarConstant or IsBroadcastOfParameter."""
    return inst.opcode == "broadcast" and (_is_scalar_constant(inst.operands[0])
                                           or inst.operands[0].opcode == "parameter")


def _operand_for_processing(inst):
    if len(inst.operands) > 1 and _is_splat(inst.operands[0]):
        return inst.operands[1]
    return inst.operands[0]


def _trivially_fusible(inst, allowed_users: int = 1) -> bool:
    if inst.user_count > allowed_users or not _default_layout(inst.shape):
        return False
    if inst.opcode == "bitcast":
        return True
    if not is_elementwise(inst.opcode):
        return False
    if len(inst.operands) == 1:
        return _supported(inst)
    if len(inst.operands) == 2:
        a, b = inst.operands
        if a is b:
            return _supported(inst)
        if _is_splat(a) != _is_splat(b):
            return _supported(inst)
    return False


def _trivial_edge(consumer, opcode: str):
    """The instruction of ``opcode`` reached from ``consumer`` through trivially fusible
    ops (None when the walk stops first)."""
    while consumer.opcode != opcode:
        if not _trivially_fusible(consumer):
            return None
        consumer = _operand_for_processing(consumer)
    return consumer


def _trivially_connected(producer, consumer) -> bool:
    if producer is consumer:
        return True
    found = _trivial_edge(consumer, producer.opcode)
    while found is not None:
        if found is producer:
            return True
        if not _trivially_fusible(found):
            return False
        consumer = found.operands[0]
        found = _trivial_edge(consumer, producer.opcode)
    return False


def _identity_ok(init) -> bool:
    return init.opcode == "constant" or (
        init.opcode == "convert" and init.operands[0].opcode == "constant" and
        _supported(init))


def match_diamond(root):
    """(producer, "") when ``root`` closes a normalisation diamond, else (None, why)."""
    if not is_elementwise(root.opcode) or len(root.operands) != 2:
        return None, "root is not elementwise binary"
    if not _supported(root):
        return None, "root is not supported"
    bcast = _trivial_edge(root.operands[1], "broadcast")
    if bcast is None:
        return None, "no trivial connection from the root to a broadcast"
    reduce = _trivial_edge(bcast.operands[0], "reduce")
    if reduce is None:
        return None, "no trivial connection from the broadcast to a reduction"
    if not (_default_layout(bcast.shape) and _default_layout(reduce.shape)):
        return None, "broadcast or reduce have non-default layouts"
    if not _supported(reduce):
        return None, "the reduction is not supported"
    operand = reduce.operands[0]
    if tuple(reduce.dimensions) != (operand.shape.rank - 1,):
        return None, "the reduction must reduce the last dimension only"
    if not _identity_ok(reduce.operands[1]):
        return None, "reduction identity is not a constant"
    if bcast.user_count != 1 or reduce.user_count != 1:
        return None, "more than one use of broadcast or reduce"
    if bcast.shape.rank - 1 in tuple(bcast.dimensions):
        return None, "broadcast is not along the reduction dimension"
    row = operand.shape.dims[-1]
    if 1 << max(row - 1, 0).bit_length() > MAX_TENSOR_ELEMENTS:
        return None, f"a row of {row} elements exceeds one Triton tensor"
    producer = operand
    while _trivially_fusible(producer):
        producer = _operand_for_processing(producer)
    if not _default_layout(producer.shape):
        return None, "producer has a non-default layout"
    if not _trivially_connected(producer, root.operands[0]):
        return None, "producer is not trivially connected"
    if producer is not root.operands[0] and root.operands[0].user_count != 1:
        return None, "unsupported root-producer connection"
    return producer, ""


def block_level_config(row: int) -> dict:
    """XLA's block_level_fusion_config for a normalisation: one row per block, the row
    (padded to a power of two) as the tile; warps as XLA's default for that tile."""
    tile = 1 << max(row - 1, 0).bit_length()
    warps = 1 if tile <= 512 else 2 if tile <= 1024 else 4 if tile <= 4096 else \
        8 if tile <= 16384 else 16 if tile <= 65536 else 32
    return {"num_warps": str(warps), "output_tiles": [{"sizes": ["1", str(row)]}],
            "num_ctas": 1, "num_stages": 1}


def _set_backend_config(fusion) -> None:
    shape = fusion.shape
    row = shape.dims[-1] if shape.is_array() and shape.rank else 1
    tile = block_level_config(row)
    tile["output_tiles"][0]["sizes"] = ["1"] * (shape.rank - 1) + [str(row)]
    fusion.attrs["backend_config"] = json.dumps(
        {"fusion_backend_config": {"kind": TRITON_FUSION_KIND,
                                   "block_level_fusion_config": tile}},
        separators=(",", ":"))


def _diamond_members(root, producer) -> list:
    """Everything between the producer and the root (XLA clones every operand up to the
    producer or a parameter), in post order."""
    return post_order_from(root, lambda x: x is not producer and x.opcode != "parameter")


def _fuse_diamond(comp, root, members):
    fusion = create_fusion(comp, root, "kCustom", name="triton_softmax", move=True)
    # the rest, consumers first: each absorbed value is then used only inside
    for inst in reversed(members[:-1]):
        if inst in fusion.operands:
            absorb(fusion, inst, move=True)
    _set_backend_config(fusion)
    rename_computation(comp.module, fusion.called[0], "triton_softmax_computation")
    return fusion


def _rows_of(inst):
    return tuple(inst.shape.dims) if inst.shape.is_array() else None


def _can_take_producer(fusion, p) -> bool:
    if p.user_count != 1 or p.parent.root is p or p.has_control_edges:
        return False
    if not p.shape.is_array() or not _default_layout(p.shape):
        return False
    if is_triton_norm_fusion(p):
        if _rows_of(p) != _rows_of(fusion) or analyze(p.fused_computation)[0] is None:
            return False
        # its reductions reach the fusion through that parameter: still one normalisation?
        param = fusion.fused_computation.parameters[fusion.operands.index(p)]
        return analyze(fusion.fused_computation, seeds=(param,))[0] is not None
    if p.opcode == "broadcast":
        return _supported(p)
    if is_elementwise(p.opcode) and _rows_of(p) == _rows_of(fusion):
        return _supported(p)
    return False


def _grow(fusion) -> bool:
    """Take producers and the consumer in while the fusion stays one normalisation."""
    changed = False
    progress = True
    while progress:
        progress = False
        for p in list(fusion.operands):
            if p in fusion.operands and _can_take_producer(fusion, p):
                absorb(fusion, p, move=True)
                progress = changed = True
        if fusion.user_count == 1:
            c = fusion.users[0]
            if is_elementwise(c.opcode) and _rows_of(c) == _rows_of(fusion) and \
                    _supported(c) and not c.has_control_edges and \
                    all(o is fusion or _rows_of(o) == _rows_of(c) or o.shape.rank == 0
                        for o in c.operands):
                absorb_consumer(fusion, c)
                _set_backend_config(fusion)
                progress = changed = True
    return changed


def _row_op(inst, rows: tuple) -> bool:
    """Can ``inst`` join a normalisation of ``rows`` (an R-shaped elementwise op, a
    reduction of the last dimension of an R-shaped operand, a per-row value, a vector
    along the row (a scale), a broadcast or a constant, or a ``__triton`` normalisation
    of the same rows)?  Elementwise ops
    of another shape with as many elements join through a bitcast to R (a reshaped gemm
    output): nothing computed from a reduction reaches them.  What depends on a
    reduction is checked by :func:`hlo_opt.codegen.row_norm.analyze_instructions`."""
    if inst.has_control_edges or not inst.shape.is_array() or \
            not _default_layout(inst.shape):
        return False
    dims = tuple(inst.shape.dims)
    if is_triton_norm_fusion(inst):
        return dims == rows
    op = inst.opcode
    if op in ("parameter", "fusion") or not _supported(inst):
        return False
    if op == "reduce":
        return tuple(inst.operands[0].shape.dims) == rows and dims == rows[:-1] and \
            tuple(inst.dimensions) == (len(rows) - 1,) and _identity_ok(inst.operands[1])
    if op == "constant":
        return inst.shape.rank == 0
    if is_elementwise(op):
        return dims in (rows, rows[-1:]) or is_per_row(dims, rows) or \
            (inst.shape.rank > 0 and math.prod(dims) == math.prod(rows))
    if op == "broadcast":
        return dims in (rows, rows[-1:]) or is_per_row(dims, rows)
    if op in ("bitcast", "reshape"):
        src = tuple(inst.operands[0].shape.dims)
        if dims == rows:
            return src != rows and math.prod(src) == math.prod(rows) and \
                inst.operands[0].shape.rank > 0 and _default_layout(inst.operands[0].shape)
        return is_per_row(dims, rows) and is_per_row(src, rows)
    return False


def _read_bytes(inst, rows: tuple) -> int:
    """What a kernel of ``rows`` reading ``inst`` loads, counting whole arrays of the
    rows' size only: a per-row value or a vector a broadcast spreads is a small
    fraction of a row's traffic."""
    while inst.opcode == "broadcast":
        inst = inst.operands[0]
    if not inst.shape.is_array() or math.prod(inst.shape.dims) < math.prod(rows):
        return 0
    return inst.shape.byte_size()


def _cone(sink, rows: tuple) -> list:
    """The producers of ``sink`` one normalisation kernel computes with it (post order,
    ``sink`` last).  A row op used only inside joins.  One with users elsewhere, all of
    them row ops (XLA's priority fusion duplicates a producer only into all its users
    at once), is computed again inside when that reads no more than loading it would:
    its operands the kernel does not read yet are at most its own size (in whole rows,
    see :func:`_read_bytes`).  So a layer norm's mean and variance, or a softmax's
    exponentials, are recomputed from its input by each kernel that needs them, while
    the sum of two gradients is read, not recomputed.  A producer all of whose users are
    members joins as it is, even where a member it feeds is one computed again (the sum
    of gemm outputs behind the bitcast every kernel of a layer norm's backward reads)."""
    comp = sink.parent
    cone = {sink: None}
    inputs = dict.fromkeys(sink.operands)   # what the members read from outside
    changed = True
    while changed:
        changed = False
        for p in list(inputs):
            if p in cone or p is comp.root or not _row_op(p, rows):
                continue
            if not all(u in cone for u in p.users):
                # XLA duplicates a producer only into all its users at once (constants
                # and broadcasts go into every consumer anyway)
                if p.opcode not in ("constant", "broadcast") and \
                        not all(_row_op(u, rows) for u in p.users):
                    continue
                extra = sum(_read_bytes(o, rows) for o in dict.fromkeys(p.operands)
                            if o not in cone and o not in inputs)
                if extra > _read_bytes(p, rows):
                    continue
            cone[p] = None
            del inputs[p]
            for o in p.operands:
                if o not in cone:
                    inputs[o] = None
            changed = True
    return post_order_from(sink, lambda x: x in cone)   # the members, operands first


def _cone_is_normalisation(sink, order) -> bool:
    """One row normalisation once fused: the triton members' results count as computed
    from a reduction, and each of them stays one with its operands from the cone
    treated so."""
    tritons = [m for m in order if is_triton_norm_fusion(m)]
    if not tritons:
        return False
    members = set(order)
    for t in tritons:
        seeds = tuple(t.fused_computation.parameters[i]
                      for i, o in enumerate(t.operands) if o in members)
        if seeds and analyze(t.fused_computation, seeds=seeds)[0] is None:
            return False
    rn, why = analyze_instructions(sink, order, seeds=tuple(tritons))
    return rn is not None or why == "no reduction"


def _fuse_cone(comp, order):
    sink = order[-1]
    if is_triton_norm_fusion(sink):
        fusion = sink
    else:
        fusion = create_fusion(comp, sink, "kCustom", name="triton_softmax", move=True)
        rename_computation(comp.module, fusion.called[0], "triton_softmax_computation")
    for inst in reversed(order[:-1]):
        if inst in fusion.operands:
            absorb(fusion, inst, move=True)
    _set_backend_config(fusion)
    return fusion


def _is_row_bitcast(inst, rows: tuple) -> bool:
    """A bitcast of an R-shaped value to another shape (a gemm's 2-D view of it)."""
    return inst.opcode == "bitcast" and tuple(inst.operands[0].shape.dims) == rows and \
        _default_layout(inst.operands[0].shape) and _default_layout(inst.shape)


def _rows_view(comp, inst, rows: tuple):
    """``inst`` (default layout, as many elements as the rows) seen as R."""
    if _is_row_bitcast(inst, rows):
        return inst.operands[0]
    if inst.opcode == "broadcast" and _is_scalar_constant(inst.operands[0]):
        return comp.add("broadcast", with_default_layout(inst.shape.with_dims(rows)),
                        [inst.operands[0]], name=inst.name, attrs={"dimensions": []})
    return comp.add("bitcast", with_default_layout(inst.shape.with_dims(rows)), [inst],
                    name="bitcast")


def _sink_row_bitcasts(comp, rows: tuple) -> None:
    """``op(bitcast(a), b)`` with ``a`` of the rows' shape R becomes
    ``bitcast(op(a, bitcast(b)))``: the elementwise op then reads the normalisation's
    rows and can join it (a layer norm's output times a gradient in a gemm's 2-D
    shape), as XLA's bitcast handling lets its tiling see through."""
    n = math.prod(rows)
    for inst in comp.post_order():
        if not is_elementwise(inst.opcode) or inst.has_control_edges or \
                not inst.shape.is_array() or inst.shape.rank == 0 or \
                tuple(inst.shape.dims) == rows or math.prod(inst.shape.dims) != n or \
                not _default_layout(inst.shape) or not _supported(inst):
            continue
        if not any(_is_row_bitcast(o, rows) and _row_op(o.operands[0], rows)
                   for o in inst.operands):
            continue
        # operands of the op's own shape only (a clamp may take scalar bounds); an op on a
        # gemm's result stays for the cuBLAS rewriter's epilogue (bias, scaling)
        if not all(tuple(o.shape.dims) == tuple(inst.shape.dims) and
                   _default_layout(o.shape) and o.opcode != "dot" for o in inst.operands):
            continue
        operands = [_rows_view(comp, o, rows) for o in inst.operands]
        new = comp.add(inst.opcode, with_default_layout(inst.shape.with_dims(rows)),
                       operands, name=inst.name, attrs=dict(inst.attrs))
        out = comp.add("bitcast", inst.shape, [new], name="bitcast")
        old_operands = list(dict.fromkeys(inst.operands))
        comp.replace_instruction(inst, out)
        remove_dead_operands(comp, old_operands)


def _merge_normalisations(comp, rows: tuple) -> bool:
    """Grow the ``__triton`` normalisations of ``rows`` in ``comp`` as XLA's priority
    fusion does: every value of those rows that something still reads becomes the root
    of one kernel with its cone (:func:`_cone`) when that holds a normalisation (users
    first, so a producer another kernel computes again is left to those still reading
    it)."""
    changed = False
    for inst in reversed(comp.post_order()):
        if inst.parent is not comp or tuple(inst.shape.dims if inst.shape.is_array()
                                            else ()) != rows:
            continue
        if not inst.user_count and comp.root is not inst:
            continue
        if not _row_op(inst, rows):
            continue
        order = _cone(inst, rows)
        if len(order) < 2 or not _cone_is_normalisation(inst, order):
            continue
        _fuse_cone(comp, order)
        changed = True
    return changed


class SoftmaxRewriterTriton:
    name = "triton-softmax-rewriter"

    def run(self, module) -> bool:
        if not module.config.device.is_at_least_ampere:
            return False
        changed = False
        for comp in fusible_computations(module):
            diamonds = []
            for inst in comp.post_order():
                producer, _ = match_diamond(inst)
                if producer is not None:
                    diamonds.append((inst, producer))
            fusions = []
            for root, producer in reversed(diamonds):
                if root.parent is not comp:
                    continue
                # XLA's CanSymbolicTileAnalysisTileDiamond: one row per block must work
                members = _diamond_members(root, producer)
                if analyze_instructions(root, members)[0] is None:
                    continue
                fusions.append(_fuse_diamond(comp, root, members))
                changed = True
            for f in fusions:
                if f.parent is comp:
                    _grow(f)
            for rows in sorted({tuple(f.shape.dims) for f in fusions if f.parent is comp}):
                _sink_row_bitcasts(comp, rows)
                _merge_normalisations(comp, rows)
        return changed


__all__ = ["SoftmaxRewriterTriton", "block_level_config", "match_diamond"]
