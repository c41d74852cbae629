"""`hlo-opt pipelines [NAME]`: the named pipelines as a tree of their passes."""
from __future__ import annotations

import json
import sys

import click


def _spec_json(item):
    from ..pipeline import Fixpoint, Pipeline
    if isinstance(item, Fixpoint):
        return {"fixpoint": _spec_json(item.body), "max_iterations": item.max_iterations}
    if isinstance(item, Pipeline):
        return {"pipeline": item.name, "items": [_spec_json(i) for i in item.items]}
    return item.name


def _add(tree, item) -> None:
    from ..pipeline import Fixpoint, Pipeline
    if isinstance(item, Fixpoint):
        if not isinstance(item.body, Pipeline):
            tree.add(f"{item.body.name} [dim](fixpoint, ≤{item.max_iterations})[/dim]")
        else:
            node = tree.add(f"[bold]{item.body.name}[/bold] "
                            f"[dim](fixpoint, ≤{item.max_iterations} iterations)[/dim]")
            for sub in item.body.items:
                _add(node, sub)
    elif isinstance(item, Pipeline):
        node = tree.add(f"[bold]{item.name}[/bold]")
        for sub in item.items:
            _add(node, sub)
    else:
        tree.add(item.name)


@click.command("pipelines")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the pipelines as JSON.")
def command(name, as_json):
    """List the named pipelines (for --pipeline NAME) with their passes."""
    from passes.pipelines import build_pipeline, pipeline_names
    names = [name] if name is not None else pipeline_names()
    built = {n: build_pipeline(n) for n in names}  # an unknown name: PassError
    if as_json:
        sys.stdout.write(json.dumps({n: _spec_json(p) for n, p in built.items()},
                                    indent=1) + "\n")
        return
    from rich.console import Console
    from rich.tree import Tree
    root = Tree("[bold]pipelines[/bold] (hlo-opt --pipeline NAME)")
    from passes.cpu_pipelines import NOT_PORTED as not_ported
    for n in names:
        node = root.add(f"[bold cyan]{n}[/bold cyan]")
        _add(node, built[n])
        for sub in _sub_names(built[n]):
            for why in not_ported.get(sub, ()):
                node.add(f"[yellow]not ported ({sub}):[/yellow] {why}")
    Console().print(root)


def _sub_names(item) -> list[str]:
    """The names of ``item`` and every pipeline inside it."""
    from ..pipeline import Fixpoint, Pipeline
    if isinstance(item, Fixpoint):
        return _sub_names(item.body)
    if not isinstance(item, Pipeline):
        return []
    out = [item.name]
    for sub in item.items:
        out += _sub_names(sub)
    return out
