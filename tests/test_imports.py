"""No import circles (issue 30): every module of every package, read with `ast` (nothing is
executed), and the modules it imports, at its top or inside a function (an import moved into a
function to dodge a circle is still one); imports under `if TYPE_CHECKING:` are for type checkers
only and left out. A cycle fails, named module by module."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.workflows.source import parse

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("activities", "bench", "scaling", "sim", "starters", "workflows", "tests")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if ".venv" not in p.parts}
    found["worker"] = ROOT / "worker.py"
    return found


def _type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project's modules `name` imports (`from a import b`: module a.b if there is one, else a)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit_node(other)
                continue
            visit_node(child)

    def visit_node(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
        visit(node)

    visit(parse(path.read_text()))
    resolved = set()
    for target in out:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_through_others() -> None:
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert len(graph) > 300 and graph["starters.cli"]  # every package was read
    assert cycles(graph) == []


def test_a_circle_is_found_and_named() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_a_lazy_import_counts_and_a_type_checking_one_does_not(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import starters.demo\n"
        "def later():\n    from starters import cli\n"
    )
    assert imported("m", source, modules()) == {"starters.cli"}
