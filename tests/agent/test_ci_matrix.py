"""CI's Blender matrix runs every test a Blender line can change: a new end-to-end file is in it until it is named,
with its reason, as one no line reaches."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import SAME_ON_EVERY_LINE

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "tests" / "e2e"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    return names | {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}


def test_each_file_kept_off_the_other_lines_exists_says_why_and_runs_no_blender_in_this_process() -> None:
    for name, why in SAME_ON_EVERY_LINE.items():
        path = E2E / name
        assert path.is_file(), f"{name} is named as same on every line but is not in tests/e2e"
        assert why.strip(), f"{name} needs its reason"
        assert "bpy" not in _imports(path), f"{name} imports bpy: a Blender line reaches it"


def test_the_marker_lands_on_exactly_the_named_files() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "same_on_every_line", "tests/e2e"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    files = {line.split("::")[0].removeprefix("tests/e2e/") for line in listed.stdout.splitlines() if "::" in line}
    assert files == set(SAME_ON_EVERY_LINE)


def test_ci_runs_the_matrix_without_only_those_and_the_readme_command_with_everything() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    matrix = re.search(r"^MATRIX=\((.*)\)$", script, re.M)
    assert matrix is not None
    assert matrix.group(1).split() == [
        "-q",
        "--durations=15",
        "-m",
        '"not',
        'same_on_every_line"',
        "tests/blender",
        "tests/e2e",
    ]
    listed = re.search(r"^LINES=\((.*)\)$", script, re.M)
    assert listed is not None and 'bash scripts/bpy_line.sh "$python" "$bpy" "${MATRIX[@]}"' in script
    lines = [line.split()[1] for line in re.findall(r'"([^"]*)"', listed.group(1))]
    assert lines == ["5.3.0", "4.5.15"]
    # The README's command runs the 5.2 LTS line (uv.lock) with every tier: a matrix line of it would run it twice.
    locked = re.search(r"bpy==(\S+); python_version", (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert locked is not None and locked.group(1).startswith("5.2.") and locked.group(1) not in lines
    assert re.search(r'^"\$\{UV\[@\]\}" run pytest --durations=30 ', script, re.M)
