"""`hlo-opt pipelines [NAME]`: the named pipelines as a tree of their passes."""
from __future__ import annotations

import json
import sys

import click


def _spec_json(spec):
    from passes.pipelines import Fix
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Fix):
        return {"fixpoint": _spec_json(spec.body), "max_iterations": spec.max_iterations}
    return {"pipeline": spec.name, "items": [_spec_json(i) for i in spec.items]}


def _add(tree, spec) -> None:
    from passes.pipelines import Fix
    if isinstance(spec, str):
        tree.add(spec)
    elif isinstance(spec, Fix):
        if isinstance(spec.body, str):
            tree.add(f"{spec.body} [dim](fixpoint, ≤{spec.max_iterations})[/dim]")
        else:
            node = tree.add(f"[bold]{spec.body.name}[/bold] "
                            f"[dim](fixpoint, ≤{spec.max_iterations} iterations)[/dim]")
            for item in spec.body.items:
                _add(node, item)
    else:
        node = tree.add(f"[bold]{spec.name}[/bold]")
        for item in spec.items:
            _add(node, item)


@click.command("pipelines")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the pipelines as JSON.")
def command(name, as_json):
    """List the named pipelines (for --pipeline NAME) with their passes."""
    from passes.pipelines import PIPELINES, pipeline_names
    from ..errors import PassError
    names = pipeline_names()
    if name is not None:
        if name not in PIPELINES:
            raise PassError(f"INVALID_ARGUMENT: Pipeline {name} not found. Known pipelines: "
                            f"{', '.join(names)}")
        names = [name]
    if as_json:
        sys.stdout.write(json.dumps({n: _spec_json(PIPELINES[n]) for n in names},
                                    indent=1) + "\n")
        return
    from rich.console import Console
    from rich.tree import Tree
    root = Tree("[bold]pipelines[/bold] (hlo-opt --pipeline NAME)")
    from passes.cpu_pipelines import missing_passes as cpu_missing
    from passes.gpu_pipelines import missing_passes as gpu_missing
    missing = {**gpu_missing(), **cpu_missing()}
    for n in names:
        node = root.add(f"[bold cyan]{n}[/bold cyan]")
        _add(node, PIPELINES[n])
        for sub in _sub_names(PIPELINES[n]):
            if missing.get(sub):
                node.add(f"[yellow]not ported ({sub}):[/yellow] " + ", ".join(missing[sub]))
    Console().print(root)


def _sub_names(spec) -> list[str]:
    from passes.pipelines import Fix
    if isinstance(spec, str):
        return []
    if isinstance(spec, Fix):
        return _sub_names(spec.body)
    out = [spec.name]
    for item in spec.items:
        out += _sub_names(item)
    return out
