"""A raw HTTP client of the bridge's event stream, for tests that close it mid-render (the 2026-07-28 cancel)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from hermes_blender.client import modern_request


def close_mid_range(runtime_file: Path, folder: Path) -> int:
    """Ask for `render_frames_to_folder` into `folder` with a progress token, read the event stream until its
    progress has come and a frame is written, then close it; how many frames were written at the close."""
    record = json.loads(runtime_file.read_text())
    params = {
        "name": "render_frames_to_folder",
        "arguments": {"output_folder": str(folder)},
        "_meta": {"progressToken": "r"},
    }
    body, headers = modern_request("tools/call", params)
    headers = {**headers, "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {record['token']}"}
    port = int(record["http"].rsplit(":", 1)[1].split("/")[0])
    head = "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    request = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request + body)
        seen = b""
        while b"notifications/progress" not in seen or not any(folder.iterdir()):
            seen += sock.recv(65536)
        assert seen.startswith(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"), seen[:200]
        return len(list(folder.iterdir()))
