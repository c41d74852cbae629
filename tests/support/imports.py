"""The import graph of ``hlo_opt`` and ``passes`` as the source says it (module-level and
function-level imports alike), for the architecture tests and ``make lint``."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("hlo_opt", "passes")
# The app layer: connects names to passes; may import passes/, click and rich.
APP = ("hlo_opt.cli", "hlo_opt.commands", "hlo_opt.passes_api")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (as written, resolved to absolute)
    line: int


def modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package)."""
    out = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


def _runtime_nodes(tree):
    """Every node except those under ``if TYPE_CHECKING:`` (imports for annotations
    only, never executed)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and \
                    child.test.id == "TYPE_CHECKING":
                stack.extend(child.orelse)
                continue
            stack.append(child)


def imports(root: Path = ROOT) -> list[Import]:
    """Every import statement of every module that runs, wherever it stands in the file
    (module level or inside functions; not the ``if TYPE_CHECKING:`` ones)."""
    mods = modules(root)
    out = []
    for name, (path, is_pkg) in mods.items():
        package = name if is_pkg else name.rpartition(".")[0]
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [Import(name, a.name, node.lineno) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module
                for a in node.names:
                    sub = f"{mod}.{a.name}"
                    out.append(Import(name, sub if sub in mods else mod, node.lineno))
    return out


def _owner(target: str, mods) -> str | None:
    while target and target not in mods:
        target = target.rpartition(".")[0]
    return target or None


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the project modules it imports."""
    mods = modules(root)
    g: dict[str, set[str]] = {m: set() for m in mods}
    for imp in imports(root):
        t = _owner(imp.target, mods)
        if t is not None and t != imp.module:
            g[imp.module].add(t)
    return g


def cycles(root: Path = ROOT) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), sorted."""
    g = graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        work = [(v, iter(sorted(g[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == node:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def is_core(module: str) -> bool:
    return module.startswith("hlo_opt") and not module.startswith(APP)
