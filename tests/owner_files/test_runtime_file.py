"""The runtime file: exact fields, owner-only, atomic, withdrawn only by its owner."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from blender_addon.owner_files import runtime_file
from tests.hostile_files import KINDS, place, posix_only


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_published_file_has_the_three_fields_and_extras(tmp_path: Path) -> None:
    path = tmp_path / "Blender" / "server.json"
    runtime_file.publish(
        path, url="http://127.0.0.1:4321", token="t0k", pid=os.getpid(), extra={"blender_version": "5.1.2"}
    )
    record = json.loads(path.read_text())
    assert record["http"] == "http://127.0.0.1:4321" and record["token"] == "t0k" and record["pid"] == os.getpid()
    assert record["blender_version"] == "5.1.2"
    assert list(tmp_path.glob("Blender/.server-*")) == []  # no temp file left behind


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_runtime_file_is_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "new" / "server.json"
    runtime_file.publish(path, url="http://127.0.0.1:1", token="t", pid=os.getpid())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_extras_can_never_override_the_contract_fields(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    runtime_file.publish(path, url="http://127.0.0.1:1", token="t", pid=7, extra={"pid": 1, "http": "x", "token": "y"})
    record = json.loads(path.read_text())
    assert {key: record[key] for key in ("pid", "http", "token")} == {
        "pid": 7,
        "http": "http://127.0.0.1:1",
        "token": "t",
    }


def test_stale_file_of_a_dead_process_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    dead = _dead_pid()
    path.write_text(json.dumps({"http": "http://127.0.0.1:9", "token": "old", "pid": dead}))
    publication = runtime_file.publish(path, url="http://127.0.0.1:10", token="new", pid=os.getpid())
    assert publication.replaced_pid == dead and not publication.replaced_live
    assert json.loads(path.read_text())["token"] == "new"


def test_file_of_another_live_blender_is_taken_over_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path.write_text(json.dumps({"http": "http://127.0.0.1:9", "token": "old", "pid": other.pid}))
        publication = runtime_file.publish(path, url="http://127.0.0.1:10", token="new", pid=os.getpid())
        assert publication.replaced_pid == other.pid and publication.replaced_live
    finally:
        other.kill()
        other.wait()


def test_withdraw_removes_only_a_file_that_still_names_this_process(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    runtime_file.publish(path, url="http://127.0.0.1:10", token="a", pid=os.getpid())
    assert not runtime_file.withdraw(path, url="http://127.0.0.1:11", pid=os.getpid())
    assert not runtime_file.withdraw(path, url="http://127.0.0.1:10", pid=os.getpid() + 1)
    assert path.exists()
    assert runtime_file.withdraw(path, url="http://127.0.0.1:10", pid=os.getpid())
    assert not path.exists()
    assert not runtime_file.withdraw(path, url="http://127.0.0.1:10", pid=os.getpid())


def test_declared_path_expands_home_like_hermes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("USERPROFILE", str(tmp_path))
    assert runtime_file.expand_declared_path() == tmp_path / "AppData" / "Local" / "Blender" / "server.json"


def test_pid_alive_tells_live_from_dead() -> None:
    assert runtime_file.pid_alive(os.getpid())
    assert not runtime_file.pid_alive(_dead_pid())
    assert not runtime_file.pid_alive(0)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX mode bits")
def test_an_existing_open_folder_of_ours_is_made_owner_only_but_a_sticky_shared_one_is_left_alone(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "Blender"
    mine.mkdir(mode=0o777)
    mine.chmod(0o777)
    runtime_file.publish(mine / "server.json", url="http://127.0.0.1:1", token="t" * 32, pid=os.getpid())
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    runtime_file.publish(shared / "server.json", url="http://127.0.0.1:1", token="t" * 32, pid=os.getpid())
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777


def test_a_newer_bridge_publishing_during_withdraw_keeps_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "server.json"
    runtime_file.publish(path, url="http://127.0.0.1:1", token="t" * 32, pid=os.getpid())
    judge = runtime_file.read_record

    def newer_publishes_meanwhile(where: Path) -> dict | None:
        record = judge(where)
        if not where.name.endswith(".withdrawing"):
            return record
        # The withdrawing bridge has just judged the file it moved aside its own...
        monkeypatch.setattr(runtime_file, "read_record", judge)
        runtime_file.publish(path, url="http://127.0.0.1:2", token="n" * 32, pid=os.getppid())  # ...then a newer one
        return record

    monkeypatch.setattr(runtime_file, "read_record", newer_publishes_meanwhile)
    assert runtime_file.withdraw(path, url="http://127.0.0.1:1", pid=os.getpid()) is True
    assert json.loads(path.read_text())["http"] == "http://127.0.0.1:2"


@posix_only
@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_file_at_the_path_reads_as_no_record_without_hanging(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "server.json"
    place(path, kind)
    assert runtime_file.read_record(path) is None
    if kind in ("fifo", "dev-zero"):
        path.unlink()
    runtime_file.publish(path, url="http://127.0.0.1:1", token="t" * 32, pid=os.getpid())  # and publishing works
    assert json.loads(path.read_text())["pid"] == os.getpid()


# --- several bridges at once -----------------------------------------------------------------


@pytest.fixture
def live_pids() -> Iterator[tuple[int, int]]:
    """Two real live processes whose pids bridge records can name."""
    processes = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    yield processes[0].pid, processes[1].pid
    for process in processes:
        process.kill()
        process.wait()


def _publish(path: Path, pid: int, port: int) -> None:
    runtime_file.publish(path, url=f"http://127.0.0.1:{port}", token=f"{port:0>32}", pid=pid)


def test_each_bridge_keeps_an_owner_only_record_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "Blender" / "server.json"
    _publish(path, os.getpid(), 1)
    own = path.parent / "servers" / f"{os.getpid()}.json"
    assert json.loads(own.read_text()) == json.loads(path.read_text())
    if sys.platform != "win32":
        assert stat.S_IMODE(own.stat().st_mode) == 0o600
        assert stat.S_IMODE(own.parent.stat().st_mode) == 0o700


def test_when_the_named_bridge_stops_the_newest_live_one_is_promoted(
    tmp_path: Path, live_pids: tuple[int, int]
) -> None:
    path = tmp_path / "server.json"
    older, newer = live_pids
    _publish(path, older, 1)
    _publish(path, newer, 2)
    _publish(path, os.getpid(), 3)
    assert runtime_file.withdraw(path, url="http://127.0.0.1:3", pid=os.getpid()) is True
    assert json.loads(path.read_text())["pid"] == newer
    assert not (path.parent / "servers" / f"{os.getpid()}.json").exists()
    # The older one stopping leaves the newer named; the newer stopping then promotes nobody dead.
    assert runtime_file.withdraw(path, url="http://127.0.0.1:1", pid=older) is False
    assert json.loads(path.read_text())["pid"] == newer
    assert runtime_file.withdraw(path, url="http://127.0.0.1:2", pid=newer) is True
    assert not path.exists()


def test_a_bridge_that_died_is_never_promoted_and_its_record_is_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    dead = _dead_pid()
    _publish(path, dead, 1)  # it crashed: its record stays behind until the next bridge publishes
    _publish(path, os.getpid(), 2)
    assert not (path.parent / "servers" / f"{dead}.json").exists()
    (path.parent / "servers" / f"{dead}.json").write_text(json.dumps({"pid": dead, "http": "http://127.0.0.1:1"}))
    assert runtime_file.withdraw(path, url="http://127.0.0.1:2", pid=os.getpid()) is True
    assert not path.exists()


def test_promotion_never_replaces_a_runtime_file_a_newer_bridge_has_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live_pids: tuple[int, int]
) -> None:
    path = tmp_path / "server.json"
    waiting, newest = live_pids
    _publish(path, waiting, 1)
    _publish(path, os.getpid(), 2)
    instances = runtime_file.live_instances

    def newest_publishes_meanwhile(where: Path) -> list[dict]:
        found = instances(where)
        _publish(path, newest, 3)
        return found

    monkeypatch.setattr(runtime_file, "live_instances", newest_publishes_meanwhile)
    assert runtime_file.withdraw(path, url="http://127.0.0.1:2", pid=os.getpid()) is True
    assert json.loads(path.read_text())["pid"] == newest


def test_a_record_that_names_another_pid_than_its_file_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    _publish(path, os.getpid(), 1)
    (path.parent / "servers" / "1.json").write_text(json.dumps({"pid": os.getpid(), "http": "http://127.0.0.1:9"}))
    assert [record["http"] for record in runtime_file.live_instances(path)] == ["http://127.0.0.1:1"]


def test_without_hard_links_a_stopping_blender_never_removes_the_file_that_names_another(
    tmp_path: Path, live_pids: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """FAT and exFAT (a user folder on a USB disk, some network shares) refuse link() with EPERM."""

    def no_links(*_: object, **__: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(runtime_file.os, "link", no_links)
    path = tmp_path / "server.json"
    older, newer = live_pids
    _publish(path, older, 1)
    _publish(path, newer, 2)
    assert runtime_file.withdraw(path, url="http://127.0.0.1:1", pid=older) is False
    assert json.loads(path.read_text())["pid"] == newer  # put back by a rename, not lost
    assert runtime_file.withdraw(path, url="http://127.0.0.1:2", pid=newer) is True
    assert not path.exists()
    _publish(path, older, 1)
    _publish(path, os.getpid(), 3)
    assert runtime_file.withdraw(path, url="http://127.0.0.1:3", pid=os.getpid()) is True
    assert json.loads(path.read_text())["pid"] == older  # promotion works without links too
