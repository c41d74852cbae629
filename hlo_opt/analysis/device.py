"""The GPU a cost decision is made for (XLA's se::DeviceDescription, the fields the
fusion passes read).  Without a ``--xla_gpu_target_config_filename`` XLA assumes a Hopper
GPU; so does hlo-opt: the default is an H100 SXM (``gpu_specs/h100_sxm.txtpb``)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceInfo:
    name: str = "NVIDIA H100 80GB HBM3"
    compute_capability: tuple[int, int] = (9, 0)
    core_count: int = 132
    fpus_per_core: int = 128
    clock_rate_ghz: float = 1.755
    memory_bandwidth: float = 3.352e12  # bytes / second
    l2_cache_size: int = 50 * 1024 * 1024
    shared_memory_per_block: int = 48 * 1024
    shared_memory_per_block_optin: int = 227 * 1024
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
