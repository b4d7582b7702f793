"""The house rules that keep layers apart, checked on the real modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ADDON = Path(__file__).resolve().parents[2] / "blender_addon"


def test_net_layer_never_imports_bpy() -> None:
    code = (
        "import sys, pkgutil, importlib, blender_addon.net as net\n"
        "for m in pkgutil.iter_modules(net.__path__): importlib.import_module('blender_addon.net.' + m.name)\n"
        "assert 'bpy' not in sys.modules, 'bpy was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ADDON.parent)


def _imports(folder: Path) -> set[str]:
    """Every imported module, dotted in full (`http.client`, `..net.http`, `..net` for `from .. import net`)."""
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = ("." * node.level) + (node.module or "")
                names.add(base)
                if node.module is None:  # `from .. import net` imports a module by its alias
                    names |= {base + alias.name for alias in node.names}
    return names


def _touches(name: str, forbidden: str) -> bool:
    return name == forbidden or name.startswith(forbidden + ".")


def test_tools_never_touch_sockets_or_the_network_layer() -> None:
    imports = _imports(ADDON / "tools")
    forbidden = ("socket", "selectors", "http", "urllib", "ssl", "asyncio", "..net")
    assert not [name for name in imports for root in forbidden if _touches(name, root)]
