"""``while-loop-trip-count-annotator``: XLA's WhileLoopTripCountAnnotator.

For every while loop with an induction variable (XLA's GetLoopInductionVarTupleIdx) it
writes XLA's WhileLoopBackendConfig as JSON (int64 fields print as strings, fields in
proto order):

* ``known_induction_variable.tuple_index``: always, even when the trip count is unknown
  or does not fit int64;
* ``known_trip_count.n`` and ``known_init_step``: for a trivial loop range (a constant
  init >= 0 counting up by a constant step > 0 to a constant bound), n = (max - min) /
  step + 1;
* ``known_trip_count.n`` alone: when the count is known otherwise (other directions).

Other keys of an existing JSON backend config are kept.
"""
from __future__ import annotations

import json

from ._while_util import (_bound, _init_value, _linear_update, induction_var_index,
                          trip_count, while_body)

_INT64_MAX = (1 << 63) - 1


def _config_text(existing: str | None, fields: dict) -> str:
    config: dict = {}
    if existing:
        try:
            parsed = json.loads(existing)
            if isinstance(parsed, dict):
                config = parsed
        except ValueError:
            config = {}
    ordered = {}
    for key in ("known_trip_count", "known_init_step", "known_induction_variable"):
        config.pop(key, None)
        if key in fields:
            ordered[key] = fields[key]
    ordered.update(config)
    return json.dumps(ordered, separators=(",", ":"))


def _fields(w) -> dict | None:
    idx = induction_var_index(w)
    if idx is None:
        return None
    fields: dict = {}
    n = trip_count(w)
    init = _init_value(w, idx)
    step = _linear_update(while_body(w).root.operands[idx], while_body(w).parameters[0], idx)
    bound = _bound(w, idx)
    if n is not None and n >= 1 and init is not None and init >= 0 and step is not None \
            and step > 0 and bound is not None and bound[0] in ("LT", "LE"):
        if n <= _INT64_MAX:  # MatchTrivialLoopRange
            fields["known_trip_count"] = {"n": str(n)}
            fields["known_init_step"] = {"init": str(init), "step": str(step)}
    elif n is not None and n <= _INT64_MAX:
        fields["known_trip_count"] = {"n": str(n)}
    fields["known_induction_variable"] = {"tuple_index": str(idx)}
    return fields


class WhileLoopTripCountAnnotator:
    name = "while-loop-trip-count-annotator"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            for inst in comp.instructions:
                if inst.opcode != "while":
                    continue
                fields = _fields(inst)
                if fields is None:
                    continue
                text = _config_text(inst.attrs.get("backend_config"), fields)
                if inst.attrs.get("backend_config") == text:
                    continue
                inst.attrs["backend_config"] = text
                changed = True
        return changed
