"""`hlo-opt diff`: structural diff of two modules, or of the dumps around a pass.

    hlo-opt diff A.hlo B.hlo                 summary + diff (colour on a terminal)
    hlo-opt diff DUMPDIR --pass algsimp      the dumps before and after each run of a pass
    hlo-opt diff DUMPDIR --all               one line per pass: what the pipeline did

Exit status as diff(1): 0 no difference, 1 different, 2 trouble (bad path, bad HLO, bad
usage).
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import HloError


class DiffError(HloError):
    """A user error of `hlo-opt diff`; exits with status 2 like diff(1)."""

    exit_code = 2


class _DiffCommand(click.Command):
    """Usage errors exit 2 too (the CLI maps other click errors to 1)."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            raise DiffError(f"{e.format_message()}\nTry 'hlo-opt diff --help'.") from None


def _load(path: str):
    from ..api import load
    try:
        return load(path)
    except HloError as e:
        e.exit_code = 2
        raise


def _diff(a, b, options, label_a: str, label_b: str):
    from ..diff import diff_modules
    return diff_modules(a, b, options, label_a, label_b)


def _write(path: str, text: str) -> None:
    from ..fileutil import write_output
    try:
        write_output(path, text)
    except HloError as e:
        raise DiffError(str(e)) from None


def _emit(text: str, fmt) -> None:
    """Text or JSON to stdout, or to the --output file."""
    if fmt["quiet"]:
        return
    if fmt["output"] in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        _write(fmt["output"], text)


def _emit_lines(lines, fmt) -> None:
    """Styled lines: coloured on a terminal (per --color), plain in a pipe or a file."""
    if fmt["quiet"]:
        return
    from ..diff.render_text import to_plain
    if fmt["output"] not in (None, "-"):
        _write(fmt["output"], to_plain(lines))
        return
    from ..diff.render_rich import print_lines, want_color
    print_lines(lines, want_color(fmt["color"]))


def _html(diff, path: str | None) -> None:
    if path:
        from ..diff.render_html import render_html
        _write(path, render_html(diff))


@click.command("diff", cls=_DiffCommand)
@click.argument("a")
@click.argument("b", required=False)
@click.option("--pass", "pass_name", metavar="NAME",
              help="With a dump directory: diff the dumps before and after pass NAME.")
@click.option("--all", "all_passes", is_flag=True,
              help="With a dump directory: one line per pass (what changed).")
@click.option("--module", "module_filter", metavar="ID|NAME",
              help="With a dump directory: only this module (id or name).")
@click.option("--ignore-metadata", is_flag=True, help="Metadata differences are not changes.")
@click.option("--ignore-layout", is_flag=True, help="Layout differences are not changes.")
@click.option("--ignore-names", is_flag=True,
              help="Do not report renames nor use names to break ties.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead.")
@click.option("--html", "html_path", metavar="FILE",
              help="Also write a self-contained side-by-side HTML page.")
@click.option("--summary", "summary_only", is_flag=True, help="Only the summary.")
@click.option("-U", "--context", type=int, default=3, show_default=True,
              help="Unchanged lines around each difference (-1: everything).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour the text output.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing; only the exit status.")
@click.option("-o", "--output", metavar="FILE", help="Write the text/JSON report here.")
def command(a, b, pass_name, all_passes, module_filter, ignore_metadata, ignore_layout,
            ignore_names, as_json, html_path, summary_only, context, color, quiet, output):
    """Structural diff of two HLO modules (names ignored), or of per-pass dumps.

    \b
    hlo-opt diff A B                   A and B are HLO text files ('-' = stdin)
    hlo-opt diff DUMPDIR --pass NAME   before/after each run of pass NAME
    hlo-opt diff DUMPDIR --all         one line per pass
    Exit status: 0 equal, 1 different, 2 error.
    """
    from ..diff import DiffOptions
    options = DiffOptions(ignore_metadata, ignore_layout, ignore_names)
    fmt = dict(as_json=as_json, html_path=html_path, summary_only=summary_only,
               context=context, color=color, quiet=quiet, output=output)
    if Path(a).is_dir():
        if b is not None:
            raise DiffError(f"{a}: is a directory; give a second file only when A is a file")
        if bool(pass_name) == bool(all_passes):
            raise DiffError(f"{a}: is a dump directory: use --pass NAME or --all")
        from ..diff.dumpdir import scan, select_modules
        files = select_modules(scan(Path(a)), module_filter)
        if not files:
            raise DiffError(f"{a}: no HLO dumps (module_NNNN.*.txt)"
                            + (f" for module {module_filter}" if module_filter else ""))
        if all_passes:
            if html_path:
                raise DiffError("--html needs two modules or --pass NAME, not --all")
            different = _all_passes(files, options, fmt)
        else:
            different = _one_pass(a, files, pass_name, options, fmt)
    else:
        if pass_name or all_passes or module_filter:
            raise DiffError("--pass, --all and --module need a dump directory")
        if b is None:
            raise DiffError("missing B: hlo-opt diff A B (or a dump directory with --pass/--all)")
        for p in (a, b):
            if p != "-" and not Path(p).exists():
                raise DiffError(f"{p}: error: no such file")
        diff = _diff(_load(a), _load(b), options, a, b)
        _html(diff, html_path)
        if as_json:
            from ..diff.render_json import render_json
            _emit(render_json(diff), fmt)
        else:
            _emit_lines(_text_lines(diff, fmt), fmt)
        different = not diff.equal
    if different:
        # sys.exit, not ctx.exit: cli.run calls click with standalone_mode=False, where an
        # Exit's status is returned and then dropped.
        sys.exit(1)


def _text_lines(diff, fmt, heading: str | None = None) -> list:
    from ..diff.render_text import render_lines
    lines = render_lines(diff, fmt["context"], fmt["summary_only"])
    if heading:
        lines.insert(0, [(heading, "hunk")])
    return lines


def _one_pass(directory, files, pass_name, options, fmt) -> bool:
    from ..diff.dumpdir import pass_pairs, passes_in
    jobs = [(mid, before, after) for mid, lst in files.items()
            for before, after in pass_pairs(lst, pass_name)]
    if not jobs:
        dumped = sorted({p for lst in files.values() for p in passes_in(lst)})
        raise DiffError(f"{directory}: no dump after pass '{pass_name}' (passes dumped: "
                        f"{', '.join(dumped) if dumped else 'none'}); a pass that changed "
                        "nothing may not have been dumped")
    different = False
    results = []
    for mid, before, after in jobs:
        diff = _diff(_load(str(before.path)), _load(str(after.path)), options,
                     before.path.name, after.path.name)
        different |= not diff.equal
        results.append((mid, before, after, diff))
    if fmt["html_path"]:
        for k, (_, _, _, diff) in enumerate(results):
            path = Path(fmt["html_path"])
            if len(results) > 1:  # one page per run: page.0.html, page.1.html, ...
                path = path.with_name(f"{path.stem}.{k}{path.suffix}")
            _html(diff, str(path))
    if fmt["as_json"]:
        import json
        from ..diff.render_json import diff_to_dict
        _emit(json.dumps([{"module_id": mid, "module": after.module_name, "step": after.step,
                           "pass": after.after, **diff_to_dict(diff)}
                          for mid, _, after, diff in results], indent=1) + "\n", fmt)
        return different
    lines: list = []
    by_module: dict = {}
    for r in results:
        by_module.setdefault(r[0], []).append(r)
    for mid, runs in by_module.items():
        shown = runs
        if len(runs) > 1:
            # the pass ran several times: list the runs, show the diffs of those that changed
            listed = ", ".join(f"step {after.step:04d} ("
                               f"{'no change' if diff.equal else 'changed'})"
                               for _, _, after, diff in runs)
            lines.append([(f"module_{mid:04d} {runs[0][2].module_name}: pass '{pass_name}' "
                           f"ran {len(runs)} times: {listed}", "hunk")])
            shown = [r for r in runs if not r[3].equal] or runs[-1:]
        for _, _, after, diff in shown:
            heading = f"== module_{mid:04d} {after.module_name}: {after.label}"
            lines.extend(_text_lines(diff, fmt, heading))
    _emit_lines(lines, fmt)
    return different


def _all_passes(files, options, fmt) -> bool:
    from ..diff.dumpdir import between, consecutive_pairs
    from ..diff.summary import one_line, summarize
    different = False
    records = []
    lines = []
    last: list = [None, None]  # consecutive pairs share a file: parse it once

    def load_cached(f):
        if last[0] != f.path:
            last[:] = [f.path, _load(str(f.path))]
        return last[1]

    for mid, lst in files.items():
        pairs = consecutive_pairs(lst)
        lines.append([(f"module_{mid:04d} {lst[0].module_name}: {len(pairs)} steps", "hunk")])
        for prev, cur in pairs:
            a = load_cached(prev)
            diff = _diff(a, load_cached(cur), options, prev.path.name, cur.path.name)
            different |= not diff.equal
            what = between(prev, cur)
            text = one_line(diff)
            step = f"{cur.step:04d}" if cur.is_pass_dump else "----"
            lines.append([(f"  {step} {what:<32} ", None),
                          (text, None if diff.equal else "changed")])
            records.append({"module_id": mid, "module": cur.module_name,
                            "step": cur.step if cur.is_pass_dump else None, "pass": what,
                            "before": prev.path.name, "after": cur.path.name,
                            "equal": diff.equal, "line": text,
                            "summary": summarize(diff).to_dict(),
                            "patterns": [p.to_dict() for p in diff.patterns]})
    if fmt["as_json"]:
        import json
        _emit(json.dumps(records, indent=1) + "\n", fmt)
    else:
        _emit_lines(lines, fmt)
    return different
