"""The official Blender Lab server's side of the bridge protocol, for checks and tests.

One request per connection: JSON plus a NUL byte out, read to the first NUL (or EOF) back.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from .errors import ToolCallFailed

LAB_HOST = "127.0.0.1"


def lab_exchange(port: int, payload: bytes, *, host: str = LAB_HOST, timeout: float = 30.0) -> bytes:
    """Send raw bytes, return everything up to the first NUL or the end of the reply."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(payload)
            reply = bytearray()
            while b"\0" not in reply:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
    except OSError as exc:
        raise ToolCallFailed(f"cannot reach the Blender Lab listener at {host}:{port}: {exc}") from None
    return bytes(reply.split(b"\0", 1)[0])


def lab_execute(
    port: int, code: str, *, strict_json: bool = True, token: str | None = None, timeout: float = 30.0
) -> dict[str, Any]:
    """Run code through the Lab listener as the official server does; the reply envelope."""
    request: dict[str, Any] = {} if token is None else {"token": token}  # first: the bridge reads it before the rest
    request |= {"type": "execute", "code": code, "strict_json": strict_json}
    reply = lab_exchange(port, json.dumps(request).encode() + b"\0", timeout=timeout)
    try:
        envelope = json.loads(reply)
    except ValueError:
        raise ToolCallFailed(f"the Blender Lab listener on port {port} answered something that is not JSON") from None
    if not isinstance(envelope, dict):
        raise ToolCallFailed(f"the Blender Lab listener on port {port} answered a non-object")
    return envelope
