"""Interpreter speed against the same computation written by hand in numpy.

Three workloads (printed figures only; nothing asserts timings):

* softmax over f32[1024,1024] (the jax-lowered form: reduce max, broadcast, exp,
  reduce sum, divide);
* one training step of a 4-layer ReLU MLP (forward, MSE loss, backward, SGD update);
* a while loop of 1,000 iterations (damped oscillator on f32[1024] state).

For each: ms/run of the interpreter (plans cached, i.e. an Interpreter reused across
runs, as ``hlo-opt run --iterations`` does), ms of the first run (planning included),
ms/run of the numpy version, and the ratio interpreter / numpy (target: within 2x).
Runs of the two are interleaved and the best is kept, so machine load hits both alike.
The outputs of both are checked to agree before timing.

    .venv/bin/python benchmarks/interp_bench.py [--repeat 20] [--profile NAME]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hlo_opt.api import parse_hlo  # noqa: E402
from hlo_opt.backends.interpreter import Interpreter  # noqa: E402

# ---- softmax ----------------------------------------------------------------------------
SOFTMAX = """HloModule jit_softmax

%max_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[@N@,@M@]) -> f32[@N@,@M@] {
  %x = f32[@N@,@M@]{1,0} parameter(0)
  %ninf = f32[] constant(-inf)
  %rmax = f32[@N@]{0} reduce(%x, %ninf), dimensions={1}, to_apply=%max_f32
  %ninf.b = f32[@N@]{0} broadcast(%ninf), dimensions={}
  %rmax.1 = f32[@N@]{0} maximum(%rmax, %ninf.b)
  %rmax.2 = f32[@N@,1]{1,0} reshape(%rmax.1)
  %rmax.3 = f32[@N@]{0} reshape(%rmax.2)
  %rmax.b = f32[@N@,@M@]{1,0} broadcast(%rmax.3), dimensions={0}
  %sub = f32[@N@,@M@]{1,0} subtract(%x, %rmax.b)
  %exp = f32[@N@,@M@]{1,0} exponential(%sub)
  %zero = f32[] constant(0)
  %sum = f32[@N@]{0} reduce(%exp, %zero), dimensions={1}, to_apply=%add_f32
  %sum.1 = f32[@N@,1]{1,0} reshape(%sum)
  %sum.2 = f32[@N@]{0} reshape(%sum.1)
  %sum.b = f32[@N@,@M@]{1,0} broadcast(%sum.2), dimensions={0}
  ROOT %div = f32[@N@,@M@]{1,0} divide(%exp, %sum.b)
}
"""


def softmax_numpy(x):
    m = np.maximum(np.max(x, axis=1), np.float32(-np.inf))
    e = np.exp(x - m[:, None])
    return e / np.sum(e, axis=1)[:, None]


def softmax_case(n=1024, m=1024):
    text = SOFTMAX.replace("@N@", str(n)).replace("@M@", str(m))
    x = np.random.default_rng(0).normal(size=(n, m)).astype(np.float32)
    return text, [x], lambda: [softmax_numpy(x)]


# ---- 4-layer MLP training step ----------------------------------------------------------
def mlp_text(batch, sizes, lr):
    """HLO for one SGD step of an MLP (ReLU hidden layers, MSE loss), jax-lowered style."""
    n = len(sizes) - 1
    out = sizes[-1]
    lines = []
    params = []
    for l in range(n):
        params.append(f"f32[{sizes[l]},{sizes[l + 1]}]")
        params.append(f"f32[{sizes[l + 1]}]")
    sig = ", ".join(f"p{i}: {s}" for i, s in enumerate(params))
    sig += f", x: f32[{batch},{sizes[0]}], y: f32[{batch},{out}]"
    result = ", ".join(params) + ", f32[]"
    lines.append(f"ENTRY %main ({sig}) -> ({result}) {{")
    for i, s in enumerate(params):
        lines.append(f"  %p{i} = {s} parameter({i})")
    lines.append(f"  %x = f32[{batch},{sizes[0]}] parameter({2 * n})")
    lines.append(f"  %y = f32[{batch},{out}] parameter({2 * n + 1})")
    lines.append("  %zero = f32[] constant(0)")
    lines.append(f"  %lr = f32[] constant({lr})")
    h = "%x"
    for l in range(n):
        w, b = f"%p{2 * l}", f"%p{2 * l + 1}"
        k = sizes[l + 1]
        bs = f"f32[{batch},{k}]"
        lines.append(f"  %dot{l} = {bs} dot({h}, {w}), lhs_contracting_dims={{1}}, "
                     "rhs_contracting_dims={0}")
        lines.append(f"  %bias{l}.r = f32[1,{k}] reshape({b})")
        lines.append(f"  %bias{l}.s = f32[{k}] reshape(%bias{l}.r)")
        lines.append(f"  %bias{l} = {bs} broadcast(%bias{l}.s), dimensions={{1}}")
        lines.append(f"  %z{l} = {bs} add(%dot{l}, %bias{l})")
        if l < n - 1:
            lines.append(f"  %zeros{l} = {bs} broadcast(%zero), dimensions={{}}")
            lines.append(f"  %h{l} = {bs} maximum(%z{l}, %zeros{l})")
            lines.append(f"  %gt{l} = pred[{batch},{k}] compare(%z{l}, %zeros{l}), "
                         "direction=GT")
            h = f"%h{l}"
    os_ = f"f32[{batch},{out}]"
    lines.append(f"  %diff = {os_} subtract(%z{n - 1}, %y)")
    lines.append(f"  %sq = {os_} multiply(%diff, %diff)")
    lines.append("  %sum = f32[] reduce(%sq, %zero), dimensions={0,1}, to_apply=%add_f32")
    lines.append(f"  %count = f32[] constant({batch * out})")
    lines.append("  %loss = f32[] divide(%sum, %count)")
    lines.append(f"  %scale = f32[] constant({2.0 / (batch * out)!r})")
    lines.append(f"  %scale.b = {os_} broadcast(%scale), dimensions={{}}")
    lines.append(f"  %g{n - 1} = {os_} multiply(%diff, %scale.b)")
    new = {}
    for l in reversed(range(n)):
        w, b = f"%p{2 * l}", f"%p{2 * l + 1}"
        a, k = sizes[l], sizes[l + 1]
        inp = "%x" if l == 0 else f"%h{l - 1}"
        g = f"%g{l}"
        lines.append(f"  %dw{l}.t = f32[{k},{a}] dot({g}, {inp}), lhs_contracting_dims={{0}}, "
                     "rhs_contracting_dims={0}")
        lines.append(f"  %dw{l} = f32[{a},{k}]{{0,1}} transpose(%dw{l}.t), dimensions={{1,0}}")
        lines.append(f"  %lr.w{l} = f32[{a},{k}] broadcast(%lr), dimensions={{}}")
        lines.append(f"  %step.w{l} = f32[{a},{k}] multiply(%dw{l}, %lr.w{l})")
        lines.append(f"  %new.w{l} = f32[{a},{k}] subtract({w}, %step.w{l})")
        lines.append(f"  %db{l} = f32[{k}] reduce({g}, %zero), dimensions={{0}}, "
                     "to_apply=%add_f32")
        lines.append(f"  %lr.b{l} = f32[{k}] broadcast(%lr), dimensions={{}}")
        lines.append(f"  %step.b{l} = f32[{k}] multiply(%db{l}, %lr.b{l})")
        lines.append(f"  %new.b{l} = f32[{k}] subtract({b}, %step.b{l})")
        new[l] = (f"%new.w{l}", f"%new.b{l}")
        if l > 0:
            bs = f"f32[{batch},{a}]"
            lines.append(f"  %gh{l - 1} = {bs} dot({g}, {w}), lhs_contracting_dims={{1}}, "
                         "rhs_contracting_dims={1}")
            lines.append(f"  %g{l - 1} = {bs} select(%gt{l - 1}, %gh{l - 1}, %zeros{l - 1})")
    outs = ", ".join(f"{new[l][0]}, {new[l][1]}" for l in range(n))
    lines.append(f"  ROOT %out = ({result}) tuple({outs}, %loss)")
    lines.append("}")
    header = """HloModule jit_mlp_train_step

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

"""
    return header + "\n".join(lines) + "\n"


def mlp_numpy(params, x, y, lr):
    n = len(params) // 2
    ws, bs = params[0::2], params[1::2]
    hs, zs = [x], []
    for l in range(n):
        z = hs[-1] @ ws[l] + bs[l]
        zs.append(z)
        hs.append(np.maximum(z, np.float32(0)) if l < n - 1 else z)
    diff = zs[-1] - y
    loss = np.sum(diff * diff) / np.float32(diff.size)
    g = diff * np.float32(2.0 / diff.size)
    new = [None] * (2 * n)
    for l in reversed(range(n)):
        new[2 * l] = ws[l] - (hs[l].T @ g) * np.float32(lr)
        new[2 * l + 1] = bs[l] - np.sum(g, axis=0) * np.float32(lr)
        if l > 0:
            g = np.where(zs[l - 1] > 0, g @ ws[l].T, np.float32(0))
    return new + [loss]


def mlp_case(batch=128, sizes=(512, 512, 512, 512, 10), lr=0.01):
    rng = np.random.default_rng(1)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append((rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32))
        params.append((rng.normal(size=(b,)) * 0.1).astype(np.float32))
    x = rng.normal(size=(batch, sizes[0])).astype(np.float32)
    y = rng.normal(size=(batch, sizes[-1])).astype(np.float32)
    text = mlp_text(batch, list(sizes), lr)
    return text, params + [x, y], lambda: mlp_numpy(params, x, y, lr)


# ---- while loop -------------------------------------------------------------------------
WHILE = """HloModule while_1000

%body (s: (s32[], f32[@N@], f32[@N@])) -> (s32[], f32[@N@], f32[@N@]) {
  %s = (s32[], f32[@N@], f32[@N@]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[@N@] get-tuple-element(%s), index=1
  %v = f32[@N@] get-tuple-element(%s), index=2
  %one = s32[] constant(1)
  %i.next = s32[] add(%i, %one)
  %damp = f32[] constant(0.99)
  %damp.b = f32[@N@] broadcast(%damp), dimensions={}
  %k = f32[] constant(0.01)
  %k.b = f32[@N@] broadcast(%k), dimensions={}
  %dt = f32[] constant(0.1)
  %dt.b = f32[@N@] broadcast(%dt), dimensions={}
  %v.d = f32[@N@] multiply(%v, %damp.b)
  %f = f32[@N@] multiply(%x, %k.b)
  %v.next = f32[@N@] subtract(%v.d, %f)
  %dx = f32[@N@] multiply(%v.next, %dt.b)
  %x.next = f32[@N@] add(%x, %dx)
  ROOT %t = (s32[], f32[@N@], f32[@N@]) tuple(%i.next, %x.next, %v.next)
}

%cond (s: (s32[], f32[@N@], f32[@N@])) -> pred[] {
  %s = (s32[], f32[@N@], f32[@N@]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(1000)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[@N@], v: f32[@N@]) -> (f32[@N@], f32[@N@]) {
  %x = f32[@N@] parameter(0)
  %v = f32[@N@] parameter(1)
  %zero = s32[] constant(0)
  %init = (s32[], f32[@N@], f32[@N@]) tuple(%zero, %x, %v)
  %w = (s32[], f32[@N@], f32[@N@]) while(%init), condition=%cond, body=%body
  %x.out = f32[@N@] get-tuple-element(%w), index=1
  %v.out = f32[@N@] get-tuple-element(%w), index=2
  ROOT %out = (f32[@N@], f32[@N@]) tuple(%x.out, %v.out)
}
"""


def while_numpy(x, v):
    damp, k, dt = np.float32(0.99), np.float32(0.01), np.float32(0.1)
    i = 0
    while i < 1000:
        v = v * damp - x * k
        x = x + v * dt
        i += 1
    return [x, v]


def while_case(n=1024):
    rng = np.random.default_rng(2)
    x = rng.normal(size=n).astype(np.float32)
    v = rng.normal(size=n).astype(np.float32)
    return WHILE.replace("@N@", str(n)), [x, v], lambda: while_numpy(x, v)


# ---- driver -----------------------------------------------------------------------------
CASES = {
    "softmax 1024x1024": softmax_case,
    "mlp 4-layer train step": mlp_case,
    "while 1000 iterations": while_case,
}


def _time_pair(fa, fb, repeat):
    """Interleaved timings (ms) of two functions: the machine load hits both alike."""
    ta, tb = [], []
    for _ in range(repeat):
        for fn, out in ((fa, ta), (fb, tb)):
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e3)
    return ta, tb


def run_case(name, make, repeat):
    text, args, numpy_fn = make()
    module = parse_hlo(text, name)
    exe = Interpreter(module)
    t = time.perf_counter()
    got = exe.run(args)
    first = (time.perf_counter() - t) * 1e3
    want = numpy_fn()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=2e-4, atol=2e-5,
                                   err_msg=f"{name}: interpreter and numpy disagree")
    ti, tn = _time_pair(lambda: exe.run(args), numpy_fn, repeat)
    return dict(name=name, first=first, interp=min(ti), numpy=min(tn),
                interp_med=statistics.median(ti), numpy_med=statistics.median(tn),
                ratio=min(ti) / min(tn), ratio_med=statistics.median(ti) /
                statistics.median(tn))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--profile", default=None, help="cProfile one case (name prefix)")
    opts = ap.parse_args(argv)
    if opts.profile:
        import cProfile
        import pstats
        name = next(n for n in CASES if n.startswith(opts.profile))
        text, args, _ = CASES[name]()
        exe = Interpreter(parse_hlo(text, name))
        exe.run(args)
        cProfile.runctx("for _ in range(5): exe.run(args)", globals(), locals(), "/tmp/ib.prof")
        pstats.Stats("/tmp/ib.prof").sort_stats("tottime").print_stats(20)
        return
    print(f"{'workload':26} {'first ms':>9} {'interp ms':>10} {'numpy ms':>9} {'ratio':>6} "
          f"{'(median)':>9}")
    for name, make in CASES.items():
        r = run_case(name, make, opts.repeat)
        flag = "" if r["ratio"] <= 2.0 else "  (above the 2x target)"
        print(f"{r['name']:26} {r['first']:9.2f} {r['interp']:10.2f} {r['numpy']:9.2f} "
              f"{r['ratio']:6.2f} {r['ratio_med']:9.2f}{flag}")
    print("ms: best of --repeat interleaved runs (first: the first run, planning included);")
    print("ratio = interpreter / hand-written numpy (best of; median in parentheses column)")


if __name__ == "__main__":
    main()
