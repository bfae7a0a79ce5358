"""The package's layers import one way (``docs/architecture.md``): no upward import and no import cycle.

Every ``import`` statement counts, at module level or inside a function, since a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "edgeplan"

#: The layers from the bottom up; a module may import its own layer and the ones below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "_version"),
    ("ir",),
    ("frontends",),
    ("primitives",),
    ("measure",),
    ("costmodels",),
    ("planners",),
    ("runtimes",),
    ("decisions",),
    ("reports",),
    ("cli",),
    ("demo", "__init__", "__main__"),
)


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if path.name == "__init__.py" else 0)
                base = ".".join([*parts[:keep], *([base] if base else [])])
            names = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods] or [base]
        for target in names:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target.startswith("edgeplan") and target not in (name, "edgeplan"):
                found.add(target)
    return found


def _layer(name: str) -> int:
    part = name.split(".")[1] if "." in name else "__init__"
    for level, members in enumerate(LAYERS):
        if part in members:
            return level
    raise AssertionError(f"{name} belongs to no layer; add its folder to LAYERS")


def test_no_module_imports_a_layer_above_its_own() -> None:
    mods = _modules()
    upward = [f"{m} -> {t}" for m, p in mods.items() for t in _imports(m, p, mods) if _layer(t) > _layer(m)]
    assert upward == []


def test_the_library_never_imports_the_experiments() -> None:
    """``experiments/`` is outside the wheel: nothing installed may need it."""
    mods = _modules()
    found = []
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{name} -> {t}" for t in targets if t.split(".")[0] in ("experiments", "benchmarks", "tests")]
    assert found == []


def test_no_import_cycle_between_modules() -> None:
    mods = _modules()
    graph = {m: _imports(m, p, mods) for m, p in mods.items()}
    cycles = []
    done: set[str] = set()
    for start in graph:
        stack = [(start, [start])]
        seen: set[str] = set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.append(" -> ".join([*path, start]))
                elif nxt not in seen and nxt not in done:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
        done.add(start)
    assert cycles == []


MAX_PARAMETERS = 8


def _estimator_classes(trees: dict[Path, ast.Module]) -> set[str]:
    """Names of the package's classes that define or inherit ``get_params`` (scikit-learn-style estimators)."""
    bases: dict[str, set[str]] = {}
    defines: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(
                    b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                    if isinstance(b, ast.Name | ast.Attribute))
                if any(isinstance(f, ast.FunctionDef) and f.name == "get_params" for f in node.body):
                    defines.add(node.name)
    estimators = defines | {"BaseEstimator"}
    grew = True
    while grew:
        found = {name for name, parents in bases.items() if parents & estimators} - estimators
        estimators |= found
        grew = bool(found)
    return estimators


def _parameter_counts(tree: ast.Module) -> list[tuple[str, str, int]]:
    """``(qualified name, class name or "", parameters)`` of every function and method, ``self``/``cls`` not
    counted."""
    out: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, prefix: str, cls: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", child.name)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                a = child.args
                positional = [*a.posonlyargs, *a.args]
                n = len(positional) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
                static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in child.decorator_list)
                if cls and positional and not static:
                    n -= 1  # self or cls
                out.append((f"{prefix}{child.name}", cls, n))
                visit(child, f"{prefix}{child.name}.", "")
            else:
                visit(child, prefix, cls)

    visit(tree, "", "")
    return out


def test_no_function_takes_more_than_eight_parameters() -> None:
    """STYLE item 13: settings that grow are grouped in a frozen options dataclass. The CLI's click commands mirror
    their options one to one, and an estimator's ``__init__`` stores its keyword hyperparameters (item 5)."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in PACKAGE.rglob("*.py")
             if "cli" not in path.relative_to(PACKAGE).parts[:1]}
    estimators = _estimator_classes(trees)
    too_many = []
    for path, tree in trees.items():
        where = path.relative_to(PACKAGE).as_posix()
        for name, cls, n in _parameter_counts(tree):
            if n <= MAX_PARAMETERS:
                continue
            if name.endswith("__init__") and cls in estimators:
                continue
            too_many.append(f"{where}: {name} ({n} parameters)")
    assert too_many == []
