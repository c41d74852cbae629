"""`hlo-opt INPUT`: parse, (optionally) run passes, print canonical HLO text."""
from __future__ import annotations

import contextlib
import sys

import click



@contextlib.contextmanager
def _progress_bar(enabled: bool):
    """A rich progress bar on stderr when it is a terminal; yields the callback or None."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        console=Console(stderr=True), transient=True)
    task = progress.add_task("passes", total=None)

    def update(event):
        total = max(event.total, event.index)
        progress.update(task, total=total, completed=event.index - 1,
                        description=f"{'/'.join(event.pipeline_path)}: {event.pass_name}")

    update.rich_progress = progress   # other bars (autotuning) join this live display
    with progress:
        yield update


class _OptCommand(click.Command):
    """The default command: usage and errors name it ``hlo-opt``, as users type it."""

    def make_context(self, info_name, args, parent=None, **extra):
        return super().make_context("hlo-opt", args, parent=None, **extra)


@click.command("opt", cls=_OptCommand,
               context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                 "help_option_names": ["-h", "--help"]})
@click.argument("input", required=False)
@click.option("-o", "--o", "output", default="-", help="Output file ('-' = stdout).")
@click.option("--split-input-file", is_flag=True, help="Split the input on '// -----' lines.")
@click.option("--list-passes", is_flag=True, help="Print the registered passes and exit.")
@click.option("--passes", default=None, help="Comma-separated passes to run once each, in order.")
@click.option("--pipeline", default=None, help="A named pipeline to run (see `hlo-opt pipelines`).")
@click.option("--platform", default="transforms",
              help="transforms (HLO passes only) or a backend platform (cpu); "
                   "runs that platform's pipeline unless --passes/--pipeline is given.")
@click.option("--stage", default="hlo", help="What to print (see --list-stages).")
@click.option("--list-stages", is_flag=True, help="Print the stages of --platform and exit.")
@click.option("--debug_options_file", default=None,
              help="A DebugOptions textproto (e.g. a dump's .debug_options); "
                   "XLA_FLAGS and --xla_* flags override it.")
@click.option("--verify-no-change", is_flag=True,
              help="Fail when a pass reports no change but changed the module.")
@click.option("--stats", "stats_path", default=None,
              help="Write per-pass statistics as JSON to this file ('-' = stderr).")
@click.option("--summary/--no-summary", default=False, help="Print the per-pass summary table.")
@click.option("--autotune-provider", "autotune_provider", default=None,
              help="Candidates the algorithm pickers measure: host (numpy, no GPU needed), "
                   "cuda, cuda-sim.  Default: cuda with --platform=gpu, else none.")
@click.pass_context
def command(ctx, input, output, split_input_file, list_passes, passes, pipeline, platform,
            stage, list_stages, debug_options_file, verify_no_change, stats_path, summary,
            autotune_provider):
    """Optimize INPUT (a path or '-') and print the module; --xla_* flags accepted."""
    # click hands unknown options (the --xla_* flags) over as positional arguments, so
    # INPUT may arrive among them: sort the tokens out here.
    tokens = ([input] if input is not None else []) + list(ctx.args)
    flag_tokens = [a for a in tokens if a.startswith("--xla_")]
    positional = [a for a in tokens if not a.startswith("--xla_")]
    bad = [a for a in positional if a.startswith("-") and a != "-"]
    if bad or len(positional) > 1:
        raise click.UsageError(f"unexpected argument(s): {' '.join(bad or positional[1:])}")
    input = positional[0] if positional else None
    from ..api import load_modules_from_text, read_input
    from ..flags import DebugOptions, parse_flag_tokens
    options = DebugOptions.from_sources(parse_flag_tokens(flag_tokens, "command line"),
                                        debug_options_file=debug_options_file)
    from .. import passes_api
    if list_passes:
        click.echo(",".join(passes_api.pass_names()))
        return
    from .. import platforms
    plat = platforms.get(platform)
    if list_stages:
        for s in plat.stages.values():
            click.echo(f"{s.name}\t{s.description}")
        return
    stage_fn = plat.stage(stage).fn
    if input is None:
        raise click.UsageError("missing INPUT (a path or '-')")
    if passes is not None and pipeline is not None:
        raise click.UsageError("--passes and --pipeline cannot be used together")
    if passes is None and pipeline is None and plat.default_pipeline:
        pipeline = plat.default_pipeline
    text, filename = read_input(input)
    modules = load_modules_from_text(text, filename, split_input_file)
    outputs = []
    collected = []
    if passes is not None or pipeline is not None:
        from ..dump.writer import DumpConfig, DumpDirectory
        from ._autotune import autotune_progress, session_for
        directory = DumpDirectory(DumpConfig.from_options(options))
        with _progress_bar(sys.stderr.isatty()) as progress:
            session = session_for(options, plat.name, autotune_provider,
                                  autotune_progress(progress))
            for module_id, module in enumerate(modules):
                passes_api.optimize(module, options, passes=passes, pipeline=pipeline,
                                    verify_no_change=verify_no_change, module_id=module_id,
                                    progress=progress, dump_directory=directory,
                                    on_stats=collected.append if (summary or stats_path)
                                    else None, autotune=session)
        if session is not None and not summary:
            for warning in session.stats.warnings:
                click.secho(f"warning: {warning}", fg="yellow", err=True)
    for module in modules:
        outputs.append(stage_fn(module, options))
    if stats_path:
        passes_api.write_stats_json(stats_path, collected)
    if summary and collected:
        from .dumps import print_summary
        print_summary(collected)
    # modules of --split-input-file keep their separators: the output reads back the same way
    result = "\n// -----\n".join(outputs)
    if output == "-":
        sys.stdout.write(result)
        sys.stdout.flush()
    else:
        from ..fileutil import write_output
        write_output(output, result)
