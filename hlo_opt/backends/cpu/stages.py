"""The ``cpu`` platform of ``hlo-opt --platform=cpu --stage=...`` (XLA's hlo-opt stages)."""
from __future__ import annotations

from ...platforms import Platform, register


def _hlo(module, options):
    return module.to_text()


def _html(module, options):
    from ...dump.html import module_to_html
    return module_to_html(module, module.name)


def _hlo_backend(module, options):
    """The module as the backend compiles it, with the plan the kernel layer made (kinds,
    reasons, buffer slices) and what runs natively vs as a host library call."""
    from . import build
    mplan, art, _ = build(module, options)
    lines = [module.to_text(), "", "// " + mplan.to_text().replace("\n", "\n// ")]
    host = art.meta.get("host_reasons", {})
    lines.append(f"// native steps: {len(art.meta.get('native', {}))}; host library calls: "
                 f"{len(host)}")
    for name, why in host.items():
        lines.append(f"// host library call %{name}: {why}")
    # library calls done natively and kernels split over threads (plain kernels are many)
    for name, what in art.meta.get("native", {}).items():
        if not what.startswith("kernel ") or "parallel" in what:
            lines.append(f"// native %{name}: {what}")
    return "\n".join(lines) + "\n"


def _buffer_assignment(module, options):
    from ...codegen import make_plan
    return make_plan(module).assignment.to_text() + "\n"


def _llvm_before(module, options):
    from . import build
    return build(module, options)[1].ir_no_opt


def _llvm(module, options):
    from . import build
    return build(module, options)[1].ir_with_opt


def _asm(module, options):
    from . import build
    return build(module, options, want_asm=True)[1].asm


PLATFORM = register(Platform("cpu", "the llvmlite CPU backend (XLA:CPU's pipeline)",
                             default_pipeline="cpu"))
PLATFORM.add_stage("hlo", "HLO after the cpu pipeline", _hlo)
PLATFORM.add_stage("html", "HLO after the cpu pipeline as an HTML graph", _html)
PLATFORM.add_stage("hlo-backend", "HLO as compiled, with the kernel plan", _hlo_backend)
PLATFORM.add_stage("buffer-assignment", "the buffer assignment", _buffer_assignment)
PLATFORM.add_stage("llvm-before-optimizations", "LLVM IR before optimization",
                   _llvm_before)
PLATFORM.add_stage("llvm", "LLVM IR after optimization", _llvm)
PLATFORM.add_stage("asm", "host assembly", _asm)
