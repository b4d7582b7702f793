"""A scripted stand-in for the model APIs of Claude Code and Gemini CLI, on loopback, to see what a CLI hands its model.

Neither CLI calls an MCP tool without a model. Their base-URL settings (`ANTHROPIC_BASE_URL`,
`GOOGLE_GEMINI_BASE_URL`) point here; the stand-in asks for one call of the tool named at start, then ends the
turn. Every request body is kept, so a test reads the tool's result exactly as the model would receive it (it
travels in the next request). Requests the CLIs make on the side (titles, routing, token counts) get a short
text answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ModelStandIn:
    """The recorded requests, and the one tool call each conversation asks for."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.tool = tool
        self.arguments = arguments
        self.requests: list[str] = []
        self._lock = threading.Lock()

    def tool_results(self) -> list[str]:
        """Each tool result as the model received it: Claude's `tool_result` blocks, Gemini's `functionResponse`s."""
        found = []
        for body in self.requests:
            try:
                request = json.loads(body)
            except ValueError:
                continue
            for item in request.get("contents", []):
                found += [json.dumps(part["functionResponse"]) for part in item["parts"] if "functionResponse" in part]
            for message in request.get("messages", []):
                blocks = message.get("content") if isinstance(message.get("content"), list) else []
                found += [json.dumps(block) for block in blocks if block.get("type") == "tool_result"]
        return found

    def keep(self, body: str) -> None:
        with self._lock:
            self.requests.append(body)

    def gemini(self, request: dict[str, Any]) -> dict[str, Any]:
        """A generateContent answer: the tool call when the request offers the tool and has no result yet."""
        declared = [
            declaration.get("name", "")
            for tool in request.get("tools", [])
            for declaration in tool.get("functionDeclarations", [])
        ]
        name = next((name for name in declared if name.endswith(self.tool)), None)
        answered = any("functionResponse" in part for item in request.get("contents", []) for part in item["parts"])
        if name is not None and not answered:
            part: dict[str, Any] = {"functionCall": {"name": name, "args": self.arguments}}
        else:
            part = {"text": "Done."}
        return {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        }

    def claude(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The events of one Messages answer: the tool use when the request offers the tool and has no result yet."""
        name = next(
            (tool["name"] for tool in request.get("tools", []) if tool.get("name", "").endswith(self.tool)), None
        )
        answered = any(
            isinstance(block, dict) and block.get("type") == "tool_result"
            for message in request.get("messages", [])
            if isinstance(message.get("content"), list)
            for block in message["content"]
        )
        if name is not None and not answered:
            block: dict[str, Any] = {"type": "tool_use", "id": "toolu_stand_in", "name": name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(self.arguments)}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": "Done."}
            stop = "end_turn"
        usage = {"input_tokens": 1, "output_tokens": 1}
        message = {
            "id": "msg_stand_in",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "claude"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        return [
            {"type": "message_start", "message": message},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage},
            {"type": "message_stop"},
        ]


def _handler(model: ModelStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the requests are kept, not printed."""

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
            model.keep(body)
            try:
                request = json.loads(body)
            except ValueError:
                request = {}
            if "contents" in request:
                self._gemini(model.gemini(request))
            elif "messages" in request:
                self._claude(model.claude(request), stream=bool(request.get("stream")))
            else:
                self._send(200, "application/json", b"{}")

        def do_GET(self) -> None:
            self._send(200, "application/json", b"{}")

        def _gemini(self, answer: dict[str, Any]) -> None:
            if "stream" in self.path.lower():
                self._send(200, "text/event-stream", f"data: {json.dumps(answer)}\r\n\r\n".encode())
            else:
                self._send(200, "application/json", json.dumps(answer).encode())

        def _claude(self, events: list[dict[str, Any]], *, stream: bool) -> None:
            if stream:
                text = "".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events)
                self._send(200, "text/event-stream", text.encode())
                return
            message = {**events[0]["message"], "content": [events[1]["content_block"]]}
            block = message["content"][0]
            if block["type"] == "tool_use":
                block["input"] = json.loads(events[2]["delta"]["partial_json"])
            else:
                block["text"] = events[2]["delta"]["text"]
            message["stop_reason"] = events[4]["delta"]["stop_reason"]
            self._send(200, "application/json", json.dumps(message).encode())

        def _send(self, status: int, kind: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def model_stand_in(tool: str, arguments: dict[str, Any] | None = None) -> Iterator[tuple[ModelStandIn, str]]:
    """The stand-in serving on a loopback port, and its base URL."""
    model = ModelStandIn(tool, arguments or {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(model))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
