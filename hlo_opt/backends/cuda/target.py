"""The GPU kernels are generated and compiled for.

As XLA's deviceless compile: a real device when one is present (the CUDA backend probes
it), else the file named by ``--xla_gpu_target_config_filename`` (XLA's gpu_specs text
format: ``gpu_device_info { core_count: 132 ... cuda_compute_capability { major: 9 } }``),
else Hopper (an H100 SXM, ``sm_90``).
"""
from __future__ import annotations

import re

from ...analysis.device import DEFAULT_DEVICE, DeviceInfo
from ...errors import HloError

_TOKEN = re.compile(r'\s*(?:(#[^\n]*)|([A-Za-z_][A-Za-z0-9_]*)\s*:\s*("(?:[^"\\]|\\.)*"|[^\s{}]+)'
                    r'|([A-Za-z_][A-Za-z0-9_]*)\s*\{|(\}))')


class TargetConfigError(HloError):
    """A gpu_specs file that cannot be read."""


def parse_text_proto(text: str, filename: str = "<gpu_specs>") -> dict:
    """A small reader of protobuf text format: nested dicts, repeated fields as lists."""
    root: dict = {}
    stack = [root]
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            line = text.count("\n", 0, pos) + 1
            col = pos - (text.rfind("\n", 0, pos) + 1) + 1
            src = text.splitlines()[line - 1] if text.splitlines() else ""
            raise TargetConfigError(f"{filename}:{line}:{col}: error: cannot read the "
                                    f"gpu_specs text here\n{src}\n{' ' * (col - 1)}^")
        pos = m.end()
        if m.group(1):
            continue
        if m.group(2):
            v = m.group(3)
            val = v[1:-1] if v.startswith('"') else _number(v)
            _put(stack[-1], m.group(2), val)
        elif m.group(4):
            d: dict = {}
            _put(stack[-1], m.group(4), d)
            stack.append(d)
        else:
            if len(stack) == 1:
                raise TargetConfigError(f"{filename}: error: unbalanced '}}'")
            stack.pop()
    if len(stack) != 1:
        raise TargetConfigError(f"{filename}: error: missing '}}' at the end")
    return root


def _number(v: str):
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def _put(d, k, v):
    if k in d:
        if not isinstance(d[k], list):
            d[k] = [d[k]]
        d[k].append(v)
    else:
        d[k] = v


def device_from_specs(text: str, filename: str = "<gpu_specs>") -> DeviceInfo:
    p = parse_text_proto(text, filename)
    info = p.get("gpu_device_info")
    if not isinstance(info, dict):
        raise TargetConfigError(f"{filename}: error: no gpu_device_info block")
    cc = info.get("cuda_compute_capability")
    if not isinstance(cc, dict):
        raise TargetConfigError(f"{filename}: error: not a CUDA target (no "
                                "cuda_compute_capability)")
    d = DEFAULT_DEVICE
    return DeviceInfo(
        name=p.get("device_description_str", d.name),
        compute_capability=(int(cc.get("major", 0)), int(cc.get("minor", 0))),
        core_count=int(info.get("core_count", d.core_count)),
        fpus_per_core=int(info.get("fpus_per_core", d.fpus_per_core)),
        clock_rate_ghz=float(info.get("clock_rate_ghz", d.clock_rate_ghz)),
        memory_bandwidth=float(info.get("memory_bandwidth", d.memory_bandwidth)),
        l2_cache_size=int(info.get("l2_cache_size", d.l2_cache_size)),
        shared_memory_per_block=int(info.get("shared_memory_per_block",
                                             d.shared_memory_per_block)),
        shared_memory_per_block_optin=int(info.get("shared_memory_per_block_optin",
                                                   d.shared_memory_per_block_optin)),
        threads_per_warp=int(info.get("threads_per_warp", 32)),
    )


def read_specs(path: str) -> DeviceInfo:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TargetConfigError(f"{path}: error: cannot read the GPU target config "
                                f"({e.strerror})") from None
    return device_from_specs(text, path)


def specs_path(module, options=None) -> str:
    opts = options
    if opts is None:
        config = getattr(module, "config", None)
        opts = getattr(config, "debug_options", None)
    return getattr(opts, "xla_gpu_target_config_filename", "") or ""


def target_device(module=None, options=None) -> DeviceInfo:
    """The deviceless target: the gpu_specs file if named, else Hopper."""
    path = specs_path(module, options) if (module is not None or options is not None) else ""
    return read_specs(path) if path else DEFAULT_DEVICE


def arch_of(device: DeviceInfo) -> str:
    major, minor = device.compute_capability
    return f"sm_{major}{minor}"
