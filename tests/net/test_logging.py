"""Refusals leave a trace in the bridge's log: reason and client port, never a credential or a body."""

from __future__ import annotations

import logging
from pathlib import Path

from blender_addon import log
from tests.net.conftest import Endpoint

SECRET_BODY = "print('the body stays out of the log')"


class _Records(logging.Handler):
    """Attached to the net logger itself: the add-on's logger does not propagate to the root."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_refused_request_is_logged_with_its_reason_and_port_but_no_token_or_body(endpoint: Endpoint) -> None:
    records = _Records()
    net = logging.getLogger("hermes_bridge.net")
    net.addHandler(records)
    try:
        status, _, _ = endpoint.post({"code": SECRET_BODY}, endpoint.headers(Authorization="Bearer stolen-guess-123"))
    finally:
        net.removeHandler(records)
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
