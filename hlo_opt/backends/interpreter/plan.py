"""Compile a checked plan into one straight-line Python function.

After a plan's first run has checked every result against its instruction's shape, the
evaluator turns the plan into code like::

    def run(a0):
        v1 = a0[0]                 # get-tuple-element
        v4 = k4(v1, c3)            # kernel of %add, constant folded into c3
        del v1
        return (v4, c2)            # tuple

which drops the per-step closure call and list indexing of the loop path (that matters
for the small bodies of long while loops).  Kernels, handlers and folded constants are
bound by name in the function's globals; no text of the module reaches the generated
source.  A failure inside the function makes the evaluator re-run the plan step by step,
so errors still name the failing instruction.
"""
from __future__ import annotations

MAX_STEPS = 20_000  # beyond this, keep the loop path (compile time grows with size)


def compile_plan(plan, ctx=None):
    """The compiled function of ``plan`` (positional arguments = parameters), or None."""
    if len(plan.steps) > MAX_STEPS:
        return None
    ns: dict = {"__builtins__": {}}
    nparams = len(plan.param_slots)
    params = [f"a{n}" for n in range(nparams)]
    name: dict[int, str] = {}
    for n, slot in enumerate(plan.param_slots):
        if slot >= 0:
            name[slot] = f"a{n}"
    for slot, value in enumerate(plan.template):
        if value is not None:
            ns[f"c{slot}"] = value
            name[slot] = f"c{slot}"
    # last step that reads each computed slot, to free big intermediates early
    last_use: dict[int, int] = {}
    for pos, spec in enumerate(plan.specs):
        for j in _operands(spec):
            last_use[j] = pos
    computed = {slot for slot, _ in plan.steps}
    lines = [f"def run({', '.join(params)}):"]
    for pos, ((slot, _), spec) in enumerate(zip(plan.steps, plan.specs)):
        kind = spec[0]
        ops = ", ".join(name[j] for j in _operands(spec))
        if kind == "kernel":
            ns[f"k{slot}"] = spec[1]
            expr = f"k{slot}({ops})"
        elif kind == "handler":
            ns[f"h{slot}"], ns[f"i{slot}"] = spec[1], spec[2]
            ns["ctx"] = ctx
            expr = f"h{slot}(i{slot}, [{ops}], ctx)"
        elif kind == "tuple":
            expr = f"({ops},)" if spec[1] else "()"
        elif kind == "gte":
            expr = f"{name[spec[1]]}[{int(spec[2])}]"
        elif kind == "alias":
            expr = name[spec[1]]
        else:
            return None
        lines.append(f"    v{slot} = {expr}")
        name[slot] = f"v{slot}"
        dead = sorted(j for j in set(_operands(spec)) | {slot}
                      if j in computed and last_use.get(j, -1) <= pos and j != plan.root)
        if dead:
            lines.append("    del " + ", ".join(f"v{j}" for j in dead))
    lines.append(f"    return {name[plan.root]}")
    code = compile("\n".join(lines), f"<plan %{plan.comp.name}>", "exec")
    exec(code, ns)  # noqa: S102 - generated from slot numbers only
    return ns["run"]


def _operands(spec) -> tuple[int, ...]:
    kind = spec[0]
    if kind == "kernel":
        return spec[2]
    if kind == "handler":
        return spec[3]
    if kind == "tuple":
        return spec[1]
    return (spec[1],)  # gte, alias
