"""The Blender Lab listener serves only its own OS user: each OS branch on stated facts, Linux for real."""

from __future__ import annotations

import os
import socket
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from blender_addon.net.lab_protocol import LabConversation, LabSettings
from blender_addon.net.peer import PeerHost, peer_is_same_user, same_user_refusal
from tests.other_user import AS_NOBODY, ask_lab, needs_another_user

from .drivers import Served

OURS = ("127.0.0.1", 9876)
THEIRS = ("127.0.0.1", 51234)
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def _row(local: str, remote: str, uid: int) -> str:
    return f"   0: {local} {remote} 01 00000000:00000000 00:00000000 00000000 {uid:>5}        0 12345 1\n"


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
            refusal = same_user_refusal(conn, PeerHost(platform="darwin"))
    assert refusal is not None and "Require token" in refusal and "cannot tell" in refusal


class _Echo:
    def execute(self, code: str, strict_json: bool, connected: Any) -> dict[str, Any]:
        return {"status": "ok", "result": {"ran": code}}


def _lab(admit: Any, driver: str) -> Served:
    return Served(driver, partial(LabConversation, executor=_Echo(), settings=LabSettings(admit=admit)))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the real check needs Linux's /proc")
def test_a_real_process_of_this_user_runs_code(tmp_path: Path, driver: str) -> None:
    listener = _lab(same_user_refusal, driver)
    try:
        assert ask_lab(listener.address[1]) == {"status": "ok", "result": {"ran": "result = {}"}}
    finally:
        listener.stop()


@needs_another_user
def test_a_real_process_of_another_user_is_refused_before_it_can_send_code(driver: str) -> None:
    listener = _lab(same_user_refusal, driver)
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
