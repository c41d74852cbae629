"""`hlo-opt ablate INPUT --pipeline NAME --backend B`: which pass matters.

    hlo-opt ablate m.hlo --pipeline gpu --backend cpu --repeat 5 --json sweep.json
    hlo-opt ablate m.hlo --pipeline gpu --per-occurrence --jobs 2 --plot slowdown.svg
    hlo-opt ablate m.hlo --pipeline gpu --resume sweep.json        (finish a sweep)
    hlo-opt ablate m.hlo --pipeline gpu --ray local                (rows as Ray tasks)

A baseline, then one row per pass with that pass disabled; the table is sorted by
slowdown (* > 1%, ** > 5%).  The library is :mod:`hlo_opt.triage`.
"""
from __future__ import annotations

import sys
import time

import click

from ..api import read_input


@click.command("ablate", context_settings={"ignore_unknown_options": True,
                                           "allow_extra_args": True})
@click.argument("input")
@click.option("--pipeline", default=None, help="The named pipeline to ablate.")
@click.option("--passes", default=None, help="Or: these passes (comma list), once each.")
@click.option("--backend", default="interpreter", show_default=True,
              help="Backend that compiles and runs every variant.")
@click.option("--per-occurrence", is_flag=True,
              help="One row per pipeline/name:N occurrence instead of per pass name.")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1),
              help="Timed runs per variant (median and spread are reported).")
@click.option("--warmup", default=1, show_default=True, type=click.IntRange(min=0),
              help="Untimed runs before the timed ones.")
@click.option("--seed", default=42, show_default=True, type=int,
              help="Seed of the random inputs (the same for every variant).")
@click.option("--abs_error_bound", "--abs-error-bound", "abs_bound", default=1e-3,
              show_default=True, type=float, help="wrong_result: absolute error bound.")
@click.option("--rel_error_bound", "--rel-error-bound", "rel_bound", default=1e-3,
              show_default=True, type=float, help="wrong_result: relative error bound.")
@click.option("--profile", is_flag=True,
              help="Time kernels (backends with profile data, e.g. cuda) not whole runs.")
@click.option("--paired", is_flag=True,
              help="Time the baseline beside every row (runs alternate) and compare with "
                   "that: robust to load that changes during the sweep.")
@click.option("--json", "json_path", default=None,
              help="Write the report as JSON (rewritten after every row).")
@click.option("--resume", "resume_path", default=None,
              help="Continue the sweep in this JSON report: run only its missing rows.")
@click.option("--plot", "plot_path", default=None,
              help="Draw the slowdowns as a bar chart (.png, .svg or .pdf; matplotlib).")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1),
              help="Rows in parallel over N local processes (timed runs take turns).")
@click.option("--ray", "ray_address", default=None,
              help="Rows as Ray tasks: 'local' (a private loopback instance), 'auto' "
                   "(the running cluster) or a cluster address.")
@click.option("--top", default=0, type=click.IntRange(min=0),
              help="Show only the N slowest rows (0: all).")
@click.pass_context
def command(ctx, input, pipeline, passes, backend, per_occurrence, repeat, warmup, seed,
            abs_bound, rel_bound, profile, paired, json_path, resume_path, plot_path, jobs,
            ray_address, top):
    """Disable each pass of a pipeline in turn; time, count kernels, check results
    (--xla_* flags apply to every variant)."""
    from ..flags import DebugOptions, parse_flag_tokens
    from ..passes_api import PipelineFactory
    from ..triage.ablate import AblateSettings, Sweep
    from ..triage.executors import make_executor
    from ..triage.report import load_document, write_document
    flag_tokens = list(ctx.args)
    bad = [a for a in flag_tokens if not a.startswith("--xla_")]
    if bad:
        raise click.UsageError(f"unexpected argument(s): {' '.join(bad)}")
    if (passes is None) == (pipeline is None):
        raise click.UsageError("give one of --pipeline NAME or --passes a,b")
    options = DebugOptions.from_sources(parse_flag_tokens(flag_tokens, "command line"))
    factory = PipelineFactory(passes=passes, pipeline=pipeline)
    if plot_path:
        from ..triage.plot import check_plot_path
        check_plot_path(plot_path)
    text, filename = read_input(input)
    resume = load_document(resume_path) if resume_path else None
    out_path = json_path or resume_path
    settings = AblateSettings(backend=backend, repeat=repeat, warmup=warmup, seed=seed,
                              abs_bound=abs_bound, rel_bound=rel_bound, profile=profile,
                              per_occurrence=per_occurrence, paired=paired)
    err = _stderr()
    err.print(f"[dim]ablate: baseline of {filename} through {factory.label} on "
              f"{backend}...[/dim]")
    sweep = Sweep(text, filename, factory, options, settings, resume=resume)
    executor = make_executor(jobs, ray_address)
    if out_path:
        write_document(out_path, sweep.document)
    start = time.perf_counter()
    try:
        with _progress(sys.stderr.isatty(), sweep.total, sweep.done) as advance:
            def on_row(row):
                if out_path:
                    write_document(out_path, sweep.document)
                advance(row)
            document = sweep.run(executor, on_row)
    except KeyboardInterrupt:
        where = f"; `--resume {out_path}` continues" if out_path else \
            " (give --json FILE to make a sweep resumable)"
        err.print(f"[red]interrupted: {sweep.done}/{sweep.total} rows done{where}[/red]")
        raise click.exceptions.Exit(130) from None
    wall = time.perf_counter() - start
    if out_path:
        write_document(out_path, document)
    from ._ablate_table import print_table
    print_table(document, sweep.invocation_counts(), executor.description, wall, top)
    if plot_path:
        from ..triage.plot import plot_slowdowns
        plot_slowdowns(document, plot_path)
        err.print(f"wrote {plot_path}")
    if out_path:
        err.print(f"wrote {out_path}")


def _stderr():
    from rich.console import Console
    return Console(stderr=True)


class _progress:
    """A progress bar on stderr when it is a terminal; yields ``advance(row)``."""

    def __init__(self, enabled: bool, total: int, done: int):
        self.enabled, self.total, self.done = enabled, total, done
        self.bar = None

    def __enter__(self):
        if not self.enabled:
            return lambda row: None
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        task = self.bar.add_task("rows", total=self.total, completed=self.done)
        self.bar.__enter__()

        def advance(row):
            name = row["occurrence"] or row["pass"]
            self.bar.update(task, advance=1, description=f"{name}: {row['status']}")
        return advance

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False

