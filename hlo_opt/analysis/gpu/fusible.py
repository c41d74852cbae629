"""What may fuse with what on the GPU: XLA's gpu_fusible.cc and the generic rules of
instruction_fusion.cc / HloInstruction (IsFusible, IsExpensive, OperandElementUse).

Decision functions return ``None`` when fusion is allowed and a reason string when it
is not (XLA's FusionDecision).
"""
from __future__ import annotations

from collections import deque
from functools import lru_cache

from hlo_opt.analysis.layout import (normalized_transpose, reshape_bitcast_layout,
                                     reshape_is_bitcast, transpose_is_bitcast)
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.opcodes import NEVER_EXPENSIVE
from hlo_opt.ir.types import is_complex, is_integral

from hlo_opt.analysis.gpu.reduction import (is_reduction_from_or_to_contiguous_dimensions,
                                            reduction_dimensions, reduction_is_race_free)

MAX_OPERANDS_AND_OUTPUTS_PER_FUSION = 96
MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION = 8
MIN_DIMENSION_TO_TRANSPOSE_TILED = 16
MIN_DIMENSION_TO_TRANSPOSE_TILED2 = 8
MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED = 64 * 128


# ---- generic HloInstruction properties ---------------------------------------------------

def is_fusible(inst: Instruction) -> bool:
    """HloInstruction::IsFusible."""
    op = inst.opcode
    if op in ("domain", "parameter", "while", "conditional", "call"):
        return False
    if op in ("fusion", "map", "reduce", "reduce-window"):
        return True
    if op == "rng":
        return inst.user_count <= 1
    if inst.control_predecessors:
        return False
    return not inst.has_side_effect()


def is_elementwise(inst: Instruction) -> bool:
    """:meth:`Instruction.is_elementwise <hlo_opt.ir.instruction.Instruction.is_elementwise>`
    as the GPU fusion analyses ask it: maps aside (a map, or a fusion with one in its
    body, is not taken as an elementwise op by the GPU fusion rules here)."""
    op = inst.opcode
    if op == "map":
        return False
    if op == "fusion":
        return inst.is_elementwise() and not any(
            i.opcode == "map" for i in inst.called[0].iter_instructions())
    return inst.is_elementwise()


def is_fusion_kind(inst: Instruction, kind: str) -> bool:
    return inst.opcode == "fusion" and inst.fusion_kind == kind


def is_loop_fusion(inst: Instruction) -> bool:
    return is_fusion_kind(inst, "kLoop")


def fused_instructions(inst: Instruction):
    return [i for i in inst.called[0].iter_instructions() if i.opcode != "parameter"]


_CHEAP = NEVER_EXPENSIVE


def _is_constant_effective_scalar(inst: Instruction) -> bool:
    return inst.opcode == "constant" and inst.shape.is_array() and inst.shape.num_elements() == 1


def is_expensive(inst: Instruction) -> bool:
    """InstructionFusion::IsExpensive."""
    op = inst.opcode
    if op in _CHEAP:
        return False
    if op in ("abs", "cosine", "sign", "sine"):
        return is_complex(inst.shape.element_type)
    if op in ("divide", "remainder"):
        if not is_integral(inst.shape.element_type):
            return True
        d = inst.operands[1]
        return not (_is_constant_effective_scalar(d) or (
            d.opcode == "broadcast" and _is_constant_effective_scalar(d.operands[0])))
    return True


def gpu_is_expensive(inst: Instruction) -> bool:
    """GpuInstructionFusion::IsExpensive: f32/f16 divide, sqrt, rsqrt, exp are cheap."""
    if inst.opcode in ("divide", "sqrt", "rsqrt", "exponential") and \
            inst.shape.element_type in ("f32", "f16"):
        return False
    return is_expensive(inst)


def is_always_duplicable(inst: Instruction) -> bool:
    """Widening converts and broadcasts get cheaper when duplicated into consumers."""
    if inst.opcode == "broadcast":
        return True
    return inst.opcode == "convert" and \
        inst.operands[0].shape.byte_size() < inst.shape.byte_size()


# ---- operand element use (ReusesOperandElements) --------------------------------------------

NO_USE, USE, PERMUTE, REUSE = "nouse", "use", "permute", "reuse"


def _operand_element_use(inst: Instruction, i: int) -> str:
    op = inst.opcode
    if op in ("bitcast", "concatenate", "reshape", "reverse", "slice", "transpose"):
        return PERMUTE
    if op == "pad":
        return REUSE if i > 0 else PERMUTE
    if op == "reduce":
        return REUSE if i >= len(inst.operands) // 2 else PERMUTE
    if op == "fusion":
        return _fusion_param_use(inst, i)
    if op == "dot":
        if inst.shape.rank <= 1:
            other = inst.operands[1 - i] if i < 2 else None
            if other is not None and other.shape.rank <= 1:
                return USE
        return REUSE
    if op == "dynamic-update-slice":
        return USE if i in (0, 1) else REUSE
    if op == "gather":
        return USE if i == 0 else PERMUTE
    return USE if is_elementwise(inst) else REUSE


def _join(a: str, b: str) -> str:
    if a == NO_USE:
        return b
    if b == NO_USE or a == b:
        return a
    return REUSE


def _compose(outer: str, inner: str) -> str:
    if REUSE in (outer, inner):
        return REUSE
    if outer == USE:
        return inner
    if inner == USE:
        return outer
    return PERMUTE


def _fusion_param_use(fusion: Instruction, i: int) -> str:
    """FusionReusesParamElements: how the fused computation uses parameter ``i``."""
    comp = fusion.called[0]
    target = comp.parameters[i]
    cache: dict[Instruction, str] = {}
    for inst in comp.post_order():
        if inst is target:
            cache[inst] = USE
            continue
        value = NO_USE
        for k, o in enumerate(inst.operands):
            inner = cache.get(o, NO_USE)
            if inner == NO_USE:
                continue
            value = _join(value, _compose(_operand_element_use(inst, k), inner))
        cache[inst] = value
    return cache.get(comp.root, NO_USE)


def reuses_operand_elements(inst: Instruction, i: int) -> bool:
    return _operand_element_use(inst, i) == REUSE


def effectively_at_most_unary(inst: Instruction) -> bool:
    out_rank = max((_true_rank(s) for s in inst.shape.leaves() if s.is_array()), default=0)
    count = 0
    for o in inst.operands:
        if o.opcode in ("broadcast", "iota"):
            continue
        if _is_constant_effective_scalar(o):
            continue
        if _true_rank(o.shape) >= out_rank:
            count += 1
    return count <= 1


def _true_rank(shape) -> int:
    return sum(1 for d in shape.dims if d != 1) if shape.is_array() else 0


# ---- transposes and heroes ----------------------------------------------------------------

def tiled_transpose(inst: Instruction):
    """GetDescriptionForTiledTransposeEmitter for an unfused copy / transpose: the
    normalized (a, b, c) sizes of a physical [0, 2, 1] transpose big enough for the tiled
    transpose emitter, else None."""
    if inst.opcode == "reshape" and inst.shape.is_array():
        return _reshape_tiled_transpose(inst.operands[0].shape, inst.shape)
    if inst.opcode not in ("copy", "transpose") or not inst.shape.is_array():
        return None
    perm = tuple(inst.dimensions) if inst.opcode == "transpose" else \
        tuple(range(inst.shape.rank))
    return _tiled_transpose(inst.operands[0].shape, inst.shape, perm)


def reshape_copy_layout(inst):
    """For a reshape that is no bitcast, the layout of its operand's dimensions that
    would make it one: the reshape moves its bytes as a copy of the operand into that
    layout (XLA's layout normalization rewrites it so: a transpose and a bitcast).  None
    for other instructions, bitcast reshapes, and reshapes no layout makes bitcasts."""
    if inst.opcode != "reshape" or not inst.shape.is_array():
        return None
    return _reshape_copy_layout(inst.operands[0].shape, inst.shape)


@lru_cache(maxsize=4096)
def _reshape_copy_layout(src, shape):
    if reshape_is_bitcast(src, shape):
        return None
    return reshape_bitcast_layout(shape, src)


def _reshape_tiled_transpose(src, shape):
    layout = _reshape_copy_layout(src, shape)
    if layout is None:
        return None
    return _tiled_transpose(src, src.with_layout(layout), tuple(range(src.rank)))


@lru_cache(maxsize=4096)
def _tiled_transpose(src, shape, perm: tuple):
    """A function of the shapes (layouts included) and the permutation: cached."""
    norm = normalized_transpose(src, shape, list(perm))
    if norm is None:
        return None
    sizes, p = norm
    if p == [1, 0]:
        sizes, p = [1] + sizes, [0, 2, 1]
    if p != [0, 2, 1]:
        return None
    b, c = sizes[1], sizes[2]
    if (b >= MIN_DIMENSION_TO_TRANSPOSE_TILED and c >= MIN_DIMENSION_TO_TRANSPOSE_TILED) or (
            b >= MIN_DIMENSION_TO_TRANSPOSE_TILED2 and c >= MIN_DIMENSION_TO_TRANSPOSE_TILED2
            and b * c >= MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED):
        return tuple(sizes)
    return None


def is_physically_transposing(inst: Instruction) -> bool:
    if inst.opcode == "fusion":
        return any(is_physically_transposing(i) for i in fused_instructions(inst))
    if inst.opcode == "copy":
        return True
    if inst.opcode == "reshape":
        return reshape_copy_layout(inst) is not None
    return inst.opcode == "transpose" and not transpose_is_bitcast(
        inst.operands[0].shape, inst.shape, inst.dimensions)


def is_intermediate(inst: Instruction, allowed_operand_count: int = 1) -> bool:
    n = len(inst.operands)
    if n == 0 or n > allowed_operand_count:
        return False
    if inst.opcode != "fusion" and is_elementwise(inst):
        if inst.opcode == "copy":
            return inst.shape == inst.operands[0].shape
        return True
    if inst.opcode == "bitcast":
        return True
    if inst.opcode == "reshape":
        return reshape_is_bitcast(inst.operands[0].shape, inst.shape)
    if inst.opcode == "transpose":
        return transpose_is_bitcast(inst.operands[0].shape, inst.shape, inst.dimensions)
    return False


def find_non_trivial_hero(inst: Instruction, fused: bool = True) -> Instruction:
    """Walk from a fusion root through intermediate (elementwise unary, bitcast-like) ops
    to the reduction or tiled transpose that decides the emitter; else the root.  An
    unfused instruction (``fused=False``) is its own fusion: the walk stays inside."""
    hero = inst
    while fused and is_intermediate(hero) and (hero is inst or hero.user_count <= 1):
        hero = hero.operands[0]
    if is_reduction_from_or_to_contiguous_dimensions(hero) or tiled_transpose(hero):
        return hero
    return inst


# XLA's concatenate emitter takes a concatenate of at most this many operands (more
# operands: more code per thread, lower occupancy; the loop emitter takes those)
MAX_CONCATENATE_EMITTER_OPERANDS = 4


def concatenate_hero(root: Instruction) -> Instruction | None:
    """The concatenate XLA's FindNonTrivialHero finds for a fused ``root``, else None:
    from the end of the chain of one-operand intermediate ops above ``root``, the one
    concatenate reached through intermediate ops of up to three operands (two such: none),
    provided nothing but intermediate ops, tuples and parameters lies above its users."""
    hero = root
    while is_intermediate(hero):
        hero = hero.operands[0]
    found = None
    seen = {hero}
    queue = deque([hero])
    while queue:
        node = queue.popleft()
        if node.opcode == "concatenate":
            if found is not None:
                return None  # several candidates: no hero
            found = node
            continue
        if not is_intermediate(node, 3):
            continue
        for o in node.operands:
            if o not in seen:
                seen.add(o)
                queue.append(o)
    if found is None:
        return None
    seen = set()
    queue = deque(found.users)
    while queue:
        node = queue.popleft()
        if node in seen:
            continue
        seen.add(node)
        if node.opcode not in ("tuple", "parameter") and not is_intermediate(node, 3):
            return None
        queue.extend(node.users)
    return found


def uses_concatenate_emitter(fusion: Instruction) -> bool:
    """XLA's UseConcatenateFusion: one (non-tuple) root whose hero is a concatenate of at
    most four operands (HloFusionAnalysis then says kConcatenate, and priority fusion's
    ChooseKind makes such a fusion kInput)."""
    root = fusion.called[0].root
    if root.shape.is_tuple():
        return False
    hero = concatenate_hero(root)
    return hero is not None and len(hero.operands) <= MAX_CONCATENATE_EMITTER_OPERANDS


def has_real_reduction_hero(inst: Instruction) -> bool:
    """IsRealReductionHero(root, FindNonTrivialHero(root)) for an unfused instruction."""
    hero = find_non_trivial_hero(inst)
    if not is_reduction_from_or_to_contiguous_dimensions(hero):
        return False
    return hero is inst or reduction_is_race_free(reduction_dimensions(hero))


def is_reduce_input_fusion(inst: Instruction) -> bool:
    return inst.opcode == "fusion" and any(has_real_reduction_hero(r)
                                           for r in inst.fusion_outputs())


def is_input_fusible_reduction(inst: Instruction) -> bool:
    if inst.opcode == "fusion":
        return is_reduce_input_fusion(inst)
    return is_reduction_from_or_to_contiguous_dimensions(inst)


def find_any_tiled_transpose(inst: Instruction):
    if inst.opcode == "fusion":
        for r in inst.fusion_outputs():
            hero = find_non_trivial_hero(r)
            t = tiled_transpose(hero)
            if t:
                return t
        return None
    return tiled_transpose(inst)


def is_input_fusible_transpose(inst: Instruction) -> bool:
    return find_any_tiled_transpose(inst) is not None


def is_input_fusible_scatter(inst: Instruction) -> bool:
    return inst.opcode == "scatter" or (is_fusion_kind(inst, "kInput")
                                        and inst.called[0].root.opcode == "scatter")


# Only these can be an input-fusible reduction, scatter or transpose.
_INPUT_FUSIBLE_OPCODES = frozenset({"reduce", "scatter", "copy", "transpose", "reshape",
                                    "fusion"})


def is_input_fusible(inst: Instruction) -> bool:
    if inst.opcode not in _INPUT_FUSIBLE_OPCODES:
        return False
    return is_fusible(inst) and (is_input_fusible_reduction(inst) or
                                 is_input_fusible_scatter(inst) or
                                 is_input_fusible_transpose(inst))


def is_universally_loop_fusible(inst: Instruction) -> bool:
    op = inst.opcode
    if op == "copy":
        return tiled_transpose(inst) is None
    if is_elementwise(inst) and op != "fusion" and inst.operands:
        return True
    if op == "fusion":
        return is_loop_fusion(inst)
    return op in ("bitcast", "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice",
                  "gather", "pad", "reduce-window", "reshape", "reverse", "slice", "transpose")


def is_loop_fusible_as_consumer(inst: Instruction) -> bool:
    if not is_fusible(inst):
        return False
    if inst.opcode == "bitcast":
        return False
    if inst.opcode == "reduce":
        return True
    if not is_input_fusible(inst) and is_fusion_kind(inst, "kInput"):
        return True
    return is_universally_loop_fusible(inst)


def is_loop_fusible_as_producer(inst: Instruction) -> bool:
    if not is_fusible(inst):
        return False
    if inst.opcode in ("iota", "constant"):
        return True
    if inst.opcode == "reduce":
        return not inst.shape.is_tuple()
    return is_universally_loop_fusible(inst)


def _all_satisfy(inst: Instruction, pred) -> bool:
    if inst.opcode != "fusion":
        return pred(inst)
    return all(pred(i) for i in fused_instructions(inst))


def _is_reduce_epilogue_intermediate(inst: Instruction) -> bool:
    """XLA's IsIntermediate(hlo, 1) (newer than its IsReduceIntermediate): any unary
    elementwise op or bitcast-like op, whatever its number of users."""
    return is_intermediate(inst, 1)


# ---- in-place operations -------------------------------------------------------------------

def in_place_operands(inst: Instruction) -> list[int]:
    """Operand numbers updated in place (HloDataflowAnalysis::GetInPlaceInputOutputPairs)."""
    op = inst.opcode
    if op == "dynamic-update-slice":
        return [0]
    if op == "scatter":
        return list(range(len(inst.operands) // 2))
    if op == "fusion":
        out = []
        for r in inst.fusion_outputs():
            x = r
            while x.opcode == "bitcast":
                x = x.operands[0]
            if x.opcode in ("dynamic-update-slice", "scatter"):
                y = x.operands[0]
                while y.opcode == "bitcast":
                    y = y.operands[0]
                if y.opcode == "parameter":
                    out.append(y.parameter_number)
        return out
    return []


def should_fuse_in_place_op(producer: Instruction, consumer: Instruction) -> str | None:
    """InstructionFusion::ShouldFuseInPlaceOp, conservatively: the slice / dynamic-slice
    with matching indices special case is not recognised (no fusion then)."""
    for n in in_place_operands(consumer):
        buffer = consumer.operands[n]
        for i, o in enumerate(consumer.operands):
            if i != n and o is buffer:
                return ("the consumer is an in-place operation that has an additional "
                        "operand that has the same value as the in-place buffer")
        if not is_elementwise(producer) and buffer in producer.operands:
            return "unrecognized inplace update non-elementwise output pair"
    return None


def can_emit_input_fused_scatter(producer: Instruction, consumer: Instruction) -> str | None:
    if is_input_fusible_scatter(producer):
        return "do not fuse into the output of scatter"
    if not is_input_fusible_scatter(consumer):
        return None
    if consumer.opcode == "fusion":
        scatter = consumer.called[0].root
        base = scatter.operands[0]
        if base.opcode != "parameter":
            return "scatter fusion without a parameter as its in-place operand"
        inplace = consumer.operands[base.parameter_number]
    else:
        inplace = consumer.operands[0]
    if inplace is producer:
        return "do not fuse into the in-place operand of scatter"
    if inplace in producer.operands:
        return "Producer uses the in-place operand of a scatter"
    return None


# ---- producer / consumer -------------------------------------------------------------------

def producer_consumer_fusible(producer: Instruction, consumer: Instruction,
                              reduction_epilogue_fusion: bool = True,
                              info=None) -> str | None:
    """IsProducerConsumerFusible (``info``, a
    :class:`~hlo_opt.analysis.gpu.fusion_facts.FusionFacts`, memoizes per-instruction
    facts)."""
    def ask(key, inst, fn):
        return fn(inst) if info is None else info.memo(key, inst, fn)
    if not ask("loop_producer", producer, is_loop_fusible_as_producer) and not (
            find_any_tiled_transpose(producer) and find_non_trivial_hero(consumer, False)
            is producer):
        return "the producer is not loop-fusible"
    if (is_input_fusible_reduction(producer) if info is None
            else info.input_fusible_reduction(producer)):
        if not reduction_epilogue_fusion:
            return "Reduction epilogue fusion is not enabled."
        hero = producer
        if producer.opcode == "fusion":
            hero = find_non_trivial_hero(producer.called[0].root)
        if hero.opcode == "reduce" and not reduction_is_race_free(reduction_dimensions(hero)):
            return "Reduction output fusion only works for race free reductions"
        if not _all_satisfy(consumer, _is_reduce_epilogue_intermediate):
            return "Reductions from/to continuous dims epilogue not fusible"
        if producer.user_count > 1:
            return "reduction output fusion only works for single user"
    reason = can_emit_input_fused_scatter(producer, consumer)
    if reason:
        return reason
    if not (is_input_fusible(consumer) if info is None else info.input_fusible(consumer)) and \
            not ask("loop_consumer", consumer, is_loop_fusible_as_consumer):
        return "the consumer is not input-fusible and not loop-fusible"
    if producer.is_multi_output_fusion:
        return "the producer is not fusible as it is a multi-output fusion"
    if producer.opcode == "constant" and (
            not (producer.shape.is_array() and producer.shape.num_elements() == 1)
            or consumer.opcode != "fusion"):
        return "not fusing constant"
    return should_fuse_in_place_op(producer, consumer)


def producer_multi_output_fusible(producer: Instruction) -> str | None:
    if producer.is_multi_output_fusion:
        return "Producer is a multi-output fusion"
    if in_place_operands(producer):
        return "In-place operations are present"
    if not is_loop_fusible_as_producer(producer):
        return "producer is not loop-fusible"
    if is_physically_transposing(producer):
        return "producer is physically transposing"
    return None


def is_fusible_as_mof_root(inst: Instruction) -> bool:
    if not is_fusible(inst):
        return False
    if is_loop_fusion(inst):
        return True  # asked first, before the walks to the heroes
    return (is_input_fusible_reduction(inst) or is_input_fusible_transpose(inst)
            or (inst.opcode != "fusion" and is_elementwise(inst)))


def choose_fusion_kind(producer: Instruction, consumer: Instruction) -> str:
    return "kInput" if is_input_fusible(consumer) or is_input_fusible(producer) else "kLoop"


# ---- per-instruction budget counts (the budget rules: fusion_facts.py) ----------------------

def shared_memory(inst: Instruction) -> int:
    op = inst.opcode
    if op == "reduce":
        if is_reduction_from_or_to_contiguous_dimensions(inst):
            rd = reduction_dimensions(inst)
            size = inst.operands[0].shape.byte_size() // max(
                inst.operands[0].shape.num_elements(), 1)
            variadic = len(inst.shape.tuple_shapes) if inst.shape.is_tuple() else 1
            return (32 if rd.is_row_reduction else 2 * 32 * 33) * max(size, 1) * variadic
        return 0
    if op == "copy" or op == "transpose":
        if tiled_transpose(inst):
            size = inst.shape.byte_size() // max(inst.shape.num_elements(), 1)
            return 32 * 33 * max(size, 1)
        return 0
    if op == "fusion":
        total = 0
        for i in inst.called[0].iter_instructions():
            if i.opcode in _SHARED_MEMORY_OPCODES:  # nothing else uses shared memory
                total += shared_memory(i)
        return total
    return 0


_SHARED_MEMORY_OPCODES = frozenset({"reduce", "copy", "transpose", "fusion"})


def unnested_reductions(inst: Instruction) -> int:
    op = inst.opcode
    if op == "reduce":
        return 1 if is_reduction_from_or_to_contiguous_dimensions(inst) else 0
    if op == "fusion":
        total = 0
        for i in inst.called[0].iter_instructions():
            o = i.opcode
            if o == "reduce" or o == "fusion":
                total += unnested_reductions(i)
        return total
    return 0


def subshape_count(shape) -> int:
    if shape.is_tuple():
        return 1 + sum(subshape_count(s) for s in shape.tuple_shapes)
    return 1


# ---- heavy computations -------------------------------------------------------------------

def _window_dims(inst):
    w = inst.attr("window")
    return w.dims if w is not None else []


def if_fused_reads_elements_multiple_times(inst: Instruction) -> bool:
    if inst.opcode in ("gather", "broadcast"):
        return inst.shape.num_elements() > inst.operands[0].shape.num_elements()
    if inst.opcode == "reduce-window":
        return any(d.size > d.stride for d in _window_dims(inst))
    return False


def is_expensive_to_repeat(inst: Instruction) -> bool:
    if inst.opcode == "reduce" and not is_reduction_from_or_to_contiguous_dimensions(inst):
        ratio = inst.operands[0].shape.num_elements() // max(
            sum(s.num_elements() for s in inst.shape.leaves() if s.is_array())
            if inst.shape.is_tuple() else inst.shape.num_elements(), 1)
        if ratio > 10:
            return True
    if inst.opcode == "reduce-window":
        ratio = 1
        for d in _window_dims(inst):
            ratio *= d.size
        if ratio > 10:
            return True
    return False


def creates_heavy_computation(producer: Instruction, consumer: Instruction) -> bool:
    if producer.opcode == "fusion":
        heavy = any(is_expensive_to_repeat(i) for i in fused_instructions(producer))
    else:
        heavy = is_expensive_to_repeat(producer)
    if not heavy:
        return False
    if consumer.opcode != "fusion":
        return if_fused_reads_elements_multiple_times(consumer)
    comp = consumer.called[0]
    for i, o in enumerate(consumer.operands):
        if o is not producer:
            continue
        stack = [comp.parameters[i]]
        seen = set()
        while stack:
            cur = stack.pop()
            if cur in seen:
                continue
            seen.add(cur)
            if if_fused_reads_elements_multiple_times(cur):
                return True
            stack.extend(cur.users)
    return False


# ---- multi-output ---------------------------------------------------------------------------

def real_hero_for_mof(inst: Instruction) -> Instruction:
    """GetRealHeroForMultiOutputFusion."""
    if inst.opcode != "fusion":
        return inst
    root = inst.called[0].root
    if root.opcode != "tuple":
        if has_real_reduction_hero(root) or tiled_transpose(find_non_trivial_hero(root)):
            return find_non_trivial_hero(root)
        return root
    for o in root.operands:
        if has_real_reduction_hero(o) or tiled_transpose(find_non_trivial_hero(o)):
            return find_non_trivial_hero(o)
    return root.operands[0]


def _same_ignoring_type(a, b) -> bool:
    return a.dims == b.dims and a.effective_layout_or_none() == b.effective_layout_or_none()


def _intermediate_path_to_root(param: Instruction) -> bool:
    """XLA's check_path_of_intermediate_ops: from ``param`` to the root through single-user
    intermediate ops only."""
    if param.user_count != 1:
        return False
    inst = param.users[0]
    while inst.user_count:
        if not is_intermediate(inst):
            return False
        inst = inst.users[0]
    return True


def _transpose_stays_tiled(tiled: Instruction, other: Instruction) -> bool:
    """When the fusion ``other`` reads the fusion ``tiled`` (whose hero is a tiled
    transpose), merging keeps the transpose tiled only if ``other`` passes the value on
    to its root through intermediate ops."""
    if tiled.opcode != "fusion" or other.opcode != "fusion" or tiled not in other.operands:
        return True
    param = other.called[0].parameters[other.operands.index(tiled)]
    return _intermediate_path_to_root(param)


def heroes_compatible(h1: Instruction, h2: Instruction, i1: Instruction | None = None,
                      i2: Instruction | None = None) -> str | None:
    """XLA's FusionHeroesAreCompatible for the heroes h1, h2 of the instructions i1, i2
    (fusions or plain ops; the tiled-transpose check needs them)."""
    r1 = is_reduction_from_or_to_contiguous_dimensions(h1)
    r2 = is_reduction_from_or_to_contiguous_dimensions(h2)
    t1 = tiled_transpose(h1)
    t2 = tiled_transpose(h2)
    if r1 and r2:
        if not (_same_ignoring_type(h1.shape, h2.shape) if not h1.shape.is_tuple() else
                h1.shape.same_dims_and_type(h2.shape)) or \
                not _same_ignoring_type(h1.operands[0].shape, h2.operands[0].shape) or \
                h1.dimensions != h2.dimensions:
            return "tiled reductions with different shapes"
    elif t1 and t2:
        if t1 != t2:
            return "tiled transposes with different shapes"
    elif (t1 and r2) or (r1 and t2):
        return "MOF-fusion of a transpose and a reduction"
    if (t1 or t2) and (h1.parent is not None and h2.parent is not None
                       and h1.parent is not h2.parent):
        if i1 is None or i2 is None:
            return "tiled transpose would become untiled"
        if (t1 and not _transpose_stays_tiled(i1, i2)) or \
                (t2 and not _transpose_stays_tiled(i2, i1)):
            return "tiled transpose would become untiled"
        # Two fusions, one with a tiled transpose hero, the other's hero not one: XLA
        # finds transposes behind multi-operand elementwise ops (and more permutations)
        # that this hero search does not, so the pair stays apart.
        if not (t1 and t2) and i1.opcode == "fusion" and i2.opcode == "fusion":
            return "tiled transpose would become untiled"
    return None


def shapes_compatible_for_mof(a: Instruction, b: Instruction, heroes=None) -> str | None:
    """ShapesCompatibleForMultiOutputFusion: one loop over the same (bitcast-equal) shape.
    ``heroes``: (real_hero_for_mof(a), real_hero_for_mof(b)), when the caller knows them."""
    h1, h2 = heroes if heroes is not None else (real_hero_for_mof(a), real_hero_for_mof(b))
    reason = heroes_compatible(h1, h2, a, b)
    if reason:
        return reason

    def loop_shape(h):
        if is_reduction_from_or_to_contiguous_dimensions(h) or tiled_transpose(h):
            return h.operands[0].shape
        return h.shape

    l1, l2 = loop_shape(h1), loop_shape(h2)
    if l1.is_tuple() or l2.is_tuple():
        return None if l1.same_dims_and_type(l2) else "different loop shapes"
    if _same_ignoring_type(l1, l2):
        return None
    if l1.num_elements() == l2.num_elements() and reshape_is_bitcast(l1, l2):
        return None
    return "different loop shapes"


def is_consumer_the_only_non_root_user(inst: Instruction, consumer: Instruction) -> bool:
    for user in inst.users:
        if user.opcode == "get-tuple-element":
            if not is_consumer_the_only_non_root_user(user, consumer):
                return False
            continue
        if user is not consumer and not user.is_root:
            return False
    return True
