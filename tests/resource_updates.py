"""A `subscriptions/listen` stream opened on a live bridge, its messages collected as they arrive (with the time
each arrived), for the tests that show what a listener hears."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

from hermes_blender.client import modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint

SCENE, CUBE = "blender://scene", "blender://objects/Cube"


class Listener:
    """One open stream, its messages collected on a thread as they arrive."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.arrivals: list[float] = []
        self.cut: Exception | None = None
        """Why the stream ended without its result, if it was cut."""
        self.ended = threading.Event()
        self._arrived = threading.Condition()

    def add(self, message: dict[str, Any]) -> None:
        with self._arrived:
            self.messages.append(message)
            self.arrivals.append(time.monotonic())
            self._arrived.notify_all()

    def first_arrival(self, uri: str) -> float | None:
        """When the first update of `uri` arrived (time.monotonic), if one did."""
        with self._arrived:
            for message, arrived in zip(self.messages, self.arrivals, strict=True):
                if message.get("method") == "notifications/resources/updated" and message["params"]["uri"] == uri:
                    return arrived
        return None

    def updated(self) -> list[str]:
        return [m["params"]["uri"] for m in self.messages if m.get("method") == "notifications/resources/updated"]

    def wait_for(self, uri: str, timeout: float) -> bool:
        with self._arrived:
            return self._arrived.wait_for(lambda: uri in self.updated(), timeout)


@contextmanager
def listening(runtime_file: Path, uris: list[str]) -> Iterator[Listener]:
    endpoint = read_live_endpoint(RuntimeFileSpec(path=str(runtime_file)))
    params = {"notifications": {"resourceSubscriptions": uris}}
    body, headers = modern_request("subscriptions/listen", params, 7)
    headers.update(endpoint.headers())
    headers["Accept"] = "application/json, text/event-stream"
    listener = Listener()
    acknowledged = threading.Event()

    def read() -> None:
        try:
            with httpx2.Client(timeout=httpx2.Timeout(10.0, read=None)) as http:
                with http.stream("POST", endpoint.url, content=body, headers=headers) as answer:
                    assert answer.status_code == 200, answer.read()
                    for line in answer.iter_lines():
                        if line.startswith("data: "):
                            message = json.loads(line[6:])
                            listener.add(message)
                            if message.get("method") == "notifications/subscriptions/acknowledged":
                                acknowledged.set()
        except httpx2.HTTPError as exc:  # Blender killed under it: a cut, not a graceful end
            listener.cut = exc
        listener.ended.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    assert acknowledged.wait(10), "no acknowledgment"
    yield listener
