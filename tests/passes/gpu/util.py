"""Helpers for the GPU pass tests: run passes with given flags, look at the result."""
from __future__ import annotations

from hlo_opt.api import parse_hlo
from hlo_opt.flags import DebugOptions
from hlo_opt.pipeline import PipelineRunner
from tests.support.pipelines import pipeline

from tests.support.harness import check_pass



def options(**flags) -> DebugOptions:
    return DebugOptions(**flags)


def run(text_or_module, passes, **flags):
    """Parse (if text) and run ``passes`` (comma list / list / Pipeline) on a copy;
    returns the module.  Verifies after every changing pass and checks no-change claims."""
    module = parse_hlo(text_or_module) if isinstance(text_or_module, str) else \
        text_or_module.clone()
    pipe = pipeline("transforms_pipeline", passes)
    PipelineRunner(DebugOptions(**flags), verify_no_change=True).run(pipe, module)
    return module


def check(text_or_module, passes, seeds=(0, 1), rtol=1e-4, atol=1e-5, **flags):
    """The differential harness (interpreter before == after, verifier, canonical text)
    with ``flags`` in force."""
    module = parse_hlo(text_or_module) if isinstance(text_or_module, str) else text_or_module
    return check_pass(module, passes, seeds=seeds, rtol=rtol, atol=atol,
                      options=DebugOptions(**flags))


def entry_ops(module) -> list[str]:
    return [i.opcode for i in module.entry.post_order()]


def fusions(module, comp=None) -> list:
    comp = comp or module.entry
    return [i for i in comp.post_order() if i.opcode == "fusion"]


def fused_ops(fusion) -> list[str]:
    return sorted(i.opcode for i in fusion.called[0].instructions if i.opcode != "parameter")


def kinds(module) -> list[str]:
    return sorted(f.attrs.get("kind") for f in fusions(module))
