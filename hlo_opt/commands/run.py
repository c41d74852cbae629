"""`hlo-opt run INPUT`: execute a module (optionally after passes), like XLA's
run_hlo_module.

    hlo-opt run m.hlo --random-inputs --seed 1 --print-literals
    hlo-opt run m.hlo --inputs in.npz --outputs out.npz
    hlo-opt run m.hlo --passes algsimp,dce --compare unoptimized
    hlo-opt run m.hlo --pipeline optimization --backend cpu --compare interpreter

``--compare X`` runs the *unoptimized* input module on X (``unoptimized`` = the same
backend as ``--backend``) on the same inputs and checks every output leaf against it
(``--abs_error_bound`` / ``--rel_error_bound``, XLA's rule: an element fails when both are
exceeded; integers and preds must match exactly); the exit code is 1 when any fails.
"""
from __future__ import annotations

import contextlib
import io
import os
import signal
import time

import click

from ..errors import HloError


@click.command("run", context_settings={"ignore_unknown_options": True,
                                        "allow_extra_args": True})
@click.argument("input")
@click.option("--pipeline", default=None, help="Run this named pipeline before executing.")
@click.option("--passes", default=None, help="Run these passes (comma list) before executing.")
@click.option("--backend", default="interpreter", show_default=True,
              help="Backend that executes the module: interpreter (numpy, the oracle), "
                   "cpu (llvmlite; runs the cpu pipeline first, as XLA's run_hlo_module "
                   "--platform=cpu does), cuda (NVRTC kernels on the GPU; runs the gpu "
                   "pipeline first) or cuda-sim (the same kernels on the CPU).")
@click.option("--run_test_hlo_passes", "--run-test-hlo-passes", "run_test_hlo_passes",
              default=True, show_default=True, type=click.BOOL,
              help="Run the backend's compiler pipeline before compiling (cpu: `cpu`); "
                   "false compiles the module as given.")
@click.option("--no-cache", "no_cache", is_flag=True,
              help="Do not read or write the compiled-object disk cache.")
@click.option("--inputs", "inputs_path", default=None,
              help="npz file with arg0..argN-1 (the entry parameters by number).")
@click.option("--random-inputs", is_flag=True,
              help="Use seeded random inputs (the default when --inputs is not given).")
@click.option("--seed", default=42, show_default=True, type=click.IntRange(0, 2**63 - 1),
              help="Seed of the random inputs (iteration i uses seed+i).")
@click.option("--outputs", "outputs_path", default=None,
              help="Write out0..outK-1 (the result leaves of the last run) to this npz "
                   "file.")
@click.option("--compare", "compare_with", default=None,
              help="Reference: a backend name, or 'unoptimized' (same backend, no passes).")
@click.option("--abs_error_bound", "--abs-error-bound", "abs_bound", default=1e-3,
              show_default=True, type=float, help="Absolute error bound for --compare.")
@click.option("--rel_error_bound", "--rel-error-bound", "rel_bound", default=1e-3,
              show_default=True, type=float, help="Relative error bound for --compare.")
@click.option("--iterations", default=1, show_default=True, type=click.IntRange(min=1),
              help="Runs; each gets new random inputs (same npz inputs every run).")
@click.option("--print-literals", is_flag=True, help="Print the inputs and outputs.")
@click.option("--raw-bits", is_flag=True,
              help="Write bf16/f8 outputs as their bit patterns instead of float32.")
@click.option("--split-input-file", is_flag=True, help="Split the input on '// -----' lines.")
@click.option("--profile", is_flag=True,
              help="cuda/cuda-sim: time every kernel, library call and copy (named after "
                   "its instruction) over the runs and print them sorted, with shares.")
@click.option("--json", "as_json", is_flag=True, help="With --profile: print JSON.")
@click.option("--timeout", "timeout_s", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Stop with an error after this many seconds (Ctrl-C stops it at any time).")
@click.pass_context
def command(ctx, input, pipeline, passes, backend, run_test_hlo_passes, no_cache,
            inputs_path, random_inputs, seed, outputs_path, compare_with, abs_bound,
            rel_bound, iterations, print_literals, raw_bits, split_input_file, profile,
            as_json, timeout_s):
    """Execute INPUT (a path or '-') and report outputs, timings and comparisons."""
    flag_tokens = list(ctx.args)
    bad = [a for a in flag_tokens if not a.startswith("--xla_")]
    if bad:
        raise click.UsageError(f"unexpected argument(s): {' '.join(bad)}")
    from ..api import load_modules_from_text, read_input
    from ..flags import DebugOptions, parse_flag_tokens
    # the optimize command's parser and rules: unknown flags and bad values are errors here too
    options = DebugOptions.from_sources(parse_flag_tokens(flag_tokens, "command line"))
    if inputs_path and random_inputs:
        raise click.UsageError("--inputs and --random-inputs cannot be used together")
    if passes and pipeline:
        raise click.UsageError("--passes and --pipeline cannot be used together")
    if backend == "cpu" and run_test_hlo_passes and not passes and not pipeline:
        pipeline = "cpu"
    if backend in ("cuda", "cuda-sim") and run_test_hlo_passes and not passes and not pipeline:
        pipeline = "gpu"
    if profile and backend not in ("cuda", "cuda-sim"):
        raise click.UsageError("--profile needs --backend cuda or cuda-sim")
    backend_options = {}
    if backend != "interpreter":
        backend_options = {"debug_options": options, "cache": not no_cache}
    text, filename = read_input(input)
    modules = load_modules_from_text(text, filename, split_input_file)
    if len(modules) > 1 and (inputs_path or outputs_path):
        raise click.UsageError("--inputs/--outputs need a single module")
    failed_runs = total_runs = 0
    with _time_limit(timeout_s):
        for module in modules:
            f, t = _run_module(module, flag_tokens, options, pipeline, passes, backend,
                               inputs_path, seed, outputs_path, compare_with, abs_bound,
                               rel_bound, iterations, print_literals, raw_bits,
                               len(modules) > 1, backend_options,
                               (as_json,) if profile else None)
            failed_runs += f
            total_runs += t
    if compare_with:
        if failed_runs:
            click.secho(f"{failed_runs}/{total_runs} runs failed", fg="red", err=True)
            raise click.exceptions.Exit(1)
        click.echo(f"{total_runs}/{total_runs} runs passed")


class _TimedOut(BaseException):
    """Raised by the timer (a BaseException: no handler in the interpreter swallows it)."""


@contextlib.contextmanager
def _time_limit(seconds):
    if not seconds or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise _TimedOut()

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _TimedOut:
        raise HloError(f"run: error: stopped after --timeout={seconds:g} s (the module "
                       "had not finished; a while loop that never ends?)") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _check_memory(module) -> None:
    """Inputs that cannot fit: a clear message instead of numpy's MemoryError."""
    need = sum(p.shape.byte_size() for p in module.entry.parameters if p is not None)
    try:
        have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    if need > have:
        raise HloError(f"run: error: the inputs of {module.name} need {need / 2**30:.1f} GiB; "
                       f"this machine has {have / 2**30:.1f} GiB of memory")


def _run_module(module, flag_tokens, options, pipeline, passes, backend, inputs_path, seed,
                outputs_path, compare_with, abs_bound, rel_bound, iterations, print_literals,
                raw_bits, label, backend_options=None, profile=None):
    import numpy as np
    from ..backends import compile as compile_module
    from ..backends.interpreter.literals import (arguments_from_npz, compare_results,
                                                 load_npz, output_arrays, random_arguments,
                                                 result_shapes)
    reference_module = module
    _check_memory(module)
    backend_options = dict(backend_options or {})
    if (passes or pipeline) and backend != "interpreter":
        # the backend runs the pipeline itself, so that a disk-cache hit skips it too
        backend_options["prepare"] = lambda m: _optimize(m.clone(), options, passes,
                                                         pipeline)
        backend_options["prepare_key"] = f"passes={passes};pipeline={pipeline};" + \
            " ".join(flag_tokens) + ";" + _passes_fingerprint()
    elif passes or pipeline:
        module = _optimize(module.clone(), options, passes, pipeline)
    if label:
        click.echo(f"== module {module.name}")
    start = time.perf_counter()
    test = compile_module(module, backend, **backend_options)
    module = getattr(test, "module", module)
    backend_options.pop("prepare", None)
    backend_options.pop("prepare_key", None)
    if backend != "interpreter":
        hit = " (cache hit)" if getattr(test, "cache_hit", False) else ""
        click.echo(f"compile: {backend}: {(time.perf_counter() - start) * 1e3:.1f} ms{hit}")
    reference = None
    ref_name = None
    if compare_with:
        ref_name = backend if compare_with == "unoptimized" else compare_with
        reference = compile_module(reference_module, ref_name,
                                   **(backend_options if ref_name == backend else {}))
        ref_name = f"{ref_name} (unoptimized)"
    fixed_args = None
    if inputs_path:
        fixed_args = arguments_from_npz(module, load_npz(inputs_path), inputs_path)
    shapes = result_shapes(module)
    failed = 0
    last = None
    for it in range(iterations):
        args = fixed_args if fixed_args is not None else random_arguments(module, seed + it)
        if print_literals:
            _print_values("input", args, [p.shape for p in module.entry.parameters])
        start = time.perf_counter()
        result = test.run(args)
        elapsed = (time.perf_counter() - start) * 1e3
        click.echo(f"run {it}: {backend}: {elapsed:.3f} ms")
        if print_literals:
            _print_values("output", result, shapes)
        last = result
        if reference is not None:
            expected = reference.run(args)
            rows = compare_results(result, expected, shapes, abs_bound, rel_bound)
            _print_table(rows, backend, ref_name, it)
            if not all(r.ok for r in rows):
                failed += 1
    if outputs_path and last is not None:
        arrays = output_arrays(last, shapes, raw_bits)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # to the path as given (np.savez(path) appends .npz)
        from ..fileutil import write_output
        write_output(outputs_path, buffer.getvalue())
        click.echo(f"wrote {len(arrays)} output(s) to {outputs_path}")
    if profile is not None:
        args = fixed_args if fixed_args is not None else random_arguments(module, seed)
        _print_profile(test.profile(args, iterations), profile[0], backend)
    return failed, iterations


def _print_profile(rows, as_json, backend):
    """The per-thunk table (like the seed's kernel table): name, kind, mean time, share."""
    if as_json:
        import json
        click.echo(json.dumps({"backend": backend, "thunks": rows}, indent=1))
        return
    from rich.console import Console
    from rich.table import Table
    total = sum(r["time_us"] * r["calls"] for r in rows)
    table = Table(title=f"{backend} profile: {total:.1f} us in all")
    for col in ("name", "kind", "time (us)", "calls", "share"):
        table.add_column(col, justify="left" if col in ("name", "kind") else "right")
    for r in rows:
        table.add_row(r["name"], r["kind"], f"{r['time_us']:.1f}", str(r["calls"]),
                      f"{100 * r['share']:.1f}%")
    Console(width=120).print(table)


def _passes_fingerprint() -> str:
    """The pass library's source, so that a cached compile is never reused after a pass
    changes."""
    import os
    import passes as pass_library
    from ..fileutil import source_fingerprint
    return source_fingerprint(os.path.dirname(pass_library.__file__))


def _optimize(module, options, passes, pipeline):
    import importlib
    try:
        passes_api = importlib.import_module("hlo_opt.passes_api")
    except ModuleNotFoundError as e:
        if e.name in ("hlo_opt.passes_api", "passes"):
            raise HloError("passes not available: the pass library (hlo_opt.passes_api) "
                           "is not installed") from None
        raise
    return passes_api.optimize(module, options, passes=passes, pipeline=pipeline)


def _print_values(kind, values, shapes):
    import numpy as np
    for i, (v, s) in enumerate(zip(values, shapes)):
        tag = "arg" if kind == "input" else "out"
        click.echo(f"{kind} {tag}{i}: {s.to_text(False)}")
        if isinstance(v, tuple):
            click.echo(repr(v))
        elif s.is_array():
            a = np.asarray(v)
            if a.dtype.kind == "V":  # bf16/f8: print the values, not raw records
                a = a.astype(np.float32)
            click.echo(np.array2string(a, threshold=1000, max_line_width=100))


def _print_table(rows, backend, ref_name, iteration):
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"run {iteration}: {backend} vs {ref_name}")
    for col in ("output", "shape", "max abs error", "max rel error", "result"):
        table.add_column(col)
    for r in rows:
        verdict = "[green]PASS[/green]" if r.ok else \
            f"[red]FAIL[/red] ({r.mismatches} mismatched{'; ' + r.note if r.note else ''})"
        table.add_row(f"out{r.index}", r.shape, f"{r.max_abs:.3g}", f"{r.max_rel:.3g}",
                      verdict)
    Console(width=120).print(table)
