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
