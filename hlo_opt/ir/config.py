"""What a module is compiled with (XLA's ``HloModuleConfig``): the debug options and the
target device.  Passes read ``module.config.debug_options`` / ``module.config.device``;
nothing reads options from a process-wide variable, so two modules optimized in one
process with different flags never see each other's options."""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

from ..analysis.device import DEFAULT_DEVICE, DeviceInfo
from ..flags import DebugOptions


@dataclass(frozen=True)
class HloModuleConfig:
    """``debug_options``: XLA's DebugOptions (defaults ignore ``XLA_FLAGS``, as XLA's
    ``DefaultDebugOptionsIgnoringFlags``; the CLI and :func:`hlo_opt.optimize` install the
    options they parsed).  ``device``: the GPU a cost decision is made for (an H100 SXM
    without ``--xla_gpu_target_config_filename``, as XLA assumes)."""

    debug_options: DebugOptions = field(default_factory=DebugOptions)
    device: DeviceInfo = DEFAULT_DEVICE
    # the autotuning session (hlo_opt.autotune.AutotuneSession: a backend's candidates and
    # the result caches) the algorithm pickers measure with; None: they change nothing
    autotune: object = field(default=None, compare=False)

    def replace(self, **changes) -> "HloModuleConfig":
        """A copy with ``changes`` (``debug_options=...``, ``device=...``)."""
        return dataclasses.replace(self, **changes)

    def copy(self) -> "HloModuleConfig":
        """An independent copy (a clone's options are its own, as XLA copies the config)."""
        return dataclasses.replace(self, debug_options=copy.copy(self.debug_options))
