"""Fail when modules of python/candle_py import each other in a cycle at import time.

Usage: python tools/check_import_cycles.py [PACKAGE_DIR]   (default: python/candle_py)

Reads the sources (nothing is imported): an edge A -> B is an `import` or
`from ... import` in A that names module B (or `from B import name`). Imports
inside functions count too: deferring an import to call time hides a cycle
from the interpreter, not from the design. Imports under `if TYPE_CHECKING:`
never run and do not count. The implicit import of a package's `__init__` when
one of its submodules is imported is not an edge either: it is how every
package works, not a dependency the code chose.
Prints each cycle found and exits 1; prints the module count and exits 0 when
the graph is acyclic.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set


def module_names(root: Path) -> Dict[str, Path]:
    """`candle_py.nn.functional` -> its file, for every .py (and the compiled
    modules' .pyi stubs) under root."""
    out = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyi")]):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(body: List[ast.stmt]) -> Iterator[ast.stmt]:
    """The import statements of `body`, at any depth, except under `if TYPE_CHECKING:`."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _runtime_imports(node.orelse)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from _runtime_imports([child])
                elif isinstance(child, ast.excepthandler):
                    yield from _runtime_imports(child.body)


def imports_of(name: str, path: Path, modules: Dict[str, Path]) -> Set[str]:
    """The modules of the tree that `name` imports (at import or at call time)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: Set[str] = set()
    for node in _runtime_imports(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            # `from pkg import sub` imports the submodule; `from mod import name`, the module.
            found.update(f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names)
    return {m for m in found if m in modules and m != name}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv: List[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent / "python" / "candle_py")
    modules = module_names(root)
    graph = {name: imports_of(name, path, modules) if path.suffix == ".py" else set() for name, path in modules.items()}
    found = cycles(graph)
    for component in found:
        print("import cycle:", " <-> ".join(component))
        for m in component:
            print(f"  {m} imports {', '.join(sorted(graph[m] & set(component)))}")
    if found:
        return 1
    print(f"no import cycles among {len(modules)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
