"""`hlo-opt dumps DIR`: the pass timeline of a dump directory (ours or XLA's)."""
from __future__ import annotations

import json
import sys

import click



def _fmt_count(before, after) -> str:
    if before is None and after is None:
        return "—"
    if before is None or before == after:
        return f"{after}"
    return f"{before} → {after}"


def _fmt_changed(changed) -> str:
    if changed is None:
        return "—"
    return "[green]yes[/green]" if changed else "[dim]no[/dim]"


def _fmt_ms(ms) -> str:
    return "—" if ms is None else f"{ms:.2f}"


def timeline_table(timeline, pass_name: str | None = None):
    """A rich Table of one module's timeline (rows narrowed to ``pass_name``)."""
    from rich.table import Table
    table = Table(title=f"module_{timeline.module_id:04d} {timeline.module_name} "
                        f"[dim](from {timeline.source})[/dim]", title_justify="left")
    # names never wrap mid-word: the pass column keeps its width, others give way
    longest = max((len(e.pass_name) + (4 if e.iteration else 0) for e in timeline.entries),
                  default=4)
    table.add_column("step", justify="right")
    table.add_column("pipeline", overflow="ellipsis", no_wrap=True, max_width=24)
    table.add_column("pass", no_wrap=True, min_width=min(longest, 40))
    table.add_column("changed", justify="center")
    table.add_column("instructions", justify="right")
    table.add_column("fusions", justify="right")
    table.add_column("ms", justify="right")
    for e in timeline.entries:
        if pass_name is not None and e.pass_name != pass_name:
            continue
        name = e.pass_name + (f" [dim]#{e.iteration}[/dim]" if e.iteration else "")
        table.add_row("" if e.step is None else f"{e.step:04d}", e.pipeline, name,
                      _fmt_changed(e.changed),
                      _fmt_count(e.instructions_before, e.instructions_after),
                      _fmt_count(e.fusions_before, e.fusions_after), _fmt_ms(e.wall_ms))
    return table


def totals_table(totals: dict, title: str = "per-pass totals", total_ms: float | None = None):
    """A rich Table of per-pass totals ({pass: {invocations, total_ms, changed}}).  With the
    pipeline's ``total_ms``, shares are of that total and a last row shows the time outside
    the passes (verification, dumps, the runner), so the column adds up to the footer."""
    from rich.table import Table
    table = Table(title=title, title_justify="left")
    table.add_column("pass")
    table.add_column("runs", justify="right")
    table.add_column("changed", justify="right")
    table.add_column("total ms", justify="right")
    table.add_column("share", justify="right")
    in_passes = sum(t["total_ms"] for t in totals.values())
    grand = max(total_ms or 0.0, in_passes) or 1.0
    for name, t in totals.items():
        table.add_row(name, str(t["invocations"]), str(t["changed"]),
                      f"{t['total_ms']:.2f}", f"{100.0 * t['total_ms'] / grand:.0f}%")
    if total_ms:
        rest = max(total_ms - in_passes, 0.0)
        table.add_row("[dim](outside passes: verifier, dumps, runner)[/dim]", "", "",
                      f"{rest:.2f}", f"{100.0 * rest / grand:.0f}%")
        table.add_row("[b]total[/b]", "", "", f"{grand:.2f}", "100%")
    return table


def print_summary(stats_list, console=None) -> None:
    """The ``--summary`` of ``hlo-opt INPUT``: per-pass totals for each module (stderr)."""
    from rich.console import Console
    console = console or Console(stderr=True)
    for stats in stats_list:
        records = stats.records
        title = f"{stats.module_name}: pipeline {stats.pipeline}"
        console.print(totals_table(stats.totals(), title, stats.total_ms))
        if records:
            console.print(
                f"instructions {records[0].instructions_before} → "
                f"{records[-1].instructions_after}, fusions {records[0].fusions_before} → "
                f"{records[-1].fusions_after}, {len(records)} pass runs, "
                f"{stats.total_ms or 0.0:.1f} ms")
        if getattr(stats, "autotune", None) is not None:
            from ..dump.stats import autotune_summary_line
            console.print(autotune_summary_line(stats.autotune), highlight=False)
            for w in stats.autotune.get("warnings", []):
                console.print(f"[yellow]warning:[/] {w}", highlight=False)


@click.command("dumps")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the timeline as JSON (for CI).")
@click.option("--pass", "pass_name", default=None, help="Show only runs of this pass.")
def command(directory, as_json, pass_name):
    """Show the pass timeline of a dump directory (--xla_dump_to; ours or XLA's)."""
    from ..dump.inspect import read_dump_dir
    from ..errors import HloError
    timelines = read_dump_dir(directory)
    if not timelines:
        raise HloError(f"{directory}: error: no module dumps here (files named "
                       "module_NNNN.*, as --xla_dump_to writes them)")
    if as_json:
        doc = {"directory": directory, "modules": []}
        for t in timelines:
            d = t.to_json()
            if pass_name is not None:
                d["entries"] = [e for e in d["entries"] if e["pass"] == pass_name]
            doc["modules"].append(d)
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
        return
    from rich.console import Console
    # piped (CI logs, FileCheck): wide enough that no column is cut; a terminal: its width
    console = Console() if sys.stdout.isatty() else Console(width=160)
    for t in timelines:
        console.print(timeline_table(t, pass_name))
        if t.totals and pass_name is None:
            console.print(totals_table(t.totals, total_ms=t.total_ms))
        if not t.entries:
            console.print("[dim]no per-pass dumps (use --xla_dump_hlo_pass_re=.* to get "
                          "them)[/dim]")
