"""``gemm-algorithm-picker`` and ``gpu-conv-algorithm-picker``: XLA's autotuners.

They time every cuBLAS / cuDNN algorithm on the GPU and write the winner (and, for
convolutions, its scratch size) into the custom-call's backend config.  Registered here
so the GPU pipelines name them; with ``--xla_gpu_autotune_level=0`` or without a GPU they
change nothing, as XLA does when autotuning is off.  hlo-opt has no GPU runtime yet, so
they change nothing in any case: the device backend fills them in.
"""
from __future__ import annotations



def _gpu_present() -> bool:
    return False  # no CUDA runtime in hlo-opt yet (the backend issue adds one)


class _AlgorithmPicker:
    name = ""

    def run(self, module) -> bool:
        if module.config.debug_options.xla_gpu_autotune_level == 0 or not _gpu_present():
            return False
        return False


class GemmAlgorithmPicker(_AlgorithmPicker):
    name = "gemm-algorithm-picker"


class GpuConvAlgorithmPicker(_AlgorithmPicker):
    name = "gpu-conv-algorithm-picker"
