"""`hlo-opt INPUT`: parse, (optionally) run passes, print canonical HLO text."""
from __future__ import annotations

import sys

import click

from ..api import load_modules_from_text, read_input
from ..flags import DebugOptions, parse_flag_tokens


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
@click.option("--verify-no-change", is_flag=True,
              help="Fail when a pass reports no change but changed the module.")
@click.option("--stats", "stats_path", default=None,
              help="Write per-pass statistics as JSON to this file ('-' = stderr).")
@click.option("--summary/--no-summary", default=False, help="Print the per-pass summary table.")
@click.pass_context
def command(ctx, input, output, split_input_file, list_passes, passes, pipeline, platform,
            stage, verify_no_change, stats_path, summary):
    """Optimize INPUT (a path or '-') and print the module; --xla_* flags accepted."""
    flag_tokens = [a for a in ctx.args]
    bad = [a for a in flag_tokens if not a.startswith("--xla_")]
    if bad:
        raise click.UsageError(f"unexpected argument(s): {' '.join(bad)}")
    options = DebugOptions.from_sources(parse_flag_tokens(flag_tokens, "command line"))
    from .. import passes_api
    if list_passes:
        click.echo(",".join(passes_api.pass_names()))
        return
    if input is None:
        raise click.UsageError("missing INPUT (a path or '-')")
    if stage != "hlo":
        raise click.UsageError(f"unsupported --stage={stage} (supported: hlo)")
    text, filename = read_input(input)
    modules = load_modules_from_text(text, filename, split_input_file)
    outputs = []
    for module in modules:
        if passes or pipeline:
            module = passes_api.optimize(module, options, passes=passes, pipeline=pipeline,
                                         verify_no_change=verify_no_change,
                                         stats_path=stats_path, summary=summary)
        outputs.append(module.to_text())
    result = "\n".join(outputs)
    if output == "-":
        sys.stdout.write(result)
    else:
        from ..fileutil import write_atomic
        write_atomic(output, result)
