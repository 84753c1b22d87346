"""The tree tells the architecture (ARCHITECTURE.md): imports go one way, from the commands
down to the core, and the package's top stays small. Read from the code's own imports, so a
new module is held to the same rules without being listed here."""

from __future__ import annotations

import ast
from pathlib import Path

import lookout_cli

PACKAGE = Path(lookout_cli.__file__).parent

# Bottom first. A module may import its own package and any layer below its own; the packages
# of one layer do not import each other. The top-level modules are the command line.
LAYERS = [
    {"core", "data"},
    {"tokens"},
    {"formats"},
    {"images"},
    {"meter", "mentions", "memory"},
    {"compaction", "fleet"},
    {"settings"},
    {"config"},
    {"options"},
    {"agents", "flags", "measure"},
    {"commands"},
    {"cli"},
    {"manpage", "__main__"},
]
RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}


def _unit(module: str) -> str:
    """The layer unit of ``lookout_cli.x.y``: its subpackage, or the top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _sources() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = [p for p in path.relative_to(PACKAGE).with_suffix("").parts if p != "__init__"]
        found[".".join(["lookout_cli", *parts])] = path
    return found


def _imports(module: str, path: Path) -> set[str]:
    """The lookout_cli modules ``module`` imports, wherever in it (lazy imports too)."""
    out = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("lookout_cli")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base == "lookout_cli" or base.startswith("lookout_cli."):
                out.add(base)
                out |= {f"{base}.{a.name}" for a in node.names}
    return out


def test_imports_go_one_way():
    sources = _sources()
    wrong = []
    for module, path in sources.items():
        unit = _unit(module)
        if unit == "__init__":
            continue
        for target in _imports(module, path):
            if target not in sources or target == "lookout_cli":
                continue  # a name from a module, not a module
            other = _unit(target)
            if other in (unit, "__init__"):
                continue
            if RANK[other] >= RANK[unit]:
                wrong.append(f"{module} imports {target} ({unit} may use only layers below it)")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_module_imports_itself_round_about():
    """No cycle of modules, counting lazy imports: inside one package too (today's rule; once
    ``budget`` and ``models`` imported each other)."""
    sources = _sources()
    graph = {m: {t for t in _imports(m, p) if t in sources and t != m and t != "lookout_cli"} for m, p in sources.items()}
    # a package's face is imported by whatever imports a module below it: leave faces out
    faces = {m for m, p in sources.items() if p.name == "__init__.py"}
    graph = {m: deps - faces for m, deps in graph.items() if m not in faces}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                return path[path.index(t):] + [t]
            if t not in state and (found := visit(t)):
                return found
        state[m] = 2
        path.pop()
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module)
            assert cycle is None, " -> ".join(cycle)


def test_every_unit_has_a_layer():
    units = {_unit(m) for m in _sources()} - {"__init__"}
    assert units <= set(RANK), f"put {sorted(units - set(RANK))} in a layer (here and in ARCHITECTURE.md)"


def test_the_top_stays_small_and_packages_say_what_they_hold():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 8, f"{init.parent.name}/__init__.py says what the package holds"
    architecture = (Path(__file__).parents[1] / "ARCHITECTURE.md").read_text()
    for init in PACKAGE.glob("*/__init__.py"):
        assert f"{init.parent.name}/" in architecture, f"ARCHITECTURE.md names {init.parent.name}/"


def test_no_module_past_a_thousand_lines():
    long = {m: n for m, p in _sources().items() if (n := len(p.read_text().splitlines())) > 1000}
    assert not long, long
