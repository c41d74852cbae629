"""Checks beyond shapes: what passes and backends rely on that shape inference does not
cover.  Each returns a message (the module is rejected) or None.

* library custom calls (cuBLAS gemms, cuDNN convolutions) have the operand counts and
  result forms XLA's rewriters produce;
* ``replica_groups`` parse and, where the header gives ``replica_count`` or
  ``num_partitions``, name only devices the module has;
* ``backend_config`` JSON nests at most ``MAX_CONFIG_DEPTH`` levels (JSON parsers recurse).
"""
from __future__ import annotations

import json
import re

from .ir.attributes import AttrSyntaxError, parse_string
from .ir.replica_groups import ReplicaGroupsError, parse_replica_groups

MAX_CONFIG_DEPTH = 100  # protobuf's JSON parser stops at 100 as well

# target -> (fewest, most operands); the result is (value, scratch...) or the value.
GEMM_TARGETS = {"__cublas$gemm": (2, 3), "__cublas$lt$matmul": (2, 4),
                "__cublas$lt$matmul$f8": (2, 8)}
# (input, kernel) and, as XLA's own tests write them, an optional bias and side input
CONV_TARGETS = {"__cudnn$convForward": (2, 4), "__cudnn$convBackwardInput": (2, 4),
                "__cudnn$convBackwardFilter": (2, 4),
                "__cudnn$convBiasActivationForward": (3, 4)}
_IOTA_GROUPS_RE = re.compile(r"\s*\[\s*(\d{1,18})\s*,\s*(\d{1,18})\s*\]\s*<=")
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET_RE = re.compile(r"[\[\]{}]")


def library_call_problem(inst) -> str | None:
    target = inst.attrs.get("custom_call_target", "").strip().strip('"')
    limits = GEMM_TARGETS.get(target) or CONV_TARGETS.get(target)
    if limits is None:
        return None
    low, high = limits
    if target in GEMM_TARGETS and _json_config(inst) is None:  # every gemm pass reads it
        return f"backend_config of custom-call {target} is not a JSON object"
    n = len(inst.operands)
    if not low <= n <= high:
        want = str(low) if low == high else f"{low} to {high}"
        return f"custom-call {target} takes {want} operands, has {n}"
    for i, op in enumerate(inst.operands):
        if not op.shape.is_array():
            return f"operand {i} of custom-call {target} must be an array"
    shape = inst.shape
    value = shape.tuple_shapes[0] if shape.is_tuple() and shape.tuple_shapes else shape
    if not value.is_array():
        return f"custom-call {target} must return an array (or a tuple starting with one)"
    if target in CONV_TARGETS:
        if not shape.is_tuple() or len(shape.tuple_shapes) < 2:
            return f"custom-call {target} must return (result, scratch)"
        ranks = {op.shape.rank for op in inst.operands[:2]} | {value.rank}
        if len(ranks) != 1 or value.rank < 2:
            return f"custom-call {target}: input, kernel and result need one rank >= 2"
    elif min(op.shape.rank for op in inst.operands[:2]) < 1:
        return f"custom-call {target}: operands must have rank >= 1"
    return None


def _json_config(inst):
    """The backend_config as a dict ({} when absent), None when it is not a JSON object."""
    raw = inst.attrs.get("backend_config", "").strip()
    try:
        if raw.startswith('"'):
            raw = parse_string(raw)
        config = json.loads(raw) if raw else {}
    except (ValueError, AttrSyntaxError, RecursionError):
        return None
    return config if isinstance(config, dict) else None


def replica_groups_problem(inst) -> str | None:
    raw = inst.attrs.get("replica_groups")
    if raw is None:
        return None
    devices = _device_count(inst)
    m = _IOTA_GROUPS_RE.match(raw)
    if devices is None:  # the module does not say: any ids may be valid
        try:
            parse_replica_groups(raw)
        except (ReplicaGroupsError, ValueError) as e:
            return str(e)[:200]
        return None
    if m is not None and int(m.group(1)) * int(m.group(2)) > devices:
        return (f"replica_groups={raw.strip()[:60]} names {int(m.group(1)) * int(m.group(2))}"
                f" devices, the module has {devices}")
    try:
        groups = parse_replica_groups(raw)
    except (ReplicaGroupsError, ValueError) as e:
        return str(e)[:200]
    for g in groups:
        for i in g:
            if not 0 <= i < devices:
                return (f"replica_groups name device {i}; the module has {devices} "
                        "(replica_count x num_partitions)")
    return None


def _device_count(inst) -> int | None:
    """replica_count x num_partitions when the module's header gives either, else None."""
    module = inst.parent.module if inst.parent is not None else None
    attrs = module.header_attrs if module is not None else {}
    if "replica_count" not in attrs and "num_partitions" not in attrs:
        return None
    count = 1
    for name in ("replica_count", "num_partitions"):
        raw = (attrs.get(name) or "1").strip()
        count *= int(raw) if raw.isdigit() and len(raw) <= 9 else 1
    return count


def backend_config_problem(inst) -> str | None:
    raw = inst.attrs.get("backend_config")
    if not raw or raw.count("{") + raw.count("[") <= MAX_CONFIG_DEPTH:
        return None
    depth = 0
    for b in _BRACKET_RE.findall(_STRING_RE.sub("", raw)):
        depth += 1 if b in "[{" else -1
        if depth > MAX_CONFIG_DEPTH:
            return f"backend_config nests more than {MAX_CONFIG_DEPTH} levels"
    return None


def instruction_problems(inst) -> list[str]:
    found = []
    if inst.opcode == "custom-call":
        found.append(library_call_problem(inst))
    if "replica_groups" in inst.attrs:
        found.append(replica_groups_problem(inst))
    if "backend_config" in inst.attrs:
        found.append(backend_config_problem(inst))
    return [f for f in found if f]
