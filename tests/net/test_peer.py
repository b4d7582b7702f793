"""The Blender Lab listener serves only its own OS user: each OS branch on stated facts, Linux for real."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from blender_addon.net.auth import Token
from blender_addon.net.lab_protocol import TOKEN_FRAME_BYTES, LabConversation, LabSettings
from blender_addon.net.peer import PeerHost, peer_is_same_user, peer_refusal, same_user
from blender_addon.net.sockets import peer_of
from tests.other_user import AS_NOBODY, ask_lab, ask_lab_half_closed, needs_another_user, send_and_leave

from .drivers import Served

OURS = ("127.0.0.1", 9876)
THEIRS = ("127.0.0.1", 51234)
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def _row(local: str, remote: str, uid: int, state: str = "01", inode: int = 12345) -> str:
    return f"   0: {local} {remote} {state} 00000000:00000000 00:00000000 00000000 {uid:>5}        0 {inode} 1\n"


def _hex(ip: str, port: int) -> str:
    return f"{int.from_bytes(socket.inet_aton(ip), sys.byteorder):08X}:{port:04X}"


def _linux(tmp_path: Path, tcp: str = "", tcp6: str = "", my_uid: int = 1000) -> PeerHost:
    (tmp_path / "tcp").write_text(HEADER + tcp)
    (tmp_path / "tcp6").write_text(HEADER + tcp6)
    return PeerHost(platform="linux", proc_net=tmp_path, sock_diag=None, my_uid=lambda: my_uid)


def test_linux_peer_of_the_same_uid_is_admitted_and_another_uid_refused(tmp_path: Path) -> None:
    # Our accepted socket (local OURS) and the peer's socket (local THEIRS) both appear; only the latter counts.
    table = _row(_hex(*OURS), _hex(*THEIRS), 0) + _row(_hex(*THEIRS), _hex(*OURS), 1000)
    assert peer_is_same_user(OURS, THEIRS, _linux(tmp_path, table, my_uid=1000)) is True
    assert peer_is_same_user(OURS, THEIRS, _linux(tmp_path, table, my_uid=0)) is False


def test_linux_peer_on_a_dual_stack_socket_is_found_in_tcp6(tmp_path: Path) -> None:
    mapped = "0000000000000000FFFF0000" + _hex(*THEIRS)[:8] + ":" + _hex(*THEIRS)[9:]
    ours = "0000000000000000FFFF0000" + _hex(*OURS)[:8] + ":" + _hex(*OURS)[9:]
    host = _linux(tmp_path, tcp6=_row(mapped, ours, 1000))
    assert peer_is_same_user(OURS, THEIRS, host) is True


@pytest.mark.parametrize(("state", "inode"), [("06", 0), ("04", 0), ("05", 0), ("07", 0), ("01", 0), ("08", 12345)])
def test_linux_peer_socket_no_process_holds_has_no_owner(tmp_path: Path, state: str, inode: int) -> None:
    """Closed, time-wait and orphaned entries read as uid 0: a Blender run as root must not take them for itself."""
    table = _row(_hex(*THEIRS), _hex(*OURS), 0, state, inode)
    assert peer_is_same_user(OURS, THEIRS, _linux(tmp_path, table, my_uid=0)) is None


def test_linux_peer_that_half_closed_but_still_reads_keeps_its_owner(tmp_path: Path) -> None:
    table = _row(_hex(*THEIRS), _hex(*OURS), 1000, "05")  # FIN_WAIT2, still held by its process
    assert peer_is_same_user(OURS, THEIRS, _linux(tmp_path, table, my_uid=1000)) is True


def test_linux_peer_that_cannot_be_found_is_unknown_not_admitted(tmp_path: Path) -> None:
    assert peer_is_same_user(OURS, THEIRS, _linux(tmp_path)) is None


def test_windows_compares_the_token_users_of_both_processes() -> None:
    users = {os.getpid(): "S-1-5-21-1", 4242: "S-1-5-21-1", 777: "S-1-5-21-2"}

    def host(pid: int | None) -> PeerHost:
        return PeerHost(platform="win32", windows_peer_pid=lambda ours, theirs: pid, windows_user_of=users.get)

    assert peer_is_same_user(OURS, THEIRS, host(4242)) is True
    assert peer_is_same_user(OURS, THEIRS, host(777)) is False
    assert peer_is_same_user(OURS, THEIRS, host(None)) is None
    assert peer_is_same_user(OURS, THEIRS, host(999)) is None  # a process whose token cannot be read


def test_macos_cannot_tell_and_says_what_to_do_instead() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
        with client, conn:
            refusal = peer_refusal(same_user(peer_of(conn), PeerHost(platform="darwin")), token_required=False)
    assert refusal is not None and "Require token" in refusal and "cannot tell" in refusal


class _Echo:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def run_lab_code(self, code: str, strict_json: bool, connected: Any) -> dict[str, Any]:
        self.ran.append(code)
        return {"status": "ok", "result": {"ran": code}}


def _lab(identify: Any, driver: str, executor: _Echo | None = None, token: Token | None = None) -> Served:
    settings = LabSettings(identify=identify, token=token)
    return Served(driver, partial(LabConversation, executor=executor or _Echo(), settings=settings))


def _late(conn: socket.socket) -> bool | None:
    """The check as a loaded bridge makes it: after the client had time to send and leave (a busy loop, the GIL)."""
    time.sleep(0.3)
    return same_user(conn)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the real check needs Linux's /proc")
def test_a_real_process_of_this_user_runs_code(tmp_path: Path, driver: str) -> None:
    listener = _lab(same_user, driver)
    try:
        assert ask_lab(listener.address[1]) == {"status": "ok", "result": {"ran": "result = {}"}}
    finally:
        listener.stop()


@needs_another_user
def test_a_real_process_of_another_user_is_refused_before_it_can_send_code(driver: str) -> None:
    listener = _lab(same_user, driver)
    try:
        answer = ask_lab(listener.address[1], as_user=AS_NOBODY)
    finally:
        listener.stop()
    assert answer["status"] == "error" and "belongs to another OS user" in answer["message"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="netlink sock_diag is Linux")
def test_the_kernels_answer_and_the_proc_table_name_the_same_owner() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
        with client, conn:
            ours, theirs = conn.getsockname(), conn.getpeername()
            fast = PeerHost().sock_diag(ours, theirs)  # type: ignore[misc]
            slow = peer_is_same_user(ours, theirs, PeerHost(sock_diag=None))
    assert fast == os.getuid() and slow is True


@needs_another_user
@pytest.mark.parametrize("token", [None, Token("t" * 43)], ids=["no-token", "require-token"])
def test_another_user_who_sends_and_closes_before_the_check_never_runs_code_in_a_root_blender(
    driver: str, token: Token | None
) -> None:
    """The root case: the orphaned socket reads as uid 0, which must not pass for the bridge's own user."""
    echo = _Echo()
    listener = _lab(_late, driver, echo, token)
    try:
        for attempt in range(5):
            send_and_leave(listener.address[1], f"marker-{attempt}", as_user=AS_NOBODY)
        assert ask_lab(listener.address[1], as_user=AS_NOBODY)["status"] == "error"  # the last one waited its turn
    finally:
        listener.stop()
    assert echo.ran == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the real check needs Linux's /proc")
def test_a_real_client_of_this_user_that_half_closes_is_still_served(driver: str) -> None:
    listener = _lab(_late, driver)
    try:
        assert ask_lab_half_closed(listener.address[1]) == {"status": "ok", "result": {"ran": "result = {}"}}
    finally:
        listener.stop()


@needs_another_user
def test_another_user_is_refused_at_once_even_when_a_token_is_required(driver: str) -> None:
    """With "Require token" the same-user check still runs: another user's request is never read, let alone parsed."""
    echo = _Echo()
    listener = _lab(same_user, driver, echo, Token("t" * 43))
    try:
        answer = ask_lab(listener.address[1], as_user=AS_NOBODY)
    finally:
        listener.stop()
    assert answer["status"] == "error" and "belongs to another OS user" in answer["message"] and echo.ran == []


def test_a_peer_of_unknown_user_gets_only_a_small_first_frame_read_before_its_token(driver: str) -> None:
    """Where the owner cannot be told, a request must open with its token: nothing past the first frame is read."""
    echo = _Echo()
    token = Token("t" * 43)
    listener = _lab(lambda conn: None, driver, echo, token)
    try:
        with socket.create_connection(listener.address, timeout=10) as sock:
            sock.sendall(b'{"type": "execute", "code": "' + b"x" * TOKEN_FRAME_BYTES)
            refusal = sock.recv(65536)  # answered before the rest of a large request is ever sent
        good = json.dumps({"token": "t" * 43, "type": "execute", "code": "result = {}", "strict_json": True})
        with socket.create_connection(listener.address, timeout=10) as sock:
            sock.sendall(good.encode() + b"\0")
            accepted = sock.recv(65536)
    finally:
        listener.stop()
    assert "open the request with the `token`" in json.loads(refusal.rstrip(b"\0"))["message"]
    assert json.loads(accepted.rstrip(b"\0"))["status"] == "ok" and echo.ran == ["result = {}"]
