"""The add-on's house as an import graph, type-checking imports included: no cycle, three floors in the domain
(primitives, records, tools holding ports), and no taller than it must be; and scripts/ (the benchmark package, the
harness of real programs it shares with the tests, their entry and the other scripts) has no cycle and imports
nothing from the test suite."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]
ADDON = ROOT / "blender_addon"
SCRIPTS = ROOT / "scripts"
PRIMITIVES = ("budget", "names", "scene_revision", "blender_context", "summaries")
"""Below the domain's records: imported by them and by tools, importing neither."""
RECORDS = ("changes", "agent_history", "checkpoints", "frame_tasks")
DOMAIN = (*RECORDS, *PRIMITIVES)
NO_BPY = ("budget", "names", "scene_revision", "summaries")
MAX_FLOORS = 8


def _module(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules(root: Path = ADDON) -> dict[str, Path]:
    return {_module(path, root): path for path in root.rglob("*.py")}


def _edges(module: str, *, runtime_only: bool = False, root: Path = ADDON) -> set[str]:
    """The modules of this package `module` imports: every `from . import` (a type-checking one included, unless
    `runtime_only`, which also leaves out imports inside functions), and in scripts/ (where each script is a
    top-level module) every absolute import of another of its modules."""
    modules, path = _modules(root), _modules(root)[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if runtime_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if root != ADDON and isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            named = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found |= {name for name in named if name in modules and name != module}
            continue
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
        target = ".".join([*base, *(node.module.split(".") if node.module else [])])
        names = [f"{target}.{alias.name}".strip(".") for alias in node.names]
        for name in names if node.module is None else (target, *names):  # `from . import x` imports x alone
            if name in modules and name != module:
                found.add(name)
    return found


def _cycle(root: Path = ADDON) -> list[str] | None:
    """One cycle of the graph, if there is any."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(_edges(module, root=root)):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(_modules(root)):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_addon_has_no_import_cycle_even_for_a_type_checker() -> None:
    assert _cycle() is None


def test_the_primitives_and_the_summary_algebra_import_no_bpy() -> None:
    for module in NO_BPY:
        tree = ast.parse(_modules()[module].read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not {name for name in imported if name.split(".")[0] == "bpy"}, module


def test_the_domain_imports_no_tool_and_the_job_context_no_record_of_the_domain() -> None:
    for module in DOMAIN:
        assert not {target for target in _edges(module) if target.startswith("tools")}, module
    assert not _edges("tools.context") & set(DOMAIN)
    for module in PRIMITIVES:
        assert not _edges(module) & set(RECORDS), module


@cache
def _floors(module: str) -> tuple[str, ...]:
    """The longest chain of module-level imports from `module` down (a package's `__init__` that only hands names
    on is not a floor of its own)."""
    below = max((_floors(target) for target in _edges(module, runtime_only=True)), key=len, default=())
    return below if _modules()[module].name == "__init__.py" else (module, *below)


def test_the_addon_is_at_most_eight_floors_high() -> None:
    tallest = max((_floors(module) for module in _modules()), key=len)
    assert len(tallest) <= MAX_FLOORS, " -> ".join(tallest)


def test_scripts_have_no_import_cycle_even_for_a_type_checker() -> None:
    assert _cycle(SCRIPTS) is None


def test_nothing_in_scripts_imports_the_test_suite() -> None:
    for module, path in _modules(SCRIPTS).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level
        }
        from_tests = {name for name in imported if name.split(".")[0] == "tests"}
        assert not from_tests, module
