"""The GPU a cost decision is made for (XLA's se::DeviceDescription, the fields the
fusion passes read).  Without a ``--xla_gpu_target_config_filename`` XLA assumes a Hopper
GPU; so does hlo-opt: the default is an H100 SXM (``gpu_specs/h100_sxm.txtpb``, XLA's file).
``SPECS_DIR`` holds the gpu_specs files hlo-opt carries."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SPECS_DIR = Path(__file__).resolve().parent / "gpu_specs"


@dataclass(frozen=True)
class DeviceInfo:
    """The defaults are XLA's H100 SXM description (``gpu_specs/h100_sxm.txtpb``, which
    ``hlo_opt.backends.cuda.target.read_specs`` reads to the same values)."""
    name: str = "NVIDIA H100 80GB HBM3"
    compute_capability: tuple[int, int] = (9, 0)
    core_count: int = 132
    fpus_per_core: int = 128
    clock_rate_ghz: float = 1.98
    memory_bandwidth: float = 3352320000000.0  # bytes / second
    l2_cache_size: int = 52428800
    shared_memory_per_block: int = 48 * 1024
    shared_memory_per_block_optin: int = 232448
    threads_per_warp: int = 32

    @property
    def is_at_least_hopper(self) -> bool:
        return self.compute_capability >= (9, 0)

    @property
    def is_at_least_ampere(self) -> bool:
        return self.compute_capability >= (8, 0)


H100 = DeviceInfo()
A100 = DeviceInfo(name="NVIDIA A100-SXM4-40GB", compute_capability=(8, 0), core_count=108,
                  fpus_per_core=64, clock_rate_ghz=1.41, memory_bandwidth=1.555e12,
                  l2_cache_size=40 * 1024 * 1024, shared_memory_per_block_optin=163 * 1024)
DEFAULT_DEVICE = H100
