"""``while-loop-trip-count-annotator``: XLA's WhileLoopTripCountAnnotator.

Writes ``backend_config={"known_trip_count":{"n":"N"}}`` on every while loop whose trip
count the analysis can prove (a counted loop: constant init, constant step, compared
against a constant bound), in XLA's JSON form of WhileLoopBackendConfig (int64 fields
print as strings).  Other keys of an existing JSON backend config are kept.
"""
from __future__ import annotations

import json

from ._while_util import trip_count


def _config_text(existing: str | None, n: int) -> str:
    config: dict = {}
    if existing:
        try:
            parsed = json.loads(existing)
            if isinstance(parsed, dict):
                config = parsed
        except ValueError:
            config = {}
    config["known_trip_count"] = {"n": str(n)}
    ordered = {"known_trip_count": config.pop("known_trip_count")}
    ordered.update(config)
    return json.dumps(ordered, separators=(",", ":"))


class WhileLoopTripCountAnnotator:
    name = "while-loop-trip-count-annotator"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            for inst in comp.instructions:
                if inst.opcode != "while":
                    continue
                n = trip_count(inst)
                if n is None:
                    continue
                text = _config_text(inst.attrs.get("backend_config"), n)
                if inst.attrs.get("backend_config") == text:
                    continue
                inst.attrs["backend_config"] = text
                changed = True
        return changed
