"""The ``gpu`` platform (alias ``cuda``) of ``hlo-opt --platform=gpu --stage=...``.

Stages run on the module after the ``gpu`` pipeline, deviceless: the target is the
``--xla_gpu_target_config_filename`` gpu_specs file, else Hopper (sm_90).  ``cuda`` is the
kernel source (XLA has LLVM IR there; the name is ours), ``ptx`` what NVRTC makes of it.
"""
from __future__ import annotations

from ...platforms import Platform, register


def _hlo(module, options):
    return module.to_text()


def _html(module, options):
    from ...dump.html import module_to_html
    return module_to_html(module, module.name)


def _program(module, options):
    from .program import build_program
    from .target import target_device
    return build_program(module, target_device(module, options))


def _hlo_backend(module, options):
    prog = _program(module, options)
    lines = [module.to_text(), "", "// " + prog.mplan.to_text().replace("\n", "\n// ")]
    kinds: dict = {}
    for t in prog.entry.thunks:
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    lines.append("// thunks: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    for k in prog.kernels:
        lines.append(f"// kernel {k.name} ({k.kind}) for %{k.step_name}: grid {k.grid} "
                     f"block {k.block}")
    from .libraries import describe
    for t in prog.entry.thunks:
        if t.kind == "library":
            lines.append(f"// library %{t.name}: {describe(t.spec)}")
    for t in prog.entry.thunks:
        if t.kind == "launch" and t.spec is not None:
            lines.append(f"// cudnn: %{t.name}: {t.spec.summary()} (on a device with "
                         f"cuDNN; else the kernel)")
    for name, why in prog.host_fallbacks:
        lines.append(f"// host: %{name}: {why}")
    return "\n".join(lines) + "\n"


def _buffer_assignment(module, options):
    from ...codegen import make_plan
    return make_plan(module).assignment.to_text() + "\n"


def _cuda(module, options):
    return _program(module, options).source


def _ptx(module, options):
    from . import deviceless
    return deviceless(module, options)[1].ptx


PLATFORM = register(Platform("gpu", "the CUDA backend (NVRTC kernels, XLA:GPU's pipeline)",
                             default_pipeline="gpu"))
PLATFORM.add_stage("hlo", "HLO after the gpu pipeline", _hlo)
PLATFORM.add_stage("html", "HLO after the gpu pipeline as an HTML graph", _html)
PLATFORM.add_stage("hlo-backend", "HLO as compiled, with the kernel plan and thunks",
                   _hlo_backend)
PLATFORM.add_stage("buffer-assignment", "the buffer assignment", _buffer_assignment)
PLATFORM.add_stage("cuda", "the CUDA C++ kernel source (one translation unit)", _cuda)
PLATFORM.add_stage("ptx", "PTX from NVRTC for the target's sm_XX", _ptx)
