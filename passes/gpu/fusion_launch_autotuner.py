"""``fusion-launch-autotuner``: launch configurations of fusion kernels, autotuned.

hlo-opt's own pass (XLA picks launch dimensions by heuristics and tunes only Triton
fusions): for every fusion in a non-fusion computation that the installed autotuning
session's provider can tune (the ``cuda`` / ``cuda-sim`` backends: threads per block,
grid cap, threads per reduced row), measure the variants under
``--xla_gpu_autotune_level`` with the same checks and caches as the algorithm pickers, and
write the winner into the fusion's ``backend_config`` as ``launch_config``, which the
CUDA backend reads when it emits the kernel.  Level 0 or no session: no change.  When
every variant fails, the fusion keeps the backend's default (a warning is recorded).
"""
from __future__ import annotations



from hlo_opt.autotune import session_for
from hlo_opt.autotune.tuner import NoUsableCandidate

from ._computations import nonfusion_computations
from ._gemm_common import read_config, write_config

LAUNCH_PREFIX = "launch:"


class FusionLaunchAutotuner:
    name = "fusion-launch-autotuner"

    def run(self, module) -> bool:
        session = session_for(module)
        if session is None or not session.config.enabled or \
                module.config.debug_options.xla_gpu_autotune_level == 0:
            return False
        fusions = [i for comp in nonfusion_computations(module) for i in comp.instructions
                   if i.opcode == "fusion" and session.kind_of(i) == "fusion"]
        if not fusions:
            return False
        session.begin(fusions)
        changed = False
        for inst in fusions:
            try:
                result = session.autotune(inst)
            except NoUsableCandidate as e:
                session.warn(f"No launch configuration of %{inst.name} passed: {e}")
                continue
            name = result.key.get("name", "") if result.key is not None else ""
            if result.key is None or result.key.kind != "other" or \
                    not name.startswith(LAUNCH_PREFIX):
                continue
            cfg = {k: v for k, v in (item.split("=") for item in
                                     name[len(LAUNCH_PREFIX):].split(",") if item)}
            config = read_config(inst)
            if config.get("launch_config") == cfg:
                continue
            config["launch_config"] = cfg
            write_config(inst, config)
            changed = True
        return changed



