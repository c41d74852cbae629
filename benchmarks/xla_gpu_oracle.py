"""XLA:GPU's own optimized module for an HLO text, without a GPU: the oracle the `gpu`
pipeline is compared with.

JAX's CUDA plugin offers a compile-only client for a described device (no GPU, no driver);
its output is what XLA:GPU would run on that device (no autotuning: gemms keep XLA's
deviceless defaults).  The device is XLA's gpu_specs text proto, H100 SXM by default
(``hlo_opt/analysis/gpu_specs/h100_sxm.txtpb``).  Run it with a Python that has JAX with
the CUDA plugin, never the project venv:

    python3 -m venv .venv-xla
    .venv-xla/bin/pip install '.[bench-xla-gpu]'   # jax, jaxlib, jax-cuda13-plugin/-pjrt 0.10.2
    .venv-xla/bin/python benchmarks/xla_gpu_oracle.py module.hlo [-o out.hlo]
        [--xla_gpu_enable_triton_gemm=false] [--target-config specs.txtpb] [--cc 8.0]
    cat module.hlo | .venv-xla/bin/python benchmarks/xla_gpu_oracle.py -

Every ``--xla_*`` argument is handed to XLA as a debug-option override (``XLA_FLAGS`` is
ignored).  ``--cc 8.0`` rewrites the compute capability of the specs (the other fields stay
those of the file).  As a library (same interpreter): ``compile_hlo(text, flags) -> str``.
This file imports nothing of hlo_opt.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

SPECS = Path(__file__).resolve().parent.parent / "hlo_opt" / "analysis" / "gpu_specs" / "h100_sxm.txtpb"

os.environ["JAX_PLATFORMS"] = "cpu"  # jax must never open a CUDA client
os.environ.pop("XLA_FLAGS", None)

_CLIENTS: dict = {}


def target_config(path: str | Path = SPECS, cc: str | None = None) -> str:
    """The specs text, without lines jaxlib 0.10.2 rejects; ``cc`` ("8.0") overrides the
    compute capability."""
    text = Path(path).read_text()
    text = "\n".join(ln for ln in text.splitlines()
                     if "collective_memory_granularity" not in ln) + "\n"
    if cc:
        major, _, minor = cc.partition(".")
        block = (f"cuda_compute_capability {{\n    major: {int(major)}\n"
                 f"    minor: {int(minor or 0)}\n  }}")
        text, n = re.subn(r"cuda_compute_capability\s*\{[^}]*\}", block, text)
        if not n:
            raise SystemExit(f"{path}: no cuda_compute_capability block to override")
        text = re.sub(r'platform_version: "Compute Capability [^"]*"',
                      f'platform_version: "Compute Capability {int(major)}.{int(minor or 0)}"',
                      text)
    return text


def _client(config: str):
    if config not in _CLIENTS:
        from jax._src import xla_bridge
        topo = xla_bridge.make_pjrt_topology("cuda", "", topology="1x1x1", target_config=config)
        devs = topo._make_compile_only_devices()
        _CLIENTS[config] = devs
    return _CLIENTS[config]


def _flag_value(v: str):
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


def parse_flags(args: list[str]) -> dict:
    """``--xla_foo=bar`` / ``--xla_foo`` (true) -> {"xla_foo": value}."""
    out = {}
    for a in args:
        if not a.startswith("--xla_"):
            raise SystemExit(f"not an XLA flag: {a}")
        name, eq, val = a[2:].partition("=")
        out[name] = _flag_value(val) if eq else True
    return out


def compile_hlo(text: str, flags: dict | None = None, config: str | None = None) -> str:
    """HLO text -> XLA:GPU's optimized module text (the first module of the executable)."""
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax
    from jaxlib import _hlo
    from jax._src.lib.mlir import ir

    devs = _client(config or target_config())
    hmod = _hlo.hlo_module_from_text(text)
    comp = _hlo.XlaComputation(hmod.as_serialized_hlo_module_proto())
    mlir_text = _jax.mlir.xla_computation_to_mlir_module(comp)
    with mlir.make_ir_context():
        module = ir.Module.parse(mlir_text)
        opts = _jax.CompileOptions()
        opts.env_option_overrides = list((flags or {}).items())
        exe = devs[0].client.compile(module, executable_devices=_jax.DeviceList(tuple(devs)),
                                     compile_options=opts)
    return exe.hlo_modules()[0].to_string()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    xla = [a for a in argv if a.startswith("--xla_")]
    rest = [a for a in argv if not a.startswith("--xla_")]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", nargs="?", default="-", help="HLO text file, '-' for stdin")
    ap.add_argument("-o", "--output", default="-", help="where to write (default stdout)")
    ap.add_argument("--target-config", default=str(SPECS), help="gpu_specs text proto")
    ap.add_argument("--cc", default=None, help="override the compute capability, e.g. 8.0")
    a = ap.parse_args(rest)
    text = sys.stdin.read() if a.input == "-" else Path(a.input).read_text()
    out = compile_hlo(text, parse_flags(xla), target_config(a.target_config, a.cc))
    if a.output == "-":
        sys.stdout.write(out)
    else:
        Path(a.output).write_text(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
