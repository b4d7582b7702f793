"""Blender-side tests run inside a Blender through pytest-blender; plain runs stay plain."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the launcher wrapper is a POSIX shell script")


def _executable(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _pytest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_a_blender_side_test_file_runs_inside_blender_through_pytest_blender(tmp_path: Path) -> None:
    launcher = REPO_ROOT / "scripts" / "harness" / "blender_launcher.py"
    blender = _executable(tmp_path / "blender", f'exec "{sys.executable}" "{launcher}" "$@"')
    run = _pytest("--blender-executable", str(blender), "tests/blender/test_objects_summary.py")
    assert run.returncode == 0, run.stdout + run.stderr
    ran = re.search(r"(\d+) passed", run.stdout)
    assert ran is not None and int(ran.group(1)) > 0 and "failed" not in run.stdout, run.stdout


def test_plain_pytest_is_never_hijacked_even_with_a_blender_on_path(tmp_path: Path) -> None:
    _executable(tmp_path / "blender", "echo HIJACKED; exit 99")
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    run = _pytest("tests/net/test_auth_and_sessions.py", env=env)
    assert run.returncode == 0 and "HIJACKED" not in run.stdout + run.stderr
    assert "passed" in run.stdout


def test_the_launcher_reports_a_version_without_importing_bpy_and_honours_python_exit_code(tmp_path: Path) -> None:
    launcher = [sys.executable, str(REPO_ROOT / "scripts" / "harness" / "blender_launcher.py")]
    version = subprocess.run([*launcher, "--version"], capture_output=True, text=True, timeout=60)
    installed = importlib.metadata.version("bpy")  # whichever line this environment runs (see the CI matrix)
    assert version.returncode == 0 and version.stdout.startswith(f"Blender {installed}\n")
    failing = subprocess.run(
        [*launcher, "-b", "--python-exit-code", "7", "--python-expr", "raise ValueError('x')"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failing.returncode == 7 and "ValueError" in failing.stderr
    going_on = subprocess.run(
        [*launcher, "-b", "--python-expr", "raise ValueError('x')", "--python-expr", "print('after')"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert going_on.returncode == 0 and "after" in going_on.stdout
