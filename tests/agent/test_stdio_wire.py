"""The stdio server's own wire: pipes served by the event loop, nothing else on it, and its log file.

Raw JSON lines over real pipes to a real `hermes-blender mcp` process (no Blender needed: the handshake and a
ping are the server's own); the official clients drive it in tests/e2e/test_stdio_server.py and tests/clients.
"""

from __future__ import annotations

import json
import os
import pty
import stat
import subprocess
import sys
import tty
from pathlib import Path
from typing import IO, Any

import pytest

from hermes_blender.stdio_wire import MAX_LINE
from tests.stdio_frames import INITIALIZE, INITIALIZED

pytestmark = pytest.mark.timeout(60)


def _start(
    tmp_path: Path, *extra: str, stdin: Any = subprocess.PIPE, stdout: Any = subprocess.PIPE
) -> subprocess.Popen:
    command = [sys.executable, "-m", "hermes_blender.cli", "mcp", "--runtime-file", str(tmp_path / "none.json")]
    errlog = (tmp_path / "stderr.txt").open("w")
    return subprocess.Popen([*command, *extra], stdin=stdin, stdout=stdout, stderr=errlog)


def _send(pipe: IO[bytes], *messages: dict[str, Any]) -> None:
    pipe.write(b"".join(json.dumps(message).encode() + b"\n" for message in messages))
    pipe.flush()


def _answer(pipe: IO[bytes]) -> dict[str, Any]:
    return json.loads(pipe.readline())


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("Threads:")[1].split()[0])


@pytest.fixture
def server(tmp_path: Path) -> Any:
    process = _start(tmp_path)
    assert process.stdin is not None and process.stdout is not None
    _send(process.stdin, INITIALIZE)
    assert _answer(process.stdout)["result"]["protocolVersion"] == "2025-06-18"
    _send(process.stdin, INITIALIZED)
    yield process
    process.stdin.close()
    assert process.wait(timeout=20) == 0
    process.stdout.close()


def test_pipes_are_served_by_the_event_loop_without_worker_threads(server: subprocess.Popen) -> None:
    for n in range(2, 12):
        _send(server.stdin, {"jsonrpc": "2.0", "id": n, "method": "ping"})
        assert _answer(server.stdout) == {"jsonrpc": "2.0", "id": n, "result": {}}
    assert _threads(server.pid) == 1  # the SDK's transport reads and writes through worker threads


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the server's descriptors from /proc")
def test_nothing_but_the_transport_can_write_to_the_protocol(server: subprocess.Popen, tmp_path: Path) -> None:
    _send(server.stdin, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    _answer(server.stdout)
    fds = Path(f"/proc/{server.pid}/fd")
    assert os.readlink(fds / "0") == os.devnull
    assert os.readlink(fds / "1") == str(tmp_path / "stderr.txt")  # a stray print lands in the log


def test_a_message_over_the_limit_is_dropped_said_in_the_log_and_the_session_goes_on(
    server: subprocess.Popen, tmp_path: Path
) -> None:
    block = b"x" * (1024 * 1024)
    for _ in range(MAX_LINE // len(block) + 2):
        server.stdin.write(block)
    server.stdin.write(b"\n")
    _send(server.stdin, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert _answer(server.stdout) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert "a message over 64 MiB; it was dropped" in (tmp_path / "stderr.txt").read_text()


def test_a_terminal_is_served_through_the_sdks_transport_and_left_blocking(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    tty.setraw(terminal)
    process = _start(tmp_path, stdin=terminal)
    try:
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        os.write(controller, b"".join(json.dumps(m).encode() + b"\n" for m in (INITIALIZE, INITIALIZED, ping)))
        assert [_answer(process.stdout)["id"] for _ in range(2)] == [1, 2]
        assert os.get_blocking(terminal)  # the user's shell shares this terminal: never left non-blocking
    finally:
        process.kill()
        process.wait(timeout=20)
        process.stdout.close()
        os.close(controller)
        os.close(terminal)


def test_log_file_is_owner_only_and_holds_what_stderr_says(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "mcp.log"
    process = _start(tmp_path, "--log-file", str(log_file))
    block = b"x" * (1024 * 1024)
    for _ in range(MAX_LINE // len(block) + 2):
        process.stdin.write(block)
    process.stdin.write(b"\n")
    process.stdin.close()
    assert process.wait(timeout=30) == 0
    process.stdout.close()
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert "a message over 64 MiB; it was dropped" in log_file.read_text()
    assert "a message over 64 MiB; it was dropped" in (tmp_path / "stderr.txt").read_text()


def test_a_client_that_reads_late_gets_every_answer_whole(server: subprocess.Popen) -> None:
    requests = [{"jsonrpc": "2.0", "id": n, "method": "tools/list"} for n in range(2, 102)]
    _send(server.stdin, *requests)  # about 3 MB of answers, far more than a pipe holds, before one is read
    answers = [_answer(server.stdout) for _ in requests]
    assert sorted(answer["id"] for answer in answers) == list(range(2, 102))
    assert all(len(answer["result"]["tools"]) == len(answers[0]["result"]["tools"]) for answer in answers)
