"""Clients that keep Blender's main thread busy, to stop, disable or quit it under load."""

from __future__ import annotations

import http.client
import json
import threading

from hermes_blender.contract.liveness import LiveEndpoint
from tests.gui.harness import McpLink

SHORT_JOB = "import time\ntime.sleep(0.03)\nresult = {}"


class BusyClient(threading.Thread):
    """Posts short jobs back to back on one keep-alive connection until the bridge goes away."""

    def __init__(self, endpoint: LiveEndpoint) -> None:
        super().__init__(daemon=True)
        self.endpoint = endpoint
        self.calls = 0
        self.ended: str | None = None
        """How it ended: "stopped" (a clean answer saying so) or "closed" (the connection ended)."""
        self.started_work = threading.Event()

    def run(self) -> None:
        with McpLink(self.endpoint, timeout=30) as link:
            while True:
                try:
                    result = link.call("execute_blender_code", {"code": SHORT_JOB})
                except (OSError, http.client.HTTPException, ValueError):
                    self.ended = "closed"
                    return
                self.calls += 1
                if self.calls >= 3:
                    self.started_work.set()
                if result.get("isError") and json.loads(result["content"][0]["text"]).get("state") == "stopped":
                    self.ended = "stopped"
                    return
