"""The ablate table (rich): rows sorted by slowdown, > 1% and > 5% marked, the pass
invocation counts beside them (the seed's figures 3 and 7-8 in one table)."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..triage.measure import spread
from ..triage.report import MARK_STRONG, MARK_WEAK, mark, table_order

_STATUS_STYLE = {"ok": "green", "no_change": "dim", "breaks": "bold red",
                 "wrong_result": "bold magenta"}


def _ms(seconds) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.3f}"


def _delta(value, base) -> str:
    if value is None:
        return ""
    if base is None or value == base:
        return f"{value}"
    return f"{value} ({value - base:+d})" if isinstance(value, int) else f"{value}"


def _mb(value) -> str:
    return "" if value is None else f"{value / 1e6:.2f}"


def print_table(document: dict, counts: dict, executor: str, wall_s: float, top: int = 0,
                console: Console | None = None) -> None:
    if console is None:
        console = Console() if Console().is_terminal else Console(width=160)
    base = document["baseline"]
    rows = table_order(document["passes"])
    if top:
        rows = rows[:top]
    per_occ = any(r.get("occurrence") for r in rows)
    elsewhere = any(r.get("host") and (r.get("host"), r.get("device")) !=
                    (base.get("host"), base.get("device")) for r in rows)
    title = (f"ablate {document['module']}: {document['pipeline']} on {document['backend']}"
             f", {document['repeat']} timed run(s) per variant"
             + (", each against the baseline timed beside it (--paired)"
                if document.get("paired") else ""))
    table = Table(title=title, title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("disabled pass" + (" occurrence" if per_occ else ""), no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("time ms", justify="right")
    table.add_column("spread", justify="right")
    table.add_column("slowdown", justify="right")
    table.add_column("kernels", justify="right")
    table.add_column("MB moved", justify="right")
    table.add_column("runs (changed)", justify="right")
    if elsewhere:
        table.add_column("host / device")
    table.add_column("message", overflow="fold", ratio=1)
    for r in rows:
        m = mark(r)
        style = "bold red" if m == "**" else "yellow" if m == "*" else None
        name = r.get("occurrence") or r["pass"]
        n, c = (r.get("invocations"), r.get("changed"))
        if n is None:
            n, c = counts.get(r["pass"], ("", ""))
        slow = r.get("slowdown")
        other = r.get("host") and (r.get("host"), r.get("device")) != \
            (base.get("host"), base.get("device"))
        slow_text = "" if slow is None else f"{slow:.3f}x" + (" †" if other else "")
        message = r.get("error") or r.get("note") or ""
        cells = [Text(m, style=style or ""), Text(name, style=style or ""),
                 Text(r["status"], style=_STATUS_STYLE.get(r["status"], "")),
                 _ms(r.get("time_s")),
                 "" if not r.get("times_s") else f"±{spread(r['times_s']) * 50:.1f}%",
                 Text(slow_text, style=style or ""),
                 _delta(r.get("kernels"), base.get("kernels")), _mb(r.get("bytes")),
                 f"{n} ({c})"]
        if elsewhere:
            cells.append(f"{r.get('host') or ''} {r.get('device') or ''}".strip())
        cells.append(_first_lines(message))
        table.add_row(*cells)
    console.print(table)
    times = base.get("times_s") or []
    console.print(
        f"baseline: {_ms(base['time_s'])} ms median (±{spread(times) * 50:.1f}%), "
        f"{base['kernels']} kernels, {_mb(base.get('bytes'))} MB moved; "
        f"{base.get('host')} / {base.get('device')}")
    counts_by_status: dict = {}
    for r in document["passes"]:
        counts_by_status[r["status"]] = counts_by_status.get(r["status"], 0) + 1
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts_by_status.items()))
    strong = sum(1 for r in document["passes"] if (r.get("slowdown") or 0) > MARK_STRONG)
    weak = sum(1 for r in document["passes"]
               if MARK_WEAK < (r.get("slowdown") or 0) <= MARK_STRONG)
    console.print(f"{len(document['passes'])} rows ({summary}); {strong} more than 5% "
                  f"slower (**), {weak} more than 1% (*); sweep {wall_s:.1f} s on {executor}")
    if elsewhere:
        console.print("† timed on another machine than the baseline, compared with that "
                      "machine's own baseline")


def _first_lines(message: str, limit: int = 240) -> str:
    """The first line and the 'Failed after' line of a long message."""
    lines = [ln for ln in message.splitlines() if ln.strip()]
    if not lines:
        return ""
    keep = [lines[0]] + [ln for ln in lines[1:] if ln.startswith("Failed after")]
    text = " … ".join(keep)
    return text if len(text) <= limit else text[:limit - 1] + "…"
