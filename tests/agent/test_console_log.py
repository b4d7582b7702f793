"""serve's copy of Blender's console rotates and is owner-only: a flood of output can neither fill the disk nor be read."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_blender.console_log import ConsoleLog

LINE = b"hermes_bridge: WARNING: refused HTTP 404 from peer port 51234: no such path\n"


def test_a_child_flooding_its_console_leaves_at_most_the_file_and_its_backups(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "serve.log"
    console = ConsoleLog(path, max_bytes=10_000, backups=2)
    flood = f"import sys\nfor _ in range(20000):\n    sys.stdout.buffer.write({LINE!r})\nprint('last line')"
    child = subprocess.Popen([sys.executable, "-c", flood], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert child.stdout is not None
    console.follow(child.stdout)
    assert child.wait(60) == 0
    console.close()
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["serve.log", "serve.log.1", "serve.log.2"]  # 1.6 MB went through, three files stay
    assert all((path.parent / name).stat().st_size <= 10_000 for name in files)
    assert path.read_bytes().endswith(b"last line\n")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_the_console_log_is_owner_only_also_one_an_older_version_left_readable(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "serve.log"
    ConsoleLog(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    old = tmp_path / "old.log"
    old.write_bytes(b"before\n")
    old.chmod(0o644)
    console = ConsoleLog(old, max_bytes=10)
    console.write(b"a line longer than ten bytes\n")  # a rotation: the new file is owner-only too
    console.close()
    assert stat.S_IMODE(old.stat().st_mode) == 0o600
    assert stat.S_IMODE(old.with_name("old.log.1").stat().st_mode) == 0o600
