"""No import cycle inside `src/toolwire`.

Reads every module's source with `ast` (nothing is imported or run), collects the
`toolwire` modules it imports, function-level imports included, and looks for a cycle
in that graph. An import of `a.b.c` runs `a/b/__init__.py` first, so it is an edge to
each package on the way too (except the importer's own packages, which are already
running). `from a.b import c` is an edge to the module `a.b.c` when there is one,
else to `a.b`. Imports under `if TYPE_CHECKING:` are left out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "toolwire"

#: Cycles tolerated, each as the exact set of modules in it (none, and it should stay
#: so): an entry must still be such a cycle, no module may join it, and no other cycle
#: may appear.
KNOWN: set[frozenset[str]] = set()


def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    out: dict[str, Path] = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Import statements anywhere in `tree`, but not under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                walk(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(tree)
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that running module `name` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        targets.add(base)
        targets.update(f"{base}.{alias.name}" for alias in node.names)
    running = {name.rsplit(".", i)[0] for i in range(name.count(".") + 1)}
    edges: set[str] = set()
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            step = ".".join(parts[:i])
            if step in known and step not in running:
                edges.add(step)
    edges.discard(name)
    return edges


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> dict[frozenset[str], list[str]]:
    """Each set of modules that import each other (a strongly connected component,
    by Tarjan's algorithm), with one cycle through it as a path (first module repeated
    at the end)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return {frozenset(c): _path(c, edges) for c in components}


def _path(component: set[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the component's first module, as a path."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(edges[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def test_the_walker_sees_relative_function_level_and_package_imports(tmp_path: Path) -> None:
    """The walker itself: a cycle hidden in a function, a relative import, and the
    `__init__` that an import runs are all seen; a TYPE_CHECKING import is not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("def f():\n    from pkg import a\n")
    (pkg / "sub" / "inner.py").write_text("")
    (pkg / "a.py").write_text("from .sub.inner import x\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n"
    )
    known = {
        "pkg": pkg / "__init__.py",
        "pkg.sub": pkg / "sub" / "__init__.py",
        "pkg.sub.inner": pkg / "sub" / "inner.py",
        "pkg.a": pkg / "a.py",
        "pkg.b": pkg / "b.py",
    }
    edges = {name: imports(name, path, known) for name, path in known.items()}
    assert edges["pkg.a"] == {"pkg.sub", "pkg.sub.inner"}
    assert edges["pkg.sub"] == {"pkg.a"}
    assert edges["pkg.b"] == set()
    assert list(cycles(edges).values()) == [["pkg.a", "pkg.sub", "pkg.a"]]


def test_no_import_cycle() -> None:
    found = cycles(graph())
    stale = [sorted(entry) for entry in KNOWN if entry not in found]
    new = [
        f"{' -> '.join(path)}  (modules in the cycle: {', '.join(sorted(members))})"
        for members, path in found.items()
        if members not in KNOWN
    ]
    assert not new, "import cycles:\n" + "\n".join(new)
    assert not stale, f"known cycles that are gone (drop them from KNOWN): {stale}"
