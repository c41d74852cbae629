"""The DebugOptions a GPU pass reads (XLA passes read ``module->config().debug_options()``).

Passes receive only the module, so the options come from, in order: a ``debug_options``
attribute on the module (set it to run one module with other flags), the options
installed with :func:`set_current_options` / :func:`using_options` (the runner's, when
the caller installs them), else defaults plus ``XLA_FLAGS`` from the environment.
"""
from __future__ import annotations

import contextlib

from hlo_opt.flags import DebugOptions

from hlo_opt.analysis.device import DEFAULT_DEVICE, DeviceInfo

_current: DebugOptions | None = None


def set_current_options(options: DebugOptions | None) -> None:
    global _current
    _current = options


@contextlib.contextmanager
def using_options(options: DebugOptions):
    global _current
    saved = _current
    _current = options
    try:
        yield options
    finally:
        _current = saved


def current_options() -> DebugOptions:
    global _current
    if _current is None:
        _current = DebugOptions.from_sources()
    return _current


def options_for(module) -> DebugOptions:
    opts = getattr(module, "debug_options", None)
    return opts if isinstance(opts, DebugOptions) else current_options()


def device_for(module) -> DeviceInfo:
    """The target GPU (``--xla_gpu_target_config_filename`` is not read yet: Hopper, as
    XLA assumes without one)."""
    return getattr(module, "device_info", None) or DEFAULT_DEVICE
