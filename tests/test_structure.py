"""The engine's shape, checked from its source: no import cycles (lazy imports included), nobody imports another module's
private names, the core imports neither click nor rich, and no module grows past about 500 lines."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "fixpack"
FRONT = {"cli", "cli_author", "cli_common", "cli_maint", "cli_progress", "cli_rebase", "cli_render", "cli_sbom"}  # the terminal front


def modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(PKG.glob("*.py")) if p.stem != "__init__"}


def imports(tree: ast.Module) -> list[tuple[str, list[str]]]:
    """(module, names) of every ``from .x import ...`` and ``from . import x``, lazy ones inside functions
    included, ``if TYPE_CHECKING:`` blocks left out (they name types, they import nothing at run time)."""
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)
                   for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and id(node) not in typing_only:
            if node.module:
                out.append((node.module, [a.name for a in node.names]))
            else:
                out += [(a.name, []) for a in node.names]
    return out


def test_no_import_cycles():
    mods = modules()
    graph = {m: {dep for dep, _names in imports(t) if dep in mods} for m, t in mods.items()}
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        assert m not in path, f"import cycle: {' -> '.join(path[path.index(m):] + [m])}"
        if m in done:
            return
        for dep in sorted(graph[m]):
            visit(dep, path + [m])
        done.add(m)
    for m in sorted(graph):
        visit(m, [])


def test_no_module_imports_another_modules_private_names():
    bad = [f"{m} imports {dep}.{name}" for m, t in modules().items() for dep, names in imports(t)
           for name in names if name.startswith("_") and dep]
    assert not bad, bad


def test_the_core_imports_neither_click_nor_rich():
    bad = []
    for m, t in modules().items():
        if m in FRONT:
            continue
        for node in ast.walk(t):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            bad += [f"{m} imports {n}" for n in names if n.split(".")[0] in ("click", "rich")]
    assert not bad, bad


def test_no_module_past_about_500_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in PKG.glob("*.py")}
    assert max(sizes.values()) <= 520, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
