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


def test_tools_get_their_job_and_never_reach_the_dispatcher_the_interrupter_or_the_bridge() -> None:
    imports = _imports(ADDON / "tools")
    forbidden = ("..interrupt", "..dispatch", "..execution", "..runtime", "..service", "..progress")
    assert not [name for name in imports for root in forbidden if _touches(name, root)]


def test_net_declares_what_it_needs_from_the_job_side_and_imports_nothing_above_it() -> None:
    imports = _imports(ADDON / "net")
    above = ("..dispatch", "..progress", "..execution", "..tools", "..runtime", "..service", "..interrupt", "bpy")
    assert not [name for name in imports for root in above if _touches(name, root)]
    assert not (ADDON / "net" / "runtime_file.py").exists()  # the runtime file is owner_files/'s, not net/'s


def test_the_protocol_eras_are_objects_not_a_flag() -> None:
    """Two eras once were `modern: bool` spread over five places; a third had no place to go."""
    sources = {
        path: path.read_text() for folder in (ADDON, ADDON.parent / "hermes_blender") for path in folder.rglob("*.py")
    }
    assert not [path for path, text in sources.items() if "modern: bool" in text]
    naming_a_version = [path.name for path, text in sources.items() if '"2026-07-28"' in text.replace("'", '"')]
    assert naming_a_version == ["versions.py"]  # one module, read by the add-on and the toolkit alike


def test_one_module_of_the_toolkit_opens_connections_to_the_bridge() -> None:
    toolkit = ADDON.parent / "hermes_blender"
    dialling = sorted(
        path.name
        for path in toolkit.rglob("*.py")
        if any(
            call in path.read_text() for call in ("connect_tcp(", "create_connection(", "httpx2.", "streamable_http")
        )
    )
    assert dialling == ["lab.py", "transport.py"], dialling  # lab.py dials the Blender Lab port, another wire
