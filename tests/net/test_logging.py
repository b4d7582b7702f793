"""Refusals leave a trace in the bridge's log: reason and client port, never a credential or a body."""

from __future__ import annotations

import logging
import stat
import sys
from pathlib import Path

import pytest

from blender_addon import log
from blender_addon.net.refusals import RefusalLog
from tests.net.conftest import Endpoint

SECRET_BODY = "print('the body stays out of the log')"


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
    records = _Records()
    logger = logging.getLogger("hermes_bridge.test-flood")
    logger.addHandler(records)
    try:
        for _ in range(1000):
            refusals.refused(logger, "HTTP 404", "no such path")
        refusals.refused(logger, "HTTP 401", "unauthorized")  # another kind has a burst of its own
        now[0] = 61.0
        refusals.refused(logger, "HTTP 404", "no such path")
        for _ in range(5):
            refusals.refused(logger, "HTTP 401", "unauthorized")
        refusals.flush(logger)
    finally:
        logger.removeHandler(records)
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
