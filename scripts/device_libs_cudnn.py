"""cuDNN convolutions on a GPU (``hlo_opt/backends/cuda/cudnn_conv.py``): every convolution
of mobilenet_cluster and conv_block (after the gpu pipeline) and synthetic fprop / dgrad /
wgrad calls in NHWC and NCHW, f32 / f16 / bf16, each run through cuDNN (its heuristic
engine) and through our conv kernel on the same device buffers, both compared with the
interpreter (XLA's bounds for the output type), timed with CUDA events; then conv_block
and mobilenet_cluster whole through the CUDA runtime (cuDNN inside, graph capture on the
second run), compared with the interpreter.  One line per case.

    python scripts/device_libs_cudnn.py          # or run(say) from device_check.py

Without a driver, a device or the cuDNN frontend it says why and returns (the driver is
probed before anything touches a device, so it cannot hang).  About 20-40 s on an H100.
"""
from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

BUDGET_S = 30.0
ITERS = 20
BOUNDS = {"f32": 1e-3, "f64": 1e-6, "f16": 1e-2, "bf16": 2e-2}   # abs and rel, XLA's


def _synthetic() -> dict:
    """name -> HLO text of one cuDNN convolution call."""
    out = {}
    N, H, C, K = 8, 32, 32, 64
    P = H // 2
    for kind, layout, dt in (("fprop", "nhwc", "bf16"), ("fprop", "nchw", "f32"),
                             ("fprop", "nhwc", "f16"), ("dgrad", "nhwc", "bf16"),
                             ("dgrad", "nchw", "f32"), ("dgrad", "nhwc", "f16"),
                             ("wgrad", "nhwc", "bf16"), ("wgrad", "nchw", "f32"),
                             ("wgrad", "nhwc", "f16")):
        if layout == "nhwc":
            labels = "b01f_01io->b01f"
            x, w, y = [N, H, H, C], [3, 3, C, K], [N, P, P, K]
        else:
            labels = "bf01_oi01->bf01"
            x, w, y = [N, C, H, H], [K, C, 3, 3], [N, K, P, P]
        ops, res, target = {
            "fprop": ((x, w), y, "__cudnn$convForward"),
            "dgrad": ((y, w), x, "__cudnn$convBackwardInput"),
            "wgrad": ((x, y), w, "__cudnn$convBackwardFilter")}[kind]
        # cuDNN's filter layouts: KRSC beside NHWC, KCRS beside NCHW (the default layout
        # of a 01io filter, K minor-most, is not one: the kernel runs those)
        krsc = "{2,1,0,3}" if layout == "nhwc" else ""
        s = lambda d: f"{dt}[{','.join(map(str, d))}]" + (krsc if d is w else "")  # noqa: E731
        attrs = f"window={{size=3x3 stride=2x2 pad=1_1x1_1}}, dim_labels={labels}"
        out[f"{kind}_{layout}_{dt}"] = f"""HloModule {kind}_{layout}_{dt}
ENTRY e {{
  a = {s(ops[0])} parameter(0)
  b = {s(ops[1])} parameter(1)
  ROOT c = ({s(res)}, u8[0]) custom-call(a, b), {attrs}, custom_call_target="{target}"
}}
"""
    return out


def _gpu(module):
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    return passes_api.optimize(module.clone(), DebugOptions.from_sources([]), pipeline="gpu")


def _cases():
    from hlo_opt.api import load, parse_hlo
    from hlo_opt.backends.cuda.conv import is_convolution
    out = []
    for name, path in (("mobilenet", "sample_modules/mobilenet_cluster.hlo"),
                       ("conv_block", "benchmarks/xla_gpu_modules/conv_block.hlo")):
        m = _gpu(load(os.path.join(ROOT, path)))
        convs = [i for c in m.computations for i in c.instructions if is_convolution(i)]
        out += [(f"{name}/{i.name}", i) for i in convs]
    for name, text in _synthetic().items():
        out.append((name, parse_hlo(text).entry.root))
    return out


def _interpret(inst, args):
    import numpy as np
    from hlo_opt.backends.interpreter.evaluator import Evaluator
    from hlo_opt.backends.interpreter.registry import HANDLERS
    r = HANDLERS[inst.opcode](inst, args, Evaluator())
    return np.asarray(r[0] if isinstance(r, tuple) else r)


def _error(got, want) -> float:
    import numpy as np
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if g.shape != w.shape:
        return float("inf")
    if not w.size:
        return 0.0
    # NaN where the interpreter has NaN (mobilenet's batch norm of random variances) is
    # agreement, as XLA's comparison counts it; NaN anywhere else is an infinite error
    both = np.isnan(g) & np.isnan(w)
    diff = np.where(both, 0.0, np.abs(g - w) / (1.0 + np.abs(w)))
    return float(np.max(np.where(np.isnan(diff), np.inf, diff)))


def _kernel(dev, inst, ins, info):
    """Our conv kernel for ``inst`` on the same inputs: (run, result address)."""
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.backends.cuda.launch_tuning import standalone_module
    from hlo_opt.backends.cuda.program import build_program, full_source
    prog = build_program(standalone_module(inst), info)
    launches = [t for t in prog.entry.thunks if t.kind == "launch"]
    if not launches or len(launches) != len(prog.entry.thunks):
        raise RuntimeError(f"not one kernel: {[t.kind for t in prog.entry.thunks]}")
    mod = dev.load_module(compile_cuda(full_source(prog), dev.arch,
                                       name=f"cudnn_check_{inst.name}.cu").cubin)
    arena = dev.alloc(max(prog.arena_size, 64))

    def addr(sl):
        if sl.kind == "param":
            return ins[sl.index]
        if sl.kind == "arena":
            return arena + sl.offset
        raise RuntimeError(f"slice {sl}")
    calls = [(mod.function(t.kernel.name), t.kernel, [addr(s) for s in t.args])
             for t in launches]

    def run():
        for fn, k, addrs in calls:
            dev.launch_function(fn, k.grid, k.block, addrs)
    return run, addr(prog.entry.root_slices[0])


def _time_ms(dev, run) -> float:
    from hlo_opt.backends.cuda.driver import EventTimer
    return EventTimer.mean(dev, run, ITERS, warmup=1) * 1e3


def _case(say, dev, conv, name, inst, info) -> bool:
    import numpy as np
    from hlo_opt.backends.cuda.conv_plan import conv_plan
    from hlo_opt.backends.cuda.runtime import from_physical, to_physical
    plan = conv_plan(inst)
    res = inst.shape.tuple_shapes[0] if inst.shape.is_tuple() else inst.shape
    dt = res.element_type
    rng = np.random.default_rng(7)
    args = [(rng.standard_normal(o.shape.dims) * (0.1 if i else 1.0)).astype(o.shape.dtype)
            for i, o in enumerate(inst.operands)]
    want = _interpret(inst, args)
    ins = []
    for o, a in zip(inst.operands, args):
        data = to_physical(a, o.shape)
        buf = dev.alloc(max(len(data), 16))
        dev.upload(buf, data)
        ins.append(buf)
    nbytes = res.num_elements() * res.dtype.itemsize
    bound = BOUNDS.get(dt, 1e-3)
    kernel_ms, kerr = float("nan"), float("nan")
    try:
        krun, kout = _kernel(dev, inst, ins, info)
        krun()
        dev.sync()
        kerr = _error(from_physical(dev.download(kout, nbytes), res), want)
        kernel_ms = _time_ms(dev, krun)
    except Exception as e:  # noqa: BLE001 - reported, the cuDNN part still runs
        say(f"    kernel: {type(e).__name__}: {str(e)[:160]}")
    if plan is None:
        say(f"  SKIP {name:34s} {dt:4s} no cuDNN plan (the kernel runs it): kernel "
            f"{kernel_ms:.3f} ms err {kerr:.1e}")
        return kerr <= bound
    out = dev.alloc(max(nbytes, 16))
    try:
        t0 = time.perf_counter()
        conv.run(plan, ins, out)
        dev.sync()
        build_s = time.perf_counter() - t0
        got = from_physical(dev.download(out, nbytes), res)
        err = _error(got, want)
        cudnn_ms = _time_ms(dev, lambda: conv.run(plan, ins, out))
        cg = conv.graph(plan)
        eid = cg.engines.get(cg.default, ("?",))[0]
    except Exception as e:  # noqa: BLE001 - cuDNN refused: the runtime runs the kernel
        say(f"  FALLBACK {name:30s} {dt:4s} {plan.kind}: cuDNN {type(e).__name__}: "
            f"{str(e)[:200]}; kernel {kernel_ms:.3f} ms err {kerr:.1e}")
        return kerr <= bound
    ok = err <= bound and (kerr != kerr or kerr <= bound)
    say(f"  {'PASS' if ok else 'FAIL':8s} {name:30s} {dt:4s} {plan.kind}"
        f"{'+fused' if plan.fused else ''} g={plan.groups}: cuDNN {cudnn_ms:.3f} ms "
        f"(engine {eid}, {len(cg.engines)} engines, build {build_s:.2f}s) err {err:.1e} | "
        f"kernel {kernel_ms:.3f} ms err {kerr:.1e} | bound {bound:g}")
    return ok


def _programs(say, deadline) -> None:
    """conv_block and mobilenet_cluster whole through the CUDA runtime (cuDNN inside)."""
    from hlo_opt.api import load
    from hlo_opt.backends import compile as compile_module
    from hlo_opt.backends.interpreter.literals import random_arguments
    for path in ("benchmarks/xla_gpu_modules/conv_block.hlo",
                 "sample_modules/mobilenet_cluster.hlo"):
        if time.perf_counter() > deadline:
            say(f"  SKIP {path}: time budget")
            continue
        try:
            m = _gpu(load(os.path.join(ROOT, path)))
            exe = compile_module(m, "cuda")
            args = random_arguments(m, 3)
            want = compile_module(m, "interpreter").run(args)
            errs = []
            for _ in range(3):    # plain, captured into a graph, replayed
                got = exe.run(args)
                errs.append(max(_error(g, w) for g, w in zip(got, want)))
            r = exe.runner()
            convs = sum(t.spec is not None for t in exe.program.entry.thunks
                        if t.kind == "launch")
            notes = exe.program.library_fallbacks
            bound = 2e-2 if "bf16" in m.to_text() else 1e-3
            ok = max(errs) <= bound
            say(f"  {'PASS' if ok else 'FAIL':8s} {os.path.basename(path):30s} runtime: "
                f"{convs} cuDNN convs, errors {', '.join(f'{e:.1e}' for e in errs)}, "
                f"graph {'on' if r._graph is not None else 'off'}, "
                f"kernel fallbacks {len(notes)}" + (f" ({notes[0][1][:160]})" if notes else ""))
        except Exception as e:  # noqa: BLE001
            say(f"  ERROR {os.path.basename(path)}: {type(e).__name__}: {str(e)[:300]}")


def run(say=print) -> None:
    say("cuDNN convolutions (frontend graphs vs the interpreter and our conv kernel)")
    try:
        from hlo_opt.backends.cuda.driver import CudaDriverError, probe
        from hlo_opt.backends.cuda.toolchain import MissingToolError
        dev = probe()
    except (ImportError, CudaDriverError, MissingToolError) as e:
        say(f"  skipped: {e}")
        return
    try:
        from hlo_opt.backends.cuda.cudnn_conv import CudnnConv
        conv = CudnnConv(dev)
        import cudnn
        say(f"  cuDNN frontend {getattr(cudnn, '__version__', '?')}, backend "
            f"{cudnn.backend_version()}, device {dev.name}")
    except Exception as e:  # noqa: BLE001 - no frontend / libcudnn
        say(f"  skipped: cuDNN unavailable: {type(e).__name__}: {str(e)[:200]}")
        return
    start = time.perf_counter()
    deadline = start + BUDGET_S
    info = dev.device_info()
    passed = total = 0
    cases = _cases()
    for name, inst in cases:
        if time.perf_counter() > deadline - 8:
            say(f"  SKIP {name}: time budget ({BUDGET_S:.0f} s)")
            continue
        total += 1
        try:
            passed += _case(say, dev, conv, name, inst, info)
        except Exception as e:  # noqa: BLE001 - one case must not stop the others
            say(f"  ERROR {name}: {type(e).__name__}: {str(e)[:300]}")
    _programs(say, deadline)
    say(f"  cuDNN cases: {passed}/{total} within bounds, {time.perf_counter() - start:.1f} s")


device_probe_cudnn = run


if __name__ == "__main__":
    run()
