"""A fusion's launch configuration in its ``backend_config`` (``launch_config``: an
hlo-opt field, XLA has no launch knob for non-Triton fusions) and the candidate names the
autotuner gives configurations (``launch:block=256,...``)."""
from __future__ import annotations

import json
from dataclasses import fields

from .emitters import LaunchConfig


def config_name(cfg) -> str:
    """``launch:block=256,max_blocks_per_sm=16,...`` (fusion-launch-autotuner writes the
    fields back as the fusion's ``launch_config``); a gemm fusion's tile:
    ``triton:block_m=32,block_n=32,block_k=32,num_warps=4`` (gemm-algorithm-picker writes
    it back as ``triton_gemm_config``)."""
    prefix = "launch:" if isinstance(cfg, LaunchConfig) else "triton:"
    return prefix + ",".join(f"{f.name}={getattr(cfg, f.name)}" for f in fields(cfg))


def launch_config_of(inst) -> LaunchConfig | None:
    """The configuration the autotuner wrote into a fusion's backend config, if any."""
    raw = inst.attrs.get("backend_config", "") if inst is not None else ""
    if "launch_config" not in raw:
        return None
    try:
        cfg = json.loads(raw).get("launch_config")
    except ValueError:
        return None
    if not isinstance(cfg, dict):
        return None
    defaults = LaunchConfig()
    known = {f.name for f in fields(LaunchConfig)}
    return LaunchConfig(**{k: _value(getattr(defaults, k), v) for k, v in cfg.items()
                           if k in known})


def _value(default, text):
    """``text`` as the type of the field's default (bools: true/false/1/0)."""
    if isinstance(default, bool):
        return str(text).strip().lower() in ("1", "true")
    return type(default)(text)
