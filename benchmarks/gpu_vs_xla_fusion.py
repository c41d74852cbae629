"""The ``gpu`` pipeline against XLA:GPU, side by side: kernels, cuBLAS calls and bytes per
module for an H100 (figures only, never asserted anywhere).

    .venv-xla/bin/python benchmarks/gpu_vs_xla_fusion.py [--only softmax,attention_f32]
        [--json out.json] [--kinds] [--hlo-opt-root CHECKOUT] [--hlo-opt-python PY]
        [--regenerate] [--no-interp] [--save-xla DIR]

Run it with a Python that has JAX and its CUDA plugin (the venv of
``benchmarks/xla_gpu_oracle.py``: ``python3 -m venv V && V/bin/pip install '.[bench-xla-gpu]'``); our side runs the ``gpu`` pipeline of ``--hlo-opt-root``
(default: this checkout) in its venv (``--hlo-opt-python``, default ``.venv/bin/python`` of
that checkout, else this interpreter) as ``python benchmarks/gpu_vs_xla_fusion.py --ours
FILES`` (that mode needs no JAX).  ``--kinds`` adds the kernel kinds of each side.

Modules: JAX programs written here (MLP training step, attention f32 and bf16, layer norm,
softmax, a convolution block, a scan, sort/top-k, an RNG-heavy module, a transformer
training step of ~3,000 instructions, a conditional), lowered once with
``jax.jit(f).lower(*args).compiler_ir("hlo")`` on the CPU and saved as
``benchmarks/xla_gpu_modules/NAME.hlo`` (kept in the repository: our side needs no JAX;
``--regenerate`` lowers them again).  Each text is compiled by XLA:GPU for an H100 SXM
without a device (the oracle), once with cuBLAS gemms (``--xla_gpu_enable_triton_gemm=false``)
and once with XLA's default (Triton gemm fusions), and by our ``gpu`` pipeline with the same
flag.  ``--ours`` also runs the module before and after our pipeline in the interpreter on
seeded random inputs (floats in [-0.05, 0.05)) and reports the largest difference (``interp``: ok / FAIL).

The counting rule, the same function on both sides' printed optimized modules:
- the computations that hold kernels are ENTRY and, transitively, the bodies and conditions
  of ``while``, the branches of ``conditional`` and the computations of ``call`` (XLA's
  command buffers are calls), each counted once however often it runs;
- every instruction there is one kernel launch except parameter, constant,
  get-tuple-element, tuple, bitcast, while, conditional, call, after-all, add-dependency,
  opt-barrier, domain, partition-id, replica-id;
- a kernel's kind: ``fusion`` with its kind (``kLoop``, ``kInput``, ``kOutput``, ``kCustom``
  with the backend kind, e.g. ``kCustom:__triton``), a ``custom-call``'s target, else the
  opcode; cuBLAS calls are the custom-calls whose target starts with ``__cublas``;
- bytes of a kernel = the sizes of its distinct operands + the size of its result (the s8
  workspace of a custom-call's tuple result is dropped): an upper bound of its traffic.
Per module: kernels and bytes of each side and the ratios ours / XLA; at the end the
geometric means of the ratios (the issue's target: <= 1.0 for both, with cuBLAS gemms).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODULES = HERE / "xla_gpu_modules"
GEMM = {"cublas": False, "triton": True}  # column -> --xla_gpu_enable_triton_gemm

# ---- the counting rule (both sides) ----------------------------------------------------------
NOT_KERNELS = frozenset({
    "parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while", "conditional",
    "call", "after-all", "add-dependency", "opt-barrier", "domain", "partition-id",
    "replica-id"})
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
          "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "s4": 0.5,
          "u4": 0.5, "s2": 0.25, "u2": 0.25, "token": 0}
_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_HEADER = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*\(.*\{\s*$")
_INST = re.compile(r"^\s+(?:ROOT\s+)?%?([^\s=]+)\s*=\s*")
_CALLED = re.compile(r"\b(body|condition|to_apply|true_computation|false_computation)=%?([^\s,}]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")


def _balanced(s: str, i: int) -> int:
    """Index just past the bracket group that opens at s[i]."""
    depth = 0
    quote = False
    for j in range(i, len(s)):
        c = s[j]
        if quote:
            if c == "\\":
                continue
            if c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


def _array_bytes(dtype: str, dims: str) -> float:
    n = 1
    for d in dims.split(","):
        d = d.strip().lstrip("<=")
        if d:
            n *= int(d)
    return n * _BYTES.get(dtype, 4)


def shape_bytes(shape: str, drop_s8_tail: bool = False) -> float:
    arrays = _ARRAY.findall(re.sub(r"\{[^}]*\}", "", shape))
    if drop_s8_tail and shape.startswith("(") and len(arrays) > 1 and arrays[-1][0] == "s8":
        arrays = arrays[:-1]
    return sum(_array_bytes(t, d) for t, d in arrays)


def _parse(text: str) -> dict:
    """{computation: [(name, shape, opcode, operand names, attributes)]}, and the entry."""
    comps: dict = {}
    entry = None
    cur = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        if not line[0].isspace():
            m = _HEADER.match(line)
            if m:
                cur = comps.setdefault(m.group(2), [])
                if m.group(1):
                    entry = m.group(2)
            elif line.startswith("}"):
                cur = None
            continue
        m = _INST.match(line)
        if cur is None or not m:
            continue
        rest = line[m.end():]
        if rest.startswith("("):
            end = _balanced(rest, 0)
        else:
            end = rest.find(" ")
        shape, rest = rest[:end], rest[end:].lstrip()
        op = re.match(r"[\w\-]+", rest).group(0)
        args_end = _balanced(rest, len(op))
        operands = re.findall(r"%([^\s,()]+)", rest[len(op):args_end])
        cur.append((m.group(1), shape, op, operands, rest[args_end:]))
    return {"comps": comps, "entry": entry}


def _kind(op: str, attrs: str) -> str:
    if op == "fusion":
        kind = re.search(r"kind=(\w+)", attrs)
        k = kind.group(1) if kind else "?"
        if k == "kCustom":
            b = re.search(r'"fusion_backend_config":\{"kind":"([^"]*)"', attrs)
            k += ":" + b.group(1) if b else ""
        return "fusion:" + k
    if op == "custom-call":
        t = re.search(r'custom_call_target="([^"]*)"', attrs)
        return t.group(1) if t else "custom-call"
    return op


def count_kernels(text: str) -> dict:
    """The counting rule of this file's docstring, on one module's text."""
    p = _parse(text)
    comps = p["comps"]
    todo, seen = [p["entry"]], set()
    kinds: dict = {}
    total_bytes = 0.0
    while todo:
        c = todo.pop()
        if c in seen or c not in comps:
            continue
        seen.add(c)
        shapes = {name: shape for name, shape, *_ in comps[c]}
        for name, shape, op, operands, attrs in comps[c]:
            if op in ("while", "conditional", "call"):
                todo += [m.group(2) for m in _CALLED.finditer(attrs)]
                for m in _BRANCHES.finditer(attrs):
                    todo += [b.strip().lstrip("%") for b in m.group(1).split(",")]
            if op in NOT_KERNELS:
                continue
            k = _kind(op, attrs)
            kinds[k] = kinds.get(k, 0) + 1
            b = shape_bytes(shape, drop_s8_tail=(op == "custom-call"))
            b += sum(shape_bytes(shapes.get(o, "")) for o in dict.fromkeys(operands))
            total_bytes += b
    return {"kernels": sum(kinds.values()), "kinds": kinds,
            "cublas": sum(n for k, n in kinds.items() if k.startswith("__cublas")),
            "bytes": total_bytes}


# ---- the JAX programs (only with --regenerate or when a file is missing) ---------------------
def _programs():
    """{name: () -> HLO text}, from benchmarks/jax_programs.py (imported here: only
    regenerating needs JAX)."""
    import jax_programs as jp
    progs = jp.makers()
    return {name: (lambda m=make: jp.hlo_text(m)) for name, make in progs.items()}


PROGRAMS = ["mlp_train_step", "attention_f32", "attention_bf16", "layer_norm", "softmax",
            "conv_block", "scan", "sort_topk", "rng", "transformer_step", "conditional"]


def module_files(only: list[str], regenerate: bool) -> dict:
    names = [n for n in PROGRAMS if not only or n in only]
    missing = [n for n in names if regenerate or not (MODULES / f"{n}.hlo").exists()]
    if missing:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        lowerers = _programs()
        MODULES.mkdir(exist_ok=True)
        for n in missing:
            (MODULES / f"{n}.hlo").write_text(lowerers[n]())
    return {n: MODULES / f"{n}.hlo" for n in names}


# ---- our side (the project venv; imports hlo_opt, never jax) ---------------------------------
def _tolerance(dtype) -> tuple[float, float]:
    import numpy as np
    name = np.dtype(dtype).name
    if name in ("bfloat16", "float16"):
        return 3e-2, 3e-2
    if np.issubdtype(np.dtype(dtype), np.floating):
        return 2e-4, 2e-4
    return 0.0, 0.0


def _max_error(want, got) -> float:
    """Largest |got - want| / (atol + rtol |want|) over all outputs (<= 1: equal)."""
    import numpy as np
    if isinstance(want, (tuple, list)):
        return max([_max_error(w, g) for w, g in zip(want, got)] or [0.0])
    w, g = np.asarray(want), np.asarray(got)
    if w.shape != g.shape:
        return math.inf
    rtol, atol = _tolerance(w.dtype)
    w64, g64 = w.astype(np.float64), g.astype(np.float64)
    same = (w64 == g64) | (np.isnan(w64) & np.isnan(g64))
    if same.all():
        return 0.0
    err = np.abs(g64 - w64)[~same] / (atol + rtol * np.abs(w64[~same]))
    return float(np.max(err)) if np.isfinite(err).all() else math.inf


def _small(v):
    """Float inputs scaled to [-0.05, 0.05): with weights of size 1 the scan's recurrence
    is chaotic (rounding differences grow into sign flips of its tanh)."""
    import numpy as np
    if isinstance(v, tuple):
        return tuple(_small(x) for x in v)
    if isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.floating) or (
            isinstance(v, np.ndarray) and v.dtype.name == "bfloat16"):
        return (v.astype(np.float32) * 0.05).astype(v.dtype)
    return v


def ours(files: list[str], interp: bool, root: Path) -> list[dict]:
    sys.path.insert(0, str(root))
    from hlo_opt import passes_api
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends.interpreter.executable import execute
    from hlo_opt.backends.interpreter.literals import random_arguments
    from hlo_opt.flags import DebugOptions
    from hlo_opt.text.printer import module_to_text

    rows = []
    for f in files:
        text = Path(f).read_text()
        row = {"module": Path(f).stem}
        for col, triton in GEMM.items():
            m = parse_hlo(text, f)
            opts = DebugOptions(xla_gpu_enable_triton_gemm=triton)
            passes_api.optimize(m, opts, pipeline="gpu")
            row[col] = count_kernels(module_to_text(m))
            if interp and col == "cublas":
                before = parse_hlo(text, f)
                errs = []
                for seed in (0, 1):
                    args = [_small(v) for v in random_arguments(before, seed=seed)]
                    errs.append(_max_error(execute(before, args), execute(m, args)))
                row["interp_error"] = max(errs)
        rows.append(row)
    return rows


# ---- the table ------------------------------------------------------------------------------
def _geo(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(statistics.mean(math.log(x) for x in xs)) if xs else float("nan")


def _project_python(arg: str | None, root: Path) -> str:
    if arg:
        return arg
    venv = root / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _kinds_text(kinds: dict) -> str:
    short = {"fusion:kLoop": "loop", "fusion:kInput": "input", "fusion:kOutput": "output"}
    return " ".join(f"{short.get(k, k.replace('fusion:kCustom:', ''))}={n}"
                    for k, n in sorted(kinds.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma list of module names")
    ap.add_argument("--json", default="", help="also write the figures here")
    ap.add_argument("--hlo-opt-python", default=None,
                    help="the project venv's python (default: .venv/bin/python of this checkout)")
    ap.add_argument("--regenerate", action="store_true", help="lower the JAX programs again")
    ap.add_argument("--no-interp", action="store_true", help="skip the interpreter check")
    ap.add_argument("--save-xla", default="", help="write XLA's optimized modules here")
    ap.add_argument("--ours", nargs="*", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--kinds", action="store_true", help="print the kernel kinds per module")
    ap.add_argument("--hlo-opt-root", default=str(ROOT),
                    help="the checkout whose gpu pipeline runs (default: this one)")
    a = ap.parse_args(argv)
    root = Path(a.hlo_opt_root).resolve()
    if a.ours is not None:  # our side, in the project venv: JSON on stdout
        json.dump(ours(a.ours, not a.no_interp, root), sys.stdout)
        return 0

    sys.path.insert(0, str(HERE))
    from xla_gpu_oracle import compile_hlo

    only = [s for s in a.only.split(",") if s]
    files = module_files(only, a.regenerate)
    cmd = [_project_python(a.hlo_opt_python, root), str(Path(__file__).resolve()),
           "--hlo-opt-root", str(root), "--ours", *map(str, files.values())]
    cmd += ["--no-interp"] if a.no_interp else []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=str(root))
    xla = {}
    for name, path in files.items():
        text = path.read_text()
        xla[name] = {}
        for col, triton in GEMM.items():
            out = compile_hlo(text, {"xla_gpu_enable_triton_gemm": triton})
            if a.save_xla:
                Path(a.save_xla).mkdir(parents=True, exist_ok=True)
                (Path(a.save_xla) / f"{name}.{col}.hlo").write_text(out)
            xla[name][col] = count_kernels(out)
    stdout, _ = proc.communicate()
    if proc.returncode:
        print(f"our side failed: {' '.join(cmd)}", file=sys.stderr)
        return 1
    ours_rows = {r["module"]: r for r in json.loads(stdout)}

    rows = []
    for name in files:
        o = ours_rows[name]
        row = {"module": name, "interp_error": o.get("interp_error")}
        for col in GEMM:
            x, u = xla[name][col], o[col]
            row[col] = {"xla": x, "ours": u, "kernel_ratio": u["kernels"] / max(x["kernels"], 1),
                        "bytes_ratio": u["bytes"] / max(x["bytes"], 1)}
        rows.append(row)

    for col in GEMM:
        print(f"\n== gemms: {col} (--xla_gpu_enable_triton_gemm={str(GEMM[col]).lower()}) ==")
        print(f"{'module':18} {'xla k':>6} {'ours k':>6} {'k x':>5} {'xla cublas':>10} "
              f"{'ours cublas':>11} {'xla MB':>8} {'ours MB':>8} {'B x':>5} {'interp':>7}")
        for r in rows:
            c = r[col]
            e = r["interp_error"]
            ok = "-" if e is None else ("ok" if e <= 1 else "FAIL")
            print(f"{r['module']:18} {c['xla']['kernels']:>6} {c['ours']['kernels']:>6} "
                  f"{c['kernel_ratio']:>5.2f} {c['xla']['cublas']:>10} {c['ours']['cublas']:>11} "
                  f"{c['xla']['bytes'] / 1e6:>8.2f} {c['ours']['bytes'] / 1e6:>8.2f} "
                  f"{c['bytes_ratio']:>5.2f} {ok:>7}")
            if a.kinds:
                print(f"{'':20}xla:  {_kinds_text(c['xla']['kinds'])}")
                print(f"{'':20}ours: {_kinds_text(c['ours']['kinds'])}")
        gk = _geo([r[col]["kernel_ratio"] for r in rows])
        gb = _geo([r[col]["bytes_ratio"] for r in rows])
        print(f"geometric mean ours / XLA over {len(rows)} modules: kernels {gk:.3f}x, "
              f"bytes {gb:.3f}x")
    bad = [r["module"] for r in rows if r["interp_error"] is not None and r["interp_error"] > 1]
    print(f"\ninterpreter after our pipeline: "
          f"{'all equal' if not bad else 'DIFFERENT: ' + ', '.join(bad)}")
    if a.json:
        summary = {col: {"kernels": _geo([r[col]["kernel_ratio"] for r in rows]),
                         "bytes": _geo([r[col]["bytes_ratio"] for r in rows])} for col in GEMM}
        Path(a.json).write_text(json.dumps({"rows": rows, "geomean": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
