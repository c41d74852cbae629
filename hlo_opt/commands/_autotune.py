"""The app side of autotuning: which provider a command line means, and the progress
bar.  Backends that can tune expose ``autotune_provider()`` (returning a provider, or
None when their device is absent) in the modules named in ``PROVIDER_MODULES``."""
from __future__ import annotations

import importlib

import click

from ..autotune import AutotuneSession
from ..autotune.candidates import device_cache_key

PROVIDER_MODULES = {
    "cuda": "hlo_opt.backends.cuda.autotune",
    "cuda-sim": "hlo_opt.backends.cuda_sim.autotune",
}
GPU_PLATFORMS = ("gpu", "cuda")


def _backend_provider(name: str, options=None):
    try:
        module = importlib.import_module(PROVIDER_MODULES[name])
    except ImportError:
        return None
    return module.autotune_provider(options)


def target_device(options):
    """The GPU compiled for: ``--xla_gpu_target_config_filename``, else Hopper."""
    try:
        from ..backends.cuda.target import target_device as from_options
    except ImportError:
        from ..analysis.device import DEFAULT_DEVICE
        return DEFAULT_DEVICE
    return from_options(options=options)


def make_provider(name: str, options=None):
    if name == "host":
        from ..autotune.host_provider import HostProvider
        return HostProvider()
    if name not in PROVIDER_MODULES:
        raise click.UsageError(f"unknown --autotune-provider={name} (known: host, "
                               f"{', '.join(PROVIDER_MODULES)})")
    provider = _backend_provider(name, options)
    if provider is None:
        from ..autotune import AutotuneError
        raise AutotuneError(f"--autotune-provider={name}: the {name} backend is not "
                            "available here (not built, or no device)")
    return provider


def session_for(options, platform: str, provider_name: str | None, progress=None):
    """``--autotune-provider`` wins; ``--platform=gpu|cuda`` uses the CUDA backend's
    provider when a device is there, else compiles deviceless (XLA: tuning must then be
    off or loaded from a file); other platforms do not autotune."""
    if provider_name:
        return AutotuneSession.from_options(options, make_provider(provider_name, options),
                                            progress=progress)
    if platform not in GPU_PLATFORMS:
        return None
    provider = _backend_provider("cuda", options)
    if provider is not None:
        return AutotuneSession.from_options(options, provider, progress=progress)
    d = target_device(options)
    key = device_cache_key(d.compute_capability, d.core_count, d.clock_rate_ghz,
                           d.memory_bandwidth, d.l2_cache_size)
    return AutotuneSession.from_options(options, None, deviceless=True, device_key=key,
                                        progress=progress)


def autotune_progress(pass_progress):
    """A task on the passes' rich bar (``pass_progress.rich_progress``), shown while
    tuning: instructions tuned / total and candidates per second.  None without a bar."""
    progress = getattr(pass_progress, "rich_progress", None)
    if progress is None:
        return None
    from rich.progress import TaskID  # noqa: F401 (rich is the app layer's)
    task = progress.add_task("autotuning", total=None, visible=False)

    def update(event):
        rate = event.candidates / event.elapsed_s if event.elapsed_s > 0 else 0.0
        what = (f"compiling the candidates of {event.compiling} instruction(s)"
                if event.compiling else
                f"%{event.instruction} ({rate:.1f} candidates/s)")
        progress.update(task, total=max(event.total, event.done), completed=event.done,
                        visible=event.done < event.total, description=f"autotuning {what}")
    return update
