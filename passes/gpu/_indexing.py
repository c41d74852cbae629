"""XLA's FusionNodeIndexingEvaluation: how many times the fusion emitter would emit each
fused instruction (once per distinct index it is read at).  Shape-changing users other
than transposes compute new indices, so a producer read through several of them is
emitted several times; fusing it is refused when that exceeds
:data:`ALLOWED_CODE_DUPLICATION` (broadcasts are always allowed).  Kept incrementally as
producers are fused, as XLA does."""
from __future__ import annotations

ALLOWED_CODE_DUPLICATION = 15


def _same_shape_ignoring_type(a, b) -> bool:
    return a.dims == b.dims and a.effective_layout_or_none() == b.effective_layout_or_none()


class IndexingEvaluation:
    def __init__(self, fusion):
        self.fusion = fusion
        comp = fusion.called[0]
        users: dict = {comp.root: {fusion}}
        count: dict = {fusion: 1}
        self.users = users
        self.count = count
        outer = fusion.operands
        keys: dict = {}  # fused parameter -> the fusion operand it reads (as _key)
        empty = ()
        for inst in reversed(comp.post_order()):
            if inst.opcode == "parameter":
                continue
            # _update_count and _update_operands, inlined
            inst_users = users.get(inst, empty)
            count[inst] = sum([count.get(u, 0) for u in inst_users])
            shape = inst.shape
            same_index = inst.opcode == "transpose"
            for operand in inst.operands:
                if operand.opcode == "parameter" and operand.parent is comp:
                    key = keys.get(operand)
                    if key is None:
                        key = keys[operand] = outer[operand.parameter_number]
                else:
                    key = operand
                bucket = users.get(key)
                if bucket is None:
                    bucket = users[key] = set()
                if same_index or (operand.shape.is_array() and shape.is_array()
                                  and _same_shape_ignoring_type(operand.shape, shape)):
                    bucket.update(users.get(inst, empty))
                else:
                    bucket.add(inst)

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
            if inst.opcode == "transpose" or (operand.shape.is_array() and inst.shape.is_array()
                                              and _same_shape_ignoring_type(operand.shape,
                                                                            inst.shape)):
                bucket.update(self.users.get(inst, ()))
            else:
                bucket.add(inst)

    def emitted(self, producer) -> int:
        return sum(self.count.get(u, 0) for u in self.users.get(producer, ()))

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
