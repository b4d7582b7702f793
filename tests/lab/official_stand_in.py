"""A stand-in for the official Blender Lab MCP server (its source is not reachable here): a stdio MCP server with
its `execute_blender_code` tool, which, as the official server does, dials BLENDER_MCP_HOST:BLENDER_MCP_PORT
(localhost:9876 when unset) for every call with no credential, sends the Lab wire's execute request and answers what
came back. Run as a script."""

from __future__ import annotations

import json
import os
import socket

from mcp.server.mcpserver import MCPServer

server = MCPServer("blender-lab-stand-in")


@server.tool()
def execute_blender_code(code: str) -> str:
    """Execute Python code in Blender (as the official server's tool of that name)."""
    host, port = os.environ.get("BLENDER_MCP_HOST", "localhost"), int(os.environ.get("BLENDER_MCP_PORT", "9876"))
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(json.dumps({"type": "execute", "code": code, "strict_json": True}).encode() + b"\0")
        reply = bytearray()
        while b"\0" not in reply:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    return bytes(reply.split(b"\0", 1)[0]).decode()


if __name__ == "__main__":
    server.run("stdio")
