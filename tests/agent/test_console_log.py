"""serve's copy of Blender's console rotates and is owner-only: a flood of output can neither fill the disk nor be read."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_blender.console_log import ConsoleLog
from tests.other_user import OtherUser, needs_a_made_user

pytestmark = pytest.mark.timeout(120)

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


@pytest.fixture
def planted_home(other_user: OtherUser) -> Iterator[tuple[Path, Path]]:
    """A home of the made user (in a folder of root's every user may enter), in which that user, as themselves, has
    linked ~/.cache/hermes-blender/serve.log to a file of root's (0644, in a folder only root may write to): the
    home and root's file."""
    outer = Path(tempfile.mkdtemp(prefix="bb-planted-"))
    try:
        outer.chmod(0o755)
        home, roots = outer / "home", outer / "roots"
        home.mkdir()
        roots.mkdir(0o755)
        shutil.chown(home, other_user.uid, other_user.gid)
        (roots / "app.conf").write_text("root's own settings\n")
        (roots / "app.conf").chmod(0o644)
        log = home / ".cache" / "hermes-blender" / "serve.log"
        for command in (["mkdir", "-p", str(log.parent)], ["ln", "-s", str(roots / "app.conf"), str(log)]):
            subprocess.run([*other_user.run_as, *command], check=True, timeout=60)
        yield home, roots / "app.conf"
    finally:
        shutil.rmtree(outer)


@needs_a_made_user
def test_root_keeps_no_log_in_another_users_home_and_never_writes_or_chmods_through_their_link(
    planted_home: tuple[Path, Path],
) -> None:
    """`sudo -E hermes-blender serve`: root's log in the user's ~/.cache followed the link they planted there,
    appended Blender's console to root's file and made it 0600. Now the log is not kept, and says why; the pipe is
    still read to its end (a child would block on a full one) and its last lines are kept in memory."""
    home, roots_file = planted_home
    console = ConsoleLog(home / ".cache" / "hermes-blender" / "serve.log")
    child = subprocess.Popen([sys.executable, "-c", "print('Blender says hello')"], stdout=subprocess.PIPE)
    assert child.stdout is not None
    console.follow(child.stdout)
    assert child.wait(60) == 0
    console.close()
    assert roots_file.read_text() == "root's own settings\n" and stat.S_IMODE(roots_file.stat().st_mode) == 0o644
    assert console.refusal is not None and f"{home} (on the way to" in console.refusal, console.refusal
    assert "belongs to another user" in console.refusal
    assert list(console.tail) == [b"Blender says hello\n"]


def test_a_log_whose_folder_is_a_file_is_not_kept_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "logs").write_text("a file where the log's folder would be")
    console = ConsoleLog(tmp_path / "logs" / "serve.log")
    console.close()
    assert console.refusal == f"the log is not kept in {tmp_path / 'logs' / 'serve.log'}: logs: Not a directory"
