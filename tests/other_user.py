"""A Blender Lab client run as a real process, as this user or as another one (`nobody`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

AS_NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")
needs_another_user = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="acting as another user needs Linux, root and setpriv (CI has all three)",
)
_CLIENT = """
import json, socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as sock:
    sock.sendall(json.dumps({"type": "execute", "code": sys.argv[2], "strict_json": True}).encode() + b"\\0")
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
print(reply.rstrip(b"\\0").decode())
"""


_SEND_AND_LEAVE = """
import json, socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
sock.sendall(json.dumps({"type": "execute", "code": sys.argv[2], "strict_json": True}).encode() + b"\\0")
sock.close()
"""
_HALF_CLOSE = """
import json, socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as sock:
    sock.sendall(json.dumps({"type": "execute", "code": sys.argv[2], "strict_json": True}).encode())
    sock.shutdown(socket.SHUT_WR)
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
print(reply.rstrip(b"\\0").decode())
"""


def send_and_leave(port: int, code: str, *, as_user: tuple[str, ...] = ()) -> None:
    """Connect, send a whole request and close at once: the race a peer check must not lose."""
    python = "/usr/bin/python3" if as_user else sys.executable
    run = subprocess.run([*as_user, python, "-c", _SEND_AND_LEAVE, str(port), code], capture_output=True, timeout=30)
    assert run.returncode == 0, run.stderr


def ask_lab_half_closed(port: int, code: str = "result = {}") -> dict[str, Any]:
    """A request ended by closing the sending side only, the answer still read (the wire allows it)."""
    run = subprocess.run(
        [sys.executable, "-c", _HALF_CLOSE, str(port), code], capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def ask_lab(port: int, code: str = "result = {}", *, as_user: tuple[str, ...] = ()) -> dict[str, Any]:
    python = "/usr/bin/python3" if as_user else sys.executable  # another user cannot reach our interpreter
    run = subprocess.run([*as_user, python, "-c", _CLIENT, str(port), code], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)
