"""The import graph of a package, read from source with `ast`: every import counts,
at module level, inside functions (lazy) and under TYPE_CHECKING alike.

Two kinds of edge that an `import` statement does not spell out count too,
because they run code just as surely:
- parent packages: importing `a.b.c` first runs `a/__init__.py` and
  `a/b/__init__.py`, so it is an edge to `a.b` and `a` as well (except to the
  importer's own packages, which are always initialised before it runs);
- `importlib.import_module(...)` with a name known from the source: a literal,
  an f-string over `__name__`/`__package__` (one whose tail is computed, like
  the loop over `pkgutil.iter_modules(__path__)`, imports every direct
  submodule of its literal prefix), and the `"module:attr"` strings of a module
  that calls `import_module` (lazy command and provider tables).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

_CHILDREN = ".*"
"""Suffix of a target meaning "every direct submodule of this package"."""
_ENTRY = re.compile(r"^([A-Za-z_][\w.]*):[A-Za-z_]\w*$")
_IMPORTERS = {"import_module", "__import__"}


def module_files(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in package_dir.rglob("*.py"):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _name_of(node: ast.expr, module: str, package: str) -> str | None:
    """The module name an `import_module` argument spells, `prefix.*` when only its
    head is known (`f"{__name__}.{x}"`), None when nothing of it is."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if not isinstance(node, ast.JoinedStr):
        return None
    known = {"__name__": module, "__package__": package}
    text = ""
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            text += part.value
        elif (
            isinstance(part, ast.FormattedValue)
            and isinstance(part.value, ast.Name)
            and part.value.id in known
        ):
            text += known[part.value.id]
        else:
            return text[:-1] + _CHILDREN if text.endswith(".") else None
    return text


def _calls_importer(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in _IMPORTERS


def _imported(node: ast.AST, module: str, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            name = ".".join(base + ([node.module] if node.module else []))
        else:
            name = node.module or ""
        return [name] + [f"{name}.{a.name}" for a in node.names]
    if _calls_importer(node) and node.args:  # type: ignore[attr-defined]
        name = _name_of(node.args[0], module, package)  # type: ignore[attr-defined]
        return [name] if name else []
    return []


def _targets(name: str, files: dict[str, Path]) -> set[str]:
    """The package's modules that importing `name` runs: the longest module prefix
    of the name and every package above it."""
    if name.endswith(_CHILDREN):
        parent = name[: -len(_CHILDREN)]
        children = {m for m in files if m.rsplit(".", 1)[0] == parent and m != parent}
        return set().union(*(_targets(c, files) for c in children)) if children else set()
    while name and name not in files:
        name = name.rsplit(".", 1)[0] if "." in name else ""
    out = set()
    while name:
        if name in files:
            out.add(name)
        name = name.rsplit(".", 1)[0] if "." in name else ""
    return out


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (see the module docstring);
    importing oneself or one's own parent packages does not count."""
    files = module_files(package_dir)
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text())
        nodes = list(ast.walk(tree))
        names = [n for node in nodes for n in _imported(node, name, package)]
        if any(_calls_importer(node) for node in nodes):
            names += [
                m.group(1)
                for node in nodes
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and (m := _ENTRY.match(node.value))
                and m.group(1) in files
            ]
        for target in set().union(*(_targets(n, files) for n in names)) if names else ():
            if target != name and not name.startswith(target + "."):
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
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
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
