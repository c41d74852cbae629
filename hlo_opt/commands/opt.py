"""`hlo-opt INPUT`: parse, (optionally) run passes, print canonical HLO text."""
from __future__ import annotations

import contextlib
import sys

import click

from ..api import load_modules_from_text, read_input
from ..flags import DebugOptions, parse_flag_tokens


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

    with progress:
        yield update


@click.command("opt", context_settings={"ignore_unknown_options": True,
                                        "allow_extra_args": True})
@click.argument("input", required=False)
@click.option("-o", "--o", "output", default="-", help="Output file ('-' = stdout).")
@click.option("--split-input-file", is_flag=True, help="Split the input on '// -----' lines.")
@click.option("--list-passes", is_flag=True, help="Print the registered passes and exit.")
@click.option("--passes", default=None, help="Comma-separated passes to run once each, in order.")
@click.option("--pipeline", default=None, help="A named pipeline to run (see `hlo-opt pipelines`).")
@click.option("--platform", default="transforms", help="Accepted for XLA compatibility.")
@click.option("--stage", default="hlo", help="Output stage (only 'hlo').")
@click.option("--debug_options_file", default=None,
              help="A DebugOptions textproto (e.g. a dump's .debug_options); "
                   "XLA_FLAGS and --xla_* flags override it.")
@click.option("--verify-no-change", is_flag=True,
              help="Fail when a pass reports no change but changed the module.")
@click.option("--stats", "stats_path", default=None,
              help="Write per-pass statistics as JSON to this file ('-' = stderr).")
@click.option("--summary/--no-summary", default=False, help="Print the per-pass summary table.")
@click.pass_context
def command(ctx, input, output, split_input_file, list_passes, passes, pipeline, platform,
            stage, debug_options_file, verify_no_change, stats_path, summary):
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
    options = DebugOptions.from_sources(parse_flag_tokens(flag_tokens, "command line"),
                                        debug_options_file=debug_options_file)
    from .. import passes_api
    if list_passes:
        click.echo(",".join(passes_api.pass_names()))
        return
    if input is None:
        raise click.UsageError("missing INPUT (a path or '-')")
    if stage != "hlo":
        raise click.UsageError(f"unsupported --stage={stage} (supported: hlo)")
    if passes is not None and pipeline is not None:
        raise click.UsageError("--passes and --pipeline cannot be used together")
    text, filename = read_input(input)
    modules = load_modules_from_text(text, filename, split_input_file)
    outputs = []
    collected = []
    if passes is not None or pipeline is not None:
        from ..dump.writer import DumpConfig, DumpDirectory
        directory = DumpDirectory(DumpConfig.from_options(options))
        with _progress_bar(sys.stderr.isatty()) as progress:
            for module_id, module in enumerate(modules):
                passes_api.optimize(module, options, passes=passes, pipeline=pipeline,
                                    verify_no_change=verify_no_change, module_id=module_id,
                                    progress=progress, dump_directory=directory,
                                    on_stats=collected.append if (summary or stats_path)
                                    else None)
    for module in modules:
        outputs.append(module.to_text(
            syntax_sugar_async_ops=options.xla_syntax_sugar_async_ops))
    if stats_path:
        passes_api.write_stats_json(stats_path, collected)
    if summary and collected:
        from .dumps import print_summary
        print_summary(collected)
    result = "\n".join(outputs)
    if output == "-":
        sys.stdout.write(result)
        sys.stdout.flush()
    else:
        from ..fileutil import write_atomic
        write_atomic(output, result)
