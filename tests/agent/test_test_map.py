"""tests/README.md maps every module to the tests that hold it, and names every test file: a new one missing from
the map fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(30)
ROOT = Path(__file__).resolve().parents[2]
MAP = (ROOT / "tests" / "README.md").read_text(encoding="utf-8")
ADDON_PART, TOOLKIT_PART = MAP.split("## The toolkit", 1)
"""Each package's modules are named in its own part of the map (both have an errors.py)."""


def _named(text: str) -> set[str]:
    return set(re.findall(r"[\w/.-]+\.py", text))


@pytest.mark.parametrize("package, part", [("blender_addon", ADDON_PART), ("hermes_blender", TOOLKIT_PART)])
def test_every_module_is_in_its_packages_part_of_the_map(package: str, part: str) -> None:
    named = _named(part)
    modules = sorted(
        str(path.relative_to(ROOT / package)) for path in (ROOT / package).rglob("*.py") if path.name != "__init__.py"
    )
    assert [module for module in modules if module not in named] == []


def test_every_test_file_is_in_the_map() -> None:
    named = _named(MAP)
    files = sorted(str(path.relative_to(ROOT / "tests")) for path in (ROOT / "tests").rglob("test_*.py"))
    assert [name for name in files if name not in named] == []
