"""The ``gpu`` pipeline on a big module: prints the total time and the slowest passes
(figures only, never asserted anywhere).

The module repeats a real transformer-style block (layer norm, matmul, bias, tanh-GELU,
residual add; XLA's JAX lowering of it) until it has about ``--instructions`` (default
10k) instructions, each block with its own weights, so the GPU passes see realistic work:
cuBLAS rewrites, reductions for the tree / layout passes, long elementwise chains for
fusion, and the kInput/kLoop decisions in between.

    .venv/bin/python benchmarks/gpu_pipeline_bench.py [--instructions 10000] [--sizes 1000,10000]
        [--no-priority] [--top 8] [--repeat 1] [--profile [N]]

Per pass: CPU seconds (time.process_time from the pass's start to the next one's) and
wall seconds, each summed over the pass's runs (fixpoints run passes repeatedly) and the
minimum over ``--repeat`` runs.  ``--profile N`` runs once more under cProfile and
prints the N functions with the most own time and the N with the most cumulative time.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hlo_opt.api import parse_hlo  # noqa: E402
from hlo_opt.flags import DebugOptions  # noqa: E402

ROWS, COLS = 2048, 1024

BLOCK = """\
  %x{i}.red = f32[{r}]{{0}} reduce(f32[{r},{c}]{{1,0}} %x{i}, f32[] %zero), dimensions={{1}}, to_apply=%add
  %x{i}.mean = f32[{r}]{{0}} divide(f32[{r}]{{0}} %x{i}.red, f32[{r}]{{0}} %n_b)
  %x{i}.meanb = f32[{r},{c}]{{1,0}} broadcast(f32[{r}]{{0}} %x{i}.mean), dimensions={{0}}
  %x{i}.cent = f32[{r},{c}]{{1,0}} subtract(f32[{r},{c}]{{1,0}} %x{i}, f32[{r},{c}]{{1,0}} %x{i}.meanb)
  %x{i}.sq = f32[{r},{c}]{{1,0}} multiply(f32[{r},{c}]{{1,0}} %x{i}.cent, f32[{r},{c}]{{1,0}} %x{i}.cent)
  %x{i}.var = f32[{r}]{{0}} reduce(f32[{r},{c}]{{1,0}} %x{i}.sq, f32[] %zero), dimensions={{1}}, to_apply=%add
  %x{i}.varn = f32[{r}]{{0}} divide(f32[{r}]{{0}} %x{i}.var, f32[{r}]{{0}} %n_b)
  %x{i}.vare = f32[{r}]{{0}} add(f32[{r}]{{0}} %x{i}.varn, f32[{r}]{{0}} %eps_b)
  %x{i}.rs = f32[{r}]{{0}} rsqrt(f32[{r}]{{0}} %x{i}.vare)
  %x{i}.rsb = f32[{r},{c}]{{1,0}} broadcast(f32[{r}]{{0}} %x{i}.rs), dimensions={{0}}
  %x{i}.norm = f32[{r},{c}]{{1,0}} multiply(f32[{r},{c}]{{1,0}} %x{i}.cent, f32[{r},{c}]{{1,0}} %x{i}.rsb)
  %w{i} = f32[{c},{c}]{{1,0}} parameter({pw})
  %b{i} = f32[{c}]{{0}} parameter({pb})
  %x{i}.mm = f32[{r},{c}]{{1,0}} dot(f32[{r},{c}]{{1,0}} %x{i}.norm, f32[{c},{c}]{{1,0}} %w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  %x{i}.bb = f32[{r},{c}]{{1,0}} broadcast(f32[{c}]{{0}} %b{i}), dimensions={{1}}
  %x{i}.h = f32[{r},{c}]{{1,0}} add(f32[{r},{c}]{{1,0}} %x{i}.mm, f32[{r},{c}]{{1,0}} %x{i}.bb)
  %x{i}.h2 = f32[{r},{c}]{{1,0}} multiply(f32[{r},{c}]{{1,0}} %x{i}.h, f32[{r},{c}]{{1,0}} %x{i}.h)
  %x{i}.h3 = f32[{r},{c}]{{1,0}} multiply(f32[{r},{c}]{{1,0}} %x{i}.h2, f32[{r},{c}]{{1,0}} %x{i}.h)
  %x{i}.k1 = f32[{r},{c}]{{1,0}} broadcast(f32[] %c044), dimensions={{}}
  %x{i}.t1 = f32[{r},{c}]{{1,0}} multiply(f32[{r},{c}]{{1,0}} %x{i}.h3, f32[{r},{c}]{{1,0}} %x{i}.k1)
  %x{i}.t2 = f32[{r},{c}]{{1,0}} add(f32[{r},{c}]{{1,0}} %x{i}.h, f32[{r},{c}]{{1,0}} %x{i}.t1)
  %x{i}.k2 = f32[{r},{c}]{{1,0}} broadcast(f32[] %c079), dimensions={{}}
  %x{i}.t3 = f32[{r},{c}]{{1,0}} multiply(f32[{r},{c}]{{1,0}} %x{i}.t2, f32[{r},{c}]{{1,0}} %x{i}.k2)
  %x{i}.t4 = f32[{r},{c}]{{1,0}} tanh(f32[{r},{c}]{{1,0}} %x{i}.t3)
  %x{i}.k3 = f32[{r},{c}]{{1,0}} broadcast(f32[] %one), dimensions={{}}
  %x{i}.t5 = f32[{r},{c}]{{1,0}} add(f32[{r},{c}]{{1,0}} %x{i}.t4, f32[{r},{c}]{{1,0}} %x{i}.k3)
  %x{i}.k4 = f32[{r},{c}]{{1,0}} broadcast(f32[] %half), dimensions={{}}
  %x{i}.t6 = f32[{r},{c}]{{1,0}} multiply(f32[{r},{c}]{{1,0}} %x{i}.t5, f32[{r},{c}]{{1,0}} %x{i}.k4)
  %x{i}.g = f32[{r},{c}]{{1,0}} multiply(f32[{r},{c}]{{1,0}} %x{i}.h, f32[{r},{c}]{{1,0}} %x{i}.t6)
  %x{j} = f32[{r},{c}]{{1,0}} add(f32[{r},{c}]{{1,0}} %x{i}, f32[{r},{c}]{{1,0}} %x{i}.g)
"""
BLOCK_INSTRUCTIONS = BLOCK.count("\n")


def make_module(instructions: int) -> str:
    blocks = max(1, (instructions - 12) // BLOCK_INSTRUCTIONS)
    r, c = ROWS, COLS
    body = [f"  %x0 = f32[{r},{c}]{{1,0}} parameter(0)",
            "  %zero = f32[] constant(0)",
            f"  %n = f32[] constant({c})",
            f"  %n_b = f32[{r}]{{0}} broadcast(f32[] %n), dimensions={{}}",
            "  %eps = f32[] constant(1e-05)",
            f"  %eps_b = f32[{r}]{{0}} broadcast(f32[] %eps), dimensions={{}}",
            "  %c044 = f32[] constant(0.044715)",
            "  %c079 = f32[] constant(0.797884583)",
            "  %one = f32[] constant(1)",
            "  %half = f32[] constant(0.5)"]
    params = [f"x0: f32[{r},{c}]"]
    for i in range(blocks):
        pw, pb = 1 + 2 * i, 2 + 2 * i
        params += [f"w{i}: f32[{c},{c}]", f"b{i}: f32[{c}]"]
        body.append(BLOCK.format(i=i, j=i + 1, r=r, c=c, pw=pw, pb=pb).rstrip("\n"))
    body.append(f"  ROOT %out = f32[{r},{c}]{{1,0}} copy(f32[{r},{c}]{{1,0}} %x{blocks})")
    return ("HloModule gpu_bench\n\n%add (a: f32[], b: f32[]) -> f32[] {\n"
            "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
            "  ROOT %s = f32[] add(f32[] %a, f32[] %b)\n}\n\n"
            f"ENTRY %main ({', '.join(params)}) -> f32[{r},{c}] {{\n" + "\n".join(body) + "\n}\n")


class _GcClock:
    """Seconds spent in the cyclic garbage collector while active (gc.callbacks)."""

    def __init__(self):
        self.seconds = 0.0
        self._t0 = 0.0

    def __call__(self, phase, info) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t0

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self)


class _CpuPerPass:
    """CPU seconds per leaf pass, from the runner's progress events (sent before each
    pass): a pass's time runs to the next pass's start (or the end of the run)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._open: tuple[str, float] | None = None

    def __call__(self, event) -> None:
        now = time.process_time()
        self._close(now)
        self._open = ("/".join(event.pipeline_path) + "/" + event.pass_name, now)

    def _close(self, now: float) -> None:
        if self._open is not None:
            key, t0 = self._open
            self.seconds[key] = self.seconds.get(key, 0.0) + now - t0
            self._open = None

    def finish(self) -> None:
        self._close(time.process_time())


def run_once(text: str, priority: bool, profiler=None):
    """One ``gpu`` run: (module before, module after, stats, wall s, CPU s, GC s, CPU s
    per pass)."""
    from hlo_opt.passes_api import optimize
    module = parse_hlo(text, "gpu_bench")
    n_before = module.instruction_count()
    options = DebugOptions(xla_gpu_enable_priority_fusion=priority)
    captured = {}
    per_pass = _CpuPerPass()
    gc.collect()
    with _GcClock() as clock:
        t0 = time.perf_counter()
        c0 = time.process_time()
        if profiler is not None:
            profiler.enable()
        optimize(module, options, pipeline="gpu", on_stats=lambda s: captured.setdefault("s", s),
                 verifier=None, progress=per_pass)
        if profiler is not None:
            profiler.disable()
        per_pass.finish()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
    return n_before, module, captured["s"], wall, cpu, clock.seconds, per_pass.seconds


def run(instructions: int, priority: bool, top: int, repeat: int = 1,
        profile: int = 0) -> None:
    """Runs ``repeat`` times and reports the fastest run (total and per pass: minimum over
    the runs), a loaded machine's noise being one-sided."""
    text = make_module(instructions)
    best = None
    per_pass: dict[str, float] = {}
    per_pass_cpu: dict[str, float] = {}
    for _ in range(max(repeat, 1)):
        n_before, module, stats, wall, cpu, gc_s, cpu_by_pass = run_once(text, priority)
        if best is None or cpu < best[2]:
            best = (wall, gc_s, cpu)
        this: dict[str, float] = {}
        for rec in stats.records:
            key = f"{rec.pipeline}/{rec.pass_name}"
            this[key] = this.get(key, 0.0) + rec.wall_ms / 1000.0
        for key, sec in this.items():
            per_pass[key] = min(per_pass.get(key, sec), sec)
        for path, sec in cpu_by_pass.items():
            key = _short_key(path)
            per_pass_cpu[key] = min(per_pass_cpu.get(key, sec), sec)
    wall, gc_s, cpu = best
    kernels = sum(1 for i in module.entry.instructions
                  if i.opcode in ("fusion", "custom-call", "reduce", "dot"))
    print(f"gpu pipeline ({'priority-fusion' if priority else 'classic fusion'}): "
          f"{n_before} instructions -> {module.instruction_count()} "
          f"({kernels} kernels in the entry): {wall:.2f} s wall, {cpu:.2f} s CPU "
          f"({cpu / n_before * 1e6:.0f} us CPU per instruction), {gc_s:.2f} s of it in "
          f"the garbage collector")
    print("       CPU s      wall s  pass")
    for key, sec in sorted(per_pass_cpu.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {sec:10.3f}  {per_pass.get(key, float('nan')):10.3f}  {key}")
    if profile:
        import cProfile
        import pstats
        profiler = cProfile.Profile()
        run_once(text, priority, profiler)
        stats = pstats.Stats(profiler)
        print(f"\n-- cProfile of one more run: the {profile} functions with the most own "
              "time, then cumulative --")
        stats.sort_stats("tottime").print_stats(profile)
        stats.sort_stats("cumulative").print_stats(profile)


def _short_key(path: str) -> str:
    """'gpu/fusion/fusion/priority-fusion' (runner path + pass) -> the stats' key,
    'fusion/priority-fusion' minus the top pipeline, as the wall-time records name it."""
    parts = path.split("/")
    return "/".join(parts[:-2] + parts[-1:]) if len(parts) >= 3 and parts[-2] == parts[-3] \
        else "/".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instructions", type=int, default=10_000)
    ap.add_argument("--sizes", default=None,
                    help="comma list of module sizes (overrides --instructions)")
    ap.add_argument("--no-priority", action="store_true",
                    help="classic fusion (--xla_gpu_enable_priority_fusion=false)")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per size; the fastest is reported")
    ap.add_argument("--profile", type=int, nargs="?", const=30, default=0, metavar="N",
                    help="one more run under cProfile: print its top N functions")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [args.instructions]
    for n in sizes:
        run(n, not args.no_priority, args.top, args.repeat, args.profile)


if __name__ == "__main__":
    main()
