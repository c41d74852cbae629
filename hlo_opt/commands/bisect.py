"""`hlo-opt bisect INPUT (--pipeline NAME | --passes a,b) --backend B`: which pass broke it.

    hlo-opt bisect m.hlo --pipeline gpu --backend cpu
    hlo-opt bisect m.hlo --passes algsimp,test-only-miscompile,dce -o repro.hlo

Finds the first ``pipeline/name:N`` pass occurrence after which the verifier fails, the
backend fails, or the outputs leave the unoptimized module's (error bounds as
``run --compare``); then, for passes that take ``--xla_fuel``, the first bad rewrite
inside it, its structural diff and a reproducer file.  Exit status: 1 culprit found,
0 nothing diverges, 2 error.  The library is :mod:`hlo_opt.triage.bisect`.
"""
from __future__ import annotations

import os

import click

from ..api import read_input
from ..errors import HloError

EXIT_FOUND, EXIT_CLEAN, EXIT_ERROR = 1, 0, 2


class _BisectCommand(click.Command):
    """Usage errors exit 2 here, as every other error of bisect does."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            e.show()
            raise click.exceptions.Exit(EXIT_ERROR) from None


@click.command("bisect", cls=_BisectCommand,
               context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("input")
@click.option("--pipeline", default=None, help="The named pipeline to search.")
@click.option("--passes", default=None, help="Or: these passes (comma list), once each.")
@click.option("--backend", default="interpreter", show_default=True,
              help="Backend that compiles and runs every candidate.")
@click.option("--reference", "reference_backend", default=None,
              help="Backend for the unoptimized module's outputs (default: --backend).")
@click.option("--seed", default=42, show_default=True, type=int,
              help="Seed of the random inputs.")
@click.option("--abs_error_bound", "--abs-error-bound", "abs_bound", default=1e-3,
              show_default=True, type=float, help="Absolute error bound.")
@click.option("--rel_error_bound", "--rel-error-bound", "rel_bound", default=1e-3,
              show_default=True, type=float, help="Relative error bound.")
@click.option("-o", "--reproducer", "repro_path", default=None,
              help="Reproducer file (default: INPUT's name with .repro.hlo, here).")
@click.option("--json", "json_path", default=None,
              help="Also write the verdict as JSON to this file.")
@click.pass_context
def command(ctx, input, pipeline, passes, backend, reference_backend, seed, abs_bound,
            rel_bound, repro_path, json_path):
    """Find the first pass occurrence, then the first rewrite, that breaks INPUT."""
    try:
        rc = _bisect(ctx, input, pipeline, passes, backend, reference_backend, seed,
                     abs_bound, rel_bound, repro_path, json_path)
    except HloError as e:
        click.secho(str(e), fg="red", err=True)
        raise click.exceptions.Exit(EXIT_ERROR) from None
    raise click.exceptions.Exit(rc)


def _bisect(ctx, input, pipeline, passes, backend, reference_backend, seed, abs_bound,
            rel_bound, repro_path, json_path) -> int:
    from ..fileutil import write_atomic
    from ..flags import DebugOptions, parse_flag_tokens
    from ..passes_api import PipelineFactory
    from ..triage.bisect import BisectSettings, bisect, reproducer_text, result_document
    flag_tokens = list(ctx.args)
    bad = [a for a in flag_tokens if not a.startswith("--xla_")]
    if bad:
        raise HloError(f"unexpected argument(s): {' '.join(bad)}")
    if (passes is None) == (pipeline is None):
        raise HloError("give one of --pipeline NAME or --passes a,b")
    options = DebugOptions.from_sources(parse_flag_tokens(flag_tokens, "command line"))
    factory = PipelineFactory(passes=passes, pipeline=pipeline)
    text, filename = read_input(input)
    settings = BisectSettings(backend=backend, reference_backend=reference_backend,
                              seed=seed, abs_bound=abs_bound, rel_bound=rel_bound)
    result = bisect(text, filename, factory, options, settings)
    echo = click.echo
    echo(f"bisect: {result.invocations} pass invocations of {factory.label} "
         f"({result.changed} changed the module); {result.checks} module(s) checked on "
         f"{backend}")
    if not result.found:
        click.secho("no pass occurrence breaks the module: the optimized module verifies, "
                    "compiles, runs and matches the unoptimized one", fg="green")
        if json_path:
            _write_json(json_path, result_document(result))
        return EXIT_CLEAN
    inv = result.culprit
    click.secho(f"culprit: {inv.occurrence} (pass invocation {inv.index + 1}, fixpoint "
                f"iteration {inv.iteration})", fg="red", bold=True)
    echo(f"failure: {result.failure.kind}: {_head(result.failure.message)}")
    if result.rewrite:
        r = result.rewrite
        click.secho(f"rewrite {r.index} of {r.total} inside {inv.pass_name}: "
                    f"{r.description}", fg="red")
        echo(f"  after it: {r.failure.kind}: {_head(r.failure.message)}")
        echo("")
        echo(r.diff_text.rstrip())
    else:
        echo(f"(not narrowed to a rewrite: {result.rewrite_note})")
        if result.pass_diff:
            echo("")
            echo(result.pass_diff.rstrip())
    path = repro_path or _default_repro_path(filename)
    write_atomic(path, reproducer_text(result, filename, factory.label, path))
    echo("")
    echo(f"reproducer: {path} (the module just before {inv.occurrence})")
    echo("  " + result.reproducer_command.replace("REPRO", path))
    if result.reproduces is False:
        click.secho("  note: this command does not reproduce the failure alone: the pass "
                    "runs with the pipeline's arguments there", fg="yellow")
    if json_path:
        _write_json(json_path, result_document(result, path))
    return EXIT_FOUND


def _write_json(path: str, doc: dict) -> None:
    import json

    from ..fileutil import write_atomic
    write_atomic(path, json.dumps(doc, indent=1) + "\n")


def _head(message: str, limit: int = 400) -> str:
    lines = [ln for ln in message.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    keep = [lines[0]] + [ln for ln in lines[1:] if ln.startswith("Failed after")]
    text = " … ".join(keep)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _default_repro_path(filename: str) -> str:
    base = os.path.basename(filename) if filename != "<stdin>" else "stdin.hlo"
    stem = base[:-4] if base.endswith(".hlo") else base
    return f"{stem}.repro.hlo"
