"""Device probe of the fft / cholesky / triangular-solve library thunks (cuFFT, cuSOLVER
potrf, cuBLAS trsm through nvmath-python): on a GPU, each case runs through the CUDA
backend with its library, is compared with the interpreter (XLA's error bounds: an
element fails when both |diff| > 1e-3 and |diff| / |want| > 1e-3; the 2048x2048
choleskys with numpy's LAPACK in f64 instead, the interpreter's being minutes of Python),
and prints one line with the library's device time and the host call's (the same thunk
with the library turned off: the interpreter between downloads and uploads).  Without a
GPU or without nvmath-python it says why and returns.

    python scripts/device_libs_libs.py        # or run(say) from scripts/device_check.py
"""
from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

BUDGET_S = 30.0          # host-call timings are skipped past this (the probe must fit 40 s)
STOP_S = 36.0            # and cases not started
LIBS = {"fft": "cufft", "cholesky": "solvers", "custom-call": "solvers",
        "triangular-solve": "solvers"}

FFT_SMALL = """HloModule fft_small
ENTRY e {
  a = c64[8,64]{1,0} parameter(0)
  b = c64[4,16,16]{2,1,0} parameter(1)
  c = c128[2,8,8,8]{3,2,1,0} parameter(2)
  d = f32[16,128]{1,0} parameter(3)
  e = f64[4,32,32]{2,1,0} parameter(4)
  f = f64[2,8,8,8]{3,2,1,0} parameter(5)
  fft_c2c_1d = c64[8,64]{1,0} fft(a), fft_type=FFT, fft_length={64}
  ifft_c2c_2d = c64[4,16,16]{2,1,0} fft(b), fft_type=IFFT, fft_length={16,16}
  fft_z2z_3d = c128[2,8,8,8]{3,2,1,0} fft(c), fft_type=FFT, fft_length={8,8,8}
  rfft_r2c_1d = c64[16,65]{1,0} fft(d), fft_type=RFFT, fft_length={128}
  irfft_c2r_1d = f32[16,128]{1,0} fft(rfft_r2c_1d), fft_type=IRFFT, fft_length={128}
  rfft_d2z_2d = c128[4,32,17]{2,1,0} fft(e), fft_type=RFFT, fft_length={32,32}
  irfft_z2d_2d = f64[4,32,32]{2,1,0} fft(rfft_d2z_2d), fft_type=IRFFT, fft_length={32,32}
  rfft_d2z_3d = c128[2,8,8,5]{3,2,1,0} fft(f), fft_type=RFFT, fft_length={8,8,8}
  irfft_z2d_3d = f64[2,8,8,8]{3,2,1,0} fft(rfft_d2z_3d), fft_type=IRFFT, fft_length={8,8,8}
  ROOT o = (c64[8,64], c64[4,16,16], c128[2,8,8,8], f32[16,128], f64[4,32,32],
            f64[2,8,8,8]) tuple(fft_c2c_1d, ifft_c2c_2d, fft_z2z_3d, irfft_c2r_1d,
            irfft_z2d_2d, irfft_z2d_3d)
}"""

FFT_BIG = """HloModule fft_4096
ENTRY e {
  a = c64[4096,4096]{1,0} parameter(0)
  ROOT fft_c2c_4096x4096 = c64[4096,4096]{1,0} fft(a), fft_type=FFT, fft_length={4096,4096}
}"""


def _chol(dt, dims, lower, name):
    d = ",".join(map(str, dims))
    lay = "{" + ",".join(map(str, range(len(dims) - 1, -1, -1))) + "}"
    return f"""HloModule {name}
ENTRY e {{
  a = {dt}[{d}]{lay} parameter(0)
  ROOT {name} = {dt}[{d}]{lay} cholesky(a), lower={str(lower).lower()}
}}"""


def _trsm_module():
    lines, outs = [], []
    k = 0
    for dt in ("f32", "f64", "c64"):
        transposes = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT") if dt != "f64" else \
            ("NO_TRANSPOSE",)
        for left in (True, False):
            for lower in (True, False):
                for tr in transposes:
                    if dt == "c64" and tr != "ADJOINT":
                        continue
                    bd = "4,64,32" if left else "4,32,64"
                    name = (f"trsm_{dt}_{'left' if left else 'right'}_"
                            f"{'lower' if lower else 'upper'}_{tr.lower()}")
                    lines.append(f"  a{k} = {dt}[4,64,64]{{2,1,0}} parameter({2 * k})")
                    lines.append(f"  b{k} = {dt}[{bd}]{{2,1,0}} parameter({2 * k + 1})")
                    lines.append(f"  {name} = {dt}[{bd}]{{2,1,0}} triangular-solve(a{k}, b{k}),"
                                 f" left_side={str(left).lower()}, lower={str(lower).lower()},"
                                 f" unit_diagonal=false, transpose_a={tr}")
                    outs.append((name, f"{dt}[{bd}]"))
                    k += 1
    body = "\n".join(lines)
    return (f"HloModule trsm\nENTRY e {{\n{body}\n  ROOT o = ({', '.join(s for _, s in outs)})"
            f" tuple({', '.join(n for n, _ in outs)})\n}}")


def _spd(shape, rng):
    import numpy as np
    n = shape.dims[-1]
    x = rng.standard_normal(shape.dims) / np.sqrt(n)
    return (x @ np.swapaxes(x, -1, -2) + np.eye(n)).astype(shape.dtype)


def _args(module, rng):
    import numpy as np
    out = []
    for p in sorted(module.entry.parameters, key=lambda q: q.parameter_number):
        s = p.shape
        users = [u.opcode for u in p.iter_users()]
        if "cholesky" in users:
            out.append(_spd(s, rng))
            continue
        x = rng.standard_normal(s.dims)
        if s.element_type.startswith("c"):
            x = x + 1j * rng.standard_normal(s.dims)
        if "triangular-solve" in users and any(u.operands[0] is p for u in p.iter_users()):
            x = x + 2 * s.dims[-1] * np.eye(s.dims[-1])   # well conditioned, either triangle
        out.append(np.asarray(x).astype(s.dtype))
    return out


def _leaf_names(module):
    root = module.entry.root
    return [o.name for o in root.operands] if root.opcode == "tuple" else [root.name]


def _thunk_times(rows):
    return {r["name"]: r["time_us"] for r in rows}


def _not_positive_definite(args):
    """Batch element 1 negated (fails at the first pivot), element 2 at its third."""
    a = args[0].copy()
    a[1] = -a[1]
    a[2, 2, 2] = -a[2, 2, 2] - 10
    return [a]


def _case(say, name, text, pipeline=None, reference=None, t0=0.0, backend="cuda",
          make_args=None):
    """One module through ``backend`` (``cuda``; ``cuda-sim`` checks this script without a
    GPU, its library thunks being host calls); True when every output is right."""
    import numpy as np
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.interpreter.literals import compare_results, result_shapes
    module = parse_hlo(text)
    rng = np.random.default_rng(0)
    args = _args(module, rng)
    if make_args is not None:
        args = make_args(args)
    run_module = module
    if pipeline:
        from hlo_opt import passes_api
        from hlo_opt.flags import DebugOptions
        run_module = passes_api.optimize(module.clone(), DebugOptions.from_sources([]),
                                         pipeline=pipeline)
    exe = compile_module(run_module, backend)
    got = exe.run(args)
    want = reference(args) if reference else compile_module(module, "interpreter").run(args)
    rows = compare_results(got, want, result_shapes(module), 1e-3, 1e-3)
    lib_rows = exe.profile(args, iterations=3)
    lib_t = _thunk_times(lib_rows)
    kinds = {r["name"]: r["kind"] for r in lib_rows}
    notes = dict(exe.program.host_fallbacks)
    host_t = {}
    adapter = getattr(exe, "adapter", None)
    if adapter is not None and time.perf_counter() - t0 < BUDGET_S:
        for lib in ("cufft", "solvers"):
            adapter._libs[lib] = None
            adapter.library_errors[lib] = "turned off to time the host call"
        host_t = _thunk_times(exe.profile(args, iterations=1))
    names = _leaf_names(module)
    lib_names = [n for n, k in kinds.items() if k == "library"]
    good = True
    for r, leaf in zip(rows, names):
        w = np.asarray(want[r.index], np.complex128)
        finite = np.isfinite(w)   # NaN where the interpreter has it (compare_results checks)
        scale = max(float(np.max(np.abs(w[finite]), initial=0.0)), 1e-30)
        diff = np.abs(np.asarray(got[r.index], np.complex128) - w)[finite]
        err = float(np.max(diff, initial=0.0)) / scale
        # an fft's rounding grows with log N over the whole output: elements near zero
        # exceed the elementwise bounds where the transform is right to 1e-5 of its scale
        narrow = str(np.asarray(got[r.index]).dtype) in ("complex64", "float32")
        fft_ok = name == "fft" and err <= (1e-5 if narrow else 1e-12)
        verdict = "ok" if r.ok else ("ok (fft, by its scale)" if fft_ok else
                                     f"MISMATCH {r.note}")
        good &= r.ok or fft_ok
        line = f"libs: {name}/{leaf}: {verdict} (max |diff| / max |want| {err:.1e})"
        if leaf in kinds:
            line += _times(leaf, kinds, lib_t, host_t, notes)
        say(line)
    rest = [t for t in lib_names if t not in names]   # the pipeline's calls under a GTE
    if len(rest) == 1:
        say(f"libs: {name}/{rest[0]}:" + _times(rest[0], kinds, lib_t, host_t, notes))
    elif rest:
        on_host = [t for t in rest if t in notes]
        dt = sum(lib_t.get(t, 0.0) for t in rest)
        ht = sum(host_t.get(t, 0.0) for t in rest)
        say(f"libs: {name}: {len(rest)} library thunks ({len(on_host)} on the host"
            f"{': ' + notes[on_host[0]] if on_host else ''}); device {dt:.1f} us in all"
            + (f", host calls {ht:.1f} us ({ht / max(dt, 1e-9):.0f}x)" if ht else ""))
    return good


def _times(thunk, kinds, lib_t, host_t, notes) -> str:
    path = "library" if kinds.get(thunk) == "library" and thunk not in notes else \
        f"HOST ({notes.get(thunk, kinds.get(thunk))})"
    dt, ht = lib_t.get(thunk, 0.0), host_t.get(thunk)
    return (f" via {path}; device {dt:.1f} us" +
            (f", host call {ht:.1f} us ({ht / max(dt, 1e-9):.0f}x)" if ht
             else ", host call not timed"))


def _numpy_cholesky(lower):
    def ref(args):
        import numpy as np
        a = np.asarray(args[0], np.float64)
        low = np.linalg.cholesky(a)
        return [low.astype(args[0].dtype) if lower
                else np.swapaxes(low, -1, -2).astype(args[0].dtype)]
    return ref


def run(say) -> None:
    t0 = time.perf_counter()
    try:
        from hlo_opt.backends.cuda.driver import probe
        probe()
    except Exception as e:  # noqa: BLE001 - no driver / device: nothing to probe
        say(f"libs: skipped, no CUDA device ({type(e).__name__}: {str(e)[:120]})")
        return
    try:
        import nvmath.bindings  # noqa: F401
    except ImportError:
        say("libs: skipped, nvmath-python is not installed (pip install 'hlo-opt[cuda]')")
        return
    cases = [   # the small ones first: what a short lease leaves out is timing only
        ("fft", FFT_SMALL, None, None),
        ("cholesky", _chol("f32", [16, 256, 256], True, "chol_f32_16x256x256_lower"), None,
         None),
        ("cholesky", _chol("f64", [16, 256, 256], False, "chol_f64_16x256x256_upper"), None,
         None),
        ("cholesky-gpu-pipeline", _chol("f32", [16, 256, 256], True, "chol_gpu_f32_lower"),
         "gpu", None),
        ("trsm", _trsm_module(), None, None),
        ("trsm-gpu-pipeline", _trsm_module(), "gpu", None),
        ("cholesky-not-pd", _chol("f32", [4, 32, 32], True, "chol_not_pd"), None, None),
        ("cholesky-not-pd-gpu-pipeline", _chol("f64", [4, 32, 32], False, "chol_not_pd_gpu"),
         "gpu", None),
        ("fft", FFT_BIG, None, None),
        ("cholesky", _chol("f32", [1, 2048, 2048], True, "chol_f32_1x2048x2048_lower"), None,
         _numpy_cholesky(True)),
        ("cholesky", _chol("f64", [1, 2048, 2048], False, "chol_f64_1x2048x2048_upper"), None,
         _numpy_cholesky(False)),
    ]
    ok = total = 0
    for name, text, pipeline, ref in cases:
        if time.perf_counter() - t0 > STOP_S:
            say(f"libs: {name}: not run, {STOP_S:.0f} s spent")
            continue
        total += 1
        try:
            ok += bool(_case(say, name, text, pipeline, ref, t0, make_args=(
                _not_positive_definite if "not-pd" in name else None)))
        except Exception as e:  # noqa: BLE001 - reported, the next case runs
            say(f"libs: {name}: ERROR {type(e).__name__}: {str(e)[:300]}")
    say(f"libs: {ok}/{total} cases ok in {time.perf_counter() - t0:.1f} s")


device_probe_libs = run   # the name scripts/device_check.py may import


if __name__ == "__main__":
    run(print)
