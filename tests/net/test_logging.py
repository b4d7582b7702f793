"""Refusals leave a trace in the bridge's log: reason and client port, never a credential or a body."""

from __future__ import annotations

import contextlib
import logging
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from blender_addon import log
from blender_addon.net.refusals import MAX_KINDS, OTHER, RefusalLog
from tests.net.conftest import Endpoint, start_endpoint

SECRET_BODY = "print('the body stays out of the log')"


@contextlib.contextmanager
def _recording(name: str) -> Iterator[tuple[logging.Logger, _Records]]:
    """A logger of its own, every record it gets kept."""
    records, logger = _Records(), logging.getLogger(name)
    logger.addHandler(records)
    try:
        yield logger, records
    finally:
        logger.removeHandler(records)


class _Records(logging.Handler):
    """Attached to the net logger itself (the add-on's logger does not propagate to the root), at every level."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_refused_request_is_logged_with_its_reason_and_port_but_no_token_or_body(endpoint: Endpoint) -> None:
    records = _Records()
    net = logging.getLogger("hermes_bridge.net")
    net.addHandler(records)
    level, net.level = net.level, logging.DEBUG  # a line at DEBUG or INFO must not carry a secret either
    try:
        status, _, _ = endpoint.post({"code": SECRET_BODY}, endpoint.headers(Authorization="Bearer stolen-guess-123"))
    finally:
        net.removeHandler(records)
        net.setLevel(level)
    assert status == 401
    [message] = records.messages
    assert message.startswith("refused HTTP 401 from peer port ") and "unauthorized" in message
    for secret in ("stolen-guess-123", endpoint.token.reveal(), SECRET_BODY):
        assert secret not in message


def test_the_log_file_rotates_and_an_unwritable_folder_never_stops_the_bridge(tmp_path: Path) -> None:
    try:
        path = log.configure(tmp_path / "logs" / "bridge.log")
        assert path == tmp_path / "logs" / "bridge.log"
        log.logger.info("x" * 2048)
        for _ in range(log.MAX_BYTES // 2048 + 1):
            log.logger.info("x" * 2048)
        assert (tmp_path / "logs" / "bridge.log.1").is_file()
        blocked = tmp_path / "file-not-folder"
        blocked.write_text("")
        assert log.configure(blocked / "bridge.log") is None
    finally:
        log.configure(None)


def test_a_flood_of_refusals_writes_a_burst_then_one_line_saying_how_many_were_suppressed() -> None:
    now = [0.0]
    refusals = RefusalLog(burst=3, window=60.0, clock=lambda: now[0])
    with _recording("hermes_bridge.test-flood") as (logger, records):
        for _ in range(1000):
            refusals.refused(logger, "HTTP 404", "no such path")
        refusals.refused(logger, "HTTP 401", "unauthorized")  # another kind has a burst of its own
        now[0] = 61.0
        refusals.refused(logger, "HTTP 404", "no such path")
        for _ in range(5):
            refusals.refused(logger, "HTTP 401", "unauthorized")
        refusals.flush(logger)
    assert records.messages == [
        *["refused HTTP 404 from peer port ?: no such path"] * 3,
        "refused HTTP 401 from peer port ?: unauthorized",
        "997 more refusals of HTTP 404 (no such path) were suppressed",
        "refused HTTP 404 from peer port ?: no such path",
        *["refused HTTP 401 from peer port ?: unauthorized"] * 3,  # a new window: a new burst
        "2 more refusals of HTTP 401 (unauthorized) were suppressed",  # said at stop
    ]


def test_refusals_go_to_the_log_file_only_never_also_to_the_captured_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_file = log.configure(tmp_path / "logs" / "bridge.log")
    try:
        RefusalLog().refused(logging.getLogger("hermes_bridge.net"), "HTTP 404", "no such path\u202e\nforged line")
        log.logger.warning("a warning the console shows")
    finally:
        log.configure(None)
    assert log_file is not None
    written = log_file.read_text()
    assert "no such path\\u202e\\u000aforged line" in written and "\nforged line" not in written
    console = capsys.readouterr().err
    assert "a warning the console shows" in console and "no such path" not in console


def test_a_line_naming_a_path_that_is_not_utf8_is_written_with_the_bytes_escaped(tmp_path: Path) -> None:
    """Python reads such a path with surrogates, which strict UTF-8 cannot write: the whole line was dropped."""
    path = "/home/caf\udce9/scene.blend"
    try:
        log_file = log.configure(tmp_path / "bridge.log")
        log.logger.info("opened %s", path)
        log.logger.info("a client asked for %s", log.one_line(path))
    finally:
        log.configure(None)
    assert log_file is not None
    lines = log_file.read_text(encoding="utf-8").splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [
        "opened /home/caf\\udce9/scene.blend",
        "a client asked for /home/caf\\udce9/scene.blend",
    ]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_log_files_are_owner_only_in_an_owner_only_folder_also_ones_that_existed(tmp_path: Path) -> None:
    folder = tmp_path / "hermes_bridge"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    old = folder / "bridge.log"
    old.write_text("from an older version\n")
    old.chmod(0o644)
    try:
        log_file = log.configure(old)
        log.logger.warning("one line")
    finally:
        log.configure(None)
    assert log_file == old
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(old.stat().st_mode) == 0o600


def _strangers(port: int) -> list[bytes]:
    """One request of each kind a client without the token can have refused."""
    host = f"Host: 127.0.0.1:{port}\r\n".encode()
    return [
        b"POST /mcp HTTP/1.1\r\n" + host + b"Content-Length: 2\r\n\r\n{}",  # no token: 401
        b"POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 2\r\n\r\n{}",  # 403
        b"GET /nowhere HTTP/1.1\r\n" + host + b"\r\n",  # 404
        b"NONSENSE\r\n\r\n",  # 400
        b"GET /mcp HTTP/1.1\r\n" + host + b"X: " + b"a" * 70_000 + b"\r\n\r\n",  # 431
        b"GET /mcp HTTP/9.9\r\n" + host + b"\r\n",
    ]


@pytest.mark.timeout(300)
def test_a_marker_written_before_a_flood_of_every_kind_a_stranger_can_cause_is_still_in_the_logs(
    driver: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small log files (16 KiB, three backups) that a few hundred unlimited lines would rotate away."""
    monkeypatch.setattr(log, "MAX_BYTES", 16 * 1024)
    monkeypatch.setattr("blender_addon.net.refusals.refusals", RefusalLog())
    monkeypatch.setattr("blender_addon.net.admission.refusals", RefusalLog())
    endpoint = start_endpoint(driver=driver, max_connections=4)
    try:
        log.configure(tmp_path / "bridge.log")
        log.logger.warning("MARKER before the flood")
        for _ in range(150):
            for request in _strangers(endpoint.port):
                with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as sock:
                    try:
                        sock.sendall(request)
                        while sock.recv(65536):
                            pass
                    except OSError:
                        pass  # refused and closed before all of it was sent: a reset, as a stranger gets
            idle = [socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) for _ in range(14)]
            # Each one past the cap closes an older one for room: the oldest is closed once the bridge has taken the
            # fifth, which a loaded machine may do after the client gave up on all of them (no cap, no line).
            assert idle[0].recv(1) == b""
            for sock in idle:
                sock.close()
    finally:
        endpoint.listener.stop()
        log.configure(None)
    kept = "".join(path.read_text() for path in tmp_path.glob("bridge.log*"))
    assert "MARKER before the flood" in kept
    assert "connection cap (4) reached" in kept and "refused HTTP 401" in kept  # the flood was seen, then limited


def test_a_flood_that_never_ends_gets_longer_windows_and_new_kinds_share_one_burst() -> None:
    now = [0.0]
    refusals = RefusalLog(burst=2, window=60.0, clock=lambda: now[0], total_burst=10_000)
    with _recording("hermes_bridge.test-endless") as (logger, records):
        for minute in range(8):  # an endless flood of one kind: windows of 60, 120, 240 s ...
            now[0] = minute * 60.0
            for _ in range(100):
                refusals.refused(logger, "HTTP 404", "no such path")
        written = len(records.messages)
        for n in range(MAX_KINDS * 3):  # kinds a client could vary: past the bound they share one
            refusals.say(logger, f"kind {n}", f"line {n}")
    assert written == 2 + (1 + 2) * 3  # windows start at 0, 60, 180, 420 s: a burst each, the count before it
    other = [m for m in records.messages[written:] if m.startswith(OTHER)]
    assert len(records.messages) - written == MAX_KINDS - 1 + len(other) and len(other) == 2


def test_kinds_each_kept_under_their_own_burst_still_share_one_budget_that_stretches_while_they_last() -> None:
    """A stranger who sends 13 kinds of refusal, each just under its own burst every window, for a day."""
    now = [0.0]
    refusals = RefusalLog(burst=20, window=60.0, clock=lambda: now[0], total_burst=60)
    with _recording("hermes_bridge.test-many-kinds") as (logger, records):
        for minute in range(24 * 60):
            now[0] = minute * 60.0
            for kind in range(13):
                for _ in range(19):
                    refusals.refused(logger, f"HTTP 4{kind:02d}", "refused")
    # Unlimited per kind this is 355,680 lines; one shared budget whose window doubles to an hour while the flood
    # lasts lets through a window's 60 lines and each kind's count of the rest, about every hour.
    assert len(records.messages) < 24 * (60 + 13) + 300
