"""XLA's FusionNodeIndexingEvaluation: how many times the fusion emitter would emit each
fused instruction (once per distinct index it is read at).  Shape-changing users other
than transposes compute new indices, so a producer read through several of them is
emitted several times; fusing it is refused when that exceeds
:data:`ALLOWED_CODE_DUPLICATION` (broadcasts are always allowed).  Kept incrementally as
producers are fused, as XLA does: :meth:`IndexingEvaluation.absorbed` after a producer
was inlined gives the same maps as evaluating the grown fusion from scratch."""
from __future__ import annotations

ALLOWED_CODE_DUPLICATION = 15

_NON_ARRAY = frozenset({"tuple", "token", "opaque"})

# (id(a), id(b)) -> (a, b, same index): shapes are immutable and shared, and the same few
# pairs are compared over and over; the entry holds the shapes, so their ids stay theirs.
_SAME_INDEX: dict = {}


def _same_shape_ignoring_type(a, b) -> bool:
    return a.dims == b.dims and a.effective_layout_or_none() == b.effective_layout_or_none()


def _same_index(a, b) -> bool:
    """An operand of shape ``a`` read by a user of shape ``b`` at the user's own index:
    both arrays with the same dims and layout (element types aside)."""
    if a is b:
        return a.element_type not in _NON_ARRAY
    key = (id(a), id(b))
    entry = _SAME_INDEX.get(key)
    if entry is not None and entry[0] is a and entry[1] is b:
        return entry[2]
    same = a.element_type not in _NON_ARRAY and b.element_type not in _NON_ARRAY and \
        _same_shape_ignoring_type(a, b)
    if len(_SAME_INDEX) >= 65536:
        _SAME_INDEX.clear()
    _SAME_INDEX[key] = (a, b, same)
    return same


class IndexingEvaluation:
    def __init__(self, fusion):
        self.fusion = fusion
        # set when an operand of the fusion was replaced after this evaluation was made:
        # its maps still name the old operand (callers may go on asking it, as XLA's
        # cache does), but it must not be grown by absorbed() any more
        self.stale = False
        comp = fusion.called[0]
        users: dict = {comp.root: {fusion}}
        count: dict = {fusion: 1}
        self.users = users
        self.count = count
        self._add(reversed(comp.post_order()), comp)

    def _add(self, insts, comp) -> None:
        """Evaluate ``insts`` (users before operands; their users evaluated already):
        their emission counts and their operands' indexing users."""
        users = self.users
        count = self.count
        outer = self.fusion.operands
        empty = ()
        same_index = _same_index
        for inst in insts:
            if inst.opcode == "parameter":
                continue
            # _update_count and _update_operands, inlined
            inst_users = users.get(inst, empty)
            n = 0
            for u in inst_users:
                n += count.get(u, 0)
            count[inst] = n
            shape = inst.shape
            transpose = inst.opcode == "transpose"
            for operand in inst.operands:
                if operand.opcode == "parameter" and operand.parent is comp:
                    key = outer[int(operand.payload)]
                else:
                    key = operand
                bucket = users.get(key)
                if bucket is None:
                    bucket = users[key] = set()
                if transpose or same_index(operand.shape, shape):
                    bucket.update(inst_users)
                else:
                    bucket.add(inst)

    def absorbed(self, producer, value, clones) -> None:
        """``producer`` (a non-multi-output operand of the fusion) was inlined by
        ``absorb``: ``clones`` are the new fused instructions in their post order and
        ``value`` (one of them) replaced the producer's parameter.  Nothing above
        ``value`` changes, so only the clones are evaluated (XLA's
        RemoveFusionOperand + UpdateEvaluationCache)."""
        comp = self.fusion.called[0]
        readers = self.users.pop(producer, None)
        if comp.root is value:  # the producer's parameter was the fused root
            if readers is None:
                readers = set()
            readers.add(self.fusion)
        if readers is not None:
            self.users[value] = readers
        self._add(reversed(clones), comp)

    def _key(self, operand):
        if operand.opcode == "parameter" and operand.parent is self.fusion.called[0]:
            return self.fusion.operands[operand.parameter_number]
        return operand

    def _update_count(self, inst) -> None:
        self.count[inst] = sum(self.count.get(u, 0) for u in self.users.get(inst, ()))

    def _update_operands(self, inst) -> None:
        for operand in inst.operands:
            key = self._key(operand)
            bucket = self.users.setdefault(key, set())
            if inst.opcode == "transpose" or _same_index(operand.shape, inst.shape):
                bucket.update(self.users.get(inst, ()))
            else:
                bucket.add(inst)

    def emitted(self, producer) -> int:
        count = self.count
        n = 0
        for u in self.users.get(producer, ()):
            n += count.get(u, 0)
        return n

    def code_duplication_too_high(self, producer) -> bool:
        if producer.opcode == "broadcast":
            return False
        return self.emitted(producer) > ALLOWED_CODE_DUPLICATION

    def remove_fusion_operand(self, producer) -> set:
        return self.users.pop(producer, set())

    def update(self, new_producer, users: set) -> None:
        self.users[new_producer] = users
        self._update_count(new_producer)
        self._update_operands(new_producer)
