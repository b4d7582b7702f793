"""`hermes-blender lab -- COMMAND...`: the official Blender Lab server, offered only while the user's own Lab listener runs.

The official server dials BLENDER_MCP_HOST:BLENDER_MCP_PORT for every call and its wire has no credential, so whoever
holds that port gets the agent's code and answers the model, and the port is free for anyone while the user's
Lab listener is off (its default). This relay runs the official server as its child, passes the MCP messages
between it and the client line by line, and keeps one gate: the Lab listener's own runtime file
(`lab/server.json`, published by the add-on only while that listener runs) must name a Blender of this OS user
listening on the very port the official server dials, with no other user's listener a dial there could reach (the
toolkit's one check, `require_own_blender`). The relay offers the official server's tools and nothing else (no
resources or prompts, which the pinned server does not have). While the gate is shut, `tools/list` answers no tools
(so a client such as Hermes offers none), a `tools/call` is answered here with the named state and its user action, and no request
that could reach Blender goes to the official server; a change of the gate is told as
`notifications/tools/list_changed`. What remains: between the check and the official server's own connection
(a moment), the port could change hands; README › Security says so.

The relay speaks what the pinned official server speaks (mcp<2): the `initialize` handshake, whose session carries
the notification; a `server/discover` is answered "method not found" here, so every client takes the handshake.
Each message the relay passes to the official server is the one it judged, written anew from what it parsed (a
line it cannot parse is answered with a parse error, never passed on), so the two can never read one line apart.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .contract import DECLARED_LAB_PATH
from .contract.host import serving_blender_problem
from .contract.liveness import RuntimeFileSpec, read_live_endpoint, require_own_blender
from .errors import BlenderBridgeError, LiveEndpointUnavailable
from .terminal import one_line, printable

PORT_ENV, HOST_ENV = "BLENDER_MCP_PORT", "BLENDER_MCP_HOST"
DEFAULT_PORT, DEFAULT_HOST = 9876, "localhost"
"""The official server's address when its environment names none."""
LAB_OFF = "lab_listener_off"
GATE_POLL = 1.0
"""Seconds between two looks at the gate, to tell the client when the Lab tools come or go."""
CHILD_GRACE = 5.0
"""Seconds the official server has to end once its input ended (or the relay was told to stop), before it is
terminated, and then again before it is killed."""
USER_ACTION = (
    "In Blender, turn on Edit > Preferences > Add-ons > Hermes Bridge > Blender Lab listener on port {port} "
    "(or run `hermes-blender serve --lab-port {port}`), then try again."
)
PASSED_WHILE_SHUT = frozenset(
    {"initialize", "ping", "resources/list", "resources/templates/list", "prompts/list", "logging/setLevel"}
)
"""Requests that reach no Blender, passed on whatever the gate says (with every notification); `tools/list` is
answered here while the gate is shut, and every other request waits for the gate."""
NOT_OFFERED = ("resources", "prompts", "completions")
"""Capabilities of the official server the relay does not offer (`_as_offered`)."""
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND = -32700, -32600, -32601
LAB_LISTENER_OFF_CODE = -32002
"""The JSON-RPC error of a request other than `tools/call` refused while the gate is shut (its data: the state)."""
READ_SIZE = 65536
SIGNAL_POLL = 0.2
"""Seconds between two looks at `signalled` while the relay runs."""


class LabRelayError(BlenderBridgeError):
    """`hermes-blender lab` cannot start: its environment or command is wrong (the message says which)."""


class Gate:
    """Whether the official server's port is this user's own Lab listener now: `why_shut()` is None when it is."""

    def __init__(self, port: int, runtime_file: str = DECLARED_LAB_PATH, host: str = "127.0.0.1") -> None:
        self.port, self.host = port, host
        self._spec = RuntimeFileSpec(path=runtime_file)

    def why_shut(self) -> str | None:
        """Any failure of the check itself shuts the gate: nothing is sent on a guess."""
        try:
            return self._why_shut()
        except Exception as exc:  # psutil or /proc failing in a way the check did not foresee
            return f"the check of the Blender Lab listener failed ({type(exc).__name__}: {exc})"

    def _why_shut(self) -> str | None:
        try:
            endpoint = read_live_endpoint(self._spec)
            if endpoint.port != self.port:
                return (
                    f"your Blender's Lab listener is on port {endpoint.port}, not on {self.port}, where this server "
                    "dials"
                )
            require_own_blender(endpoint)
        except LiveEndpointUnavailable as exc:
            return f"no Blender of yours runs its Blender Lab listener here ({exc})"
        if self.host != endpoint.address:  # the official server dials its own host: nobody else may listen there
            problem = serving_blender_problem(endpoint.pid, self.host, self.port)
            if problem is not None:
                return f"{problem} ({HOST_ENV}={self.host})"
        return None

    def refusal(self, why: str) -> dict[str, Any]:
        """The state of a request refused while the gate is shut: the state, its sentence and the user's action."""
        return {
            "state": LAB_OFF,
            "error": f"blender_lab cannot run this: {why}. Nothing was sent to port {self.port}.",
            "user_action": USER_ACTION.format(port=self.port),
            "retry": "after_user_action",
        }


class LabRelay:
    """The client's stdio on one side, the official server's on the other; `run()` returns the exit status.

    Three threads: the client's lines (judged, then passed on or answered), the official server's lines (passed
    back), and the gate's watcher; the caller's thread waits for the end. It ends when the official server ends
    (its exit status is the relay's), or when the client's input ends or a stop is asked: then the official server
    gets the end of its input, and is terminated (then killed) if it does not end within CHILD_GRACE."""

    def __init__(self, command: Sequence[str], gate: Gate, client_in: int, client_out: int) -> None:
        """`client_in` and `client_out`: the client's descriptors, read and written unbuffered (a write blocked on a
        client that reads no more holds no buffer the interpreter must flush at exit)."""
        self._gate = gate
        self._in, self._out = client_in, client_out
        try:
            self._child = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        except OSError as exc:
            raise LabRelayError(
                f"cannot start the official Blender Lab server ({command[0]}): {exc.strerror or exc}"
            ) from None
        self._to_client = threading.Lock()
        self._state = threading.Lock()
        self._told: bool | None = None
        """What the client's last tools/list (or notification) told it: the tools offered (True) or none (False)."""
        self._ready = False
        """The client said `initialized`: notifications may go to it."""
        self.stop = threading.Event()
        """Set to end the relay (the client's input ending, the official server ending)."""
        self.signalled = False
        """Set by a signal handler (which takes no lock): the relay ends as when `stop` is set."""

    def run(self) -> int:
        server_side = threading.Thread(target=self._from_server, name="lab-from-server", daemon=True)
        for target, name in ((self._from_client, "lab-from-client"), (self._watch_gate, "lab-gate")):
            threading.Thread(target=target, name=name, daemon=True).start()
        server_side.start()
        try:
            while not self.stop.wait(SIGNAL_POLL) and not self.signalled:
                pass
        finally:
            code = self._end_child(patient=not self.signalled)
            server_side.join(CHILD_GRACE)  # everything the official server said before it ended reaches the client
        return code

    def _end_child(self, patient: bool) -> int:
        """The official server's exit status, once it ended: given the end of its input, then (at once when the
        relay was told to stop by a signal) terminated, then killed."""
        self._close_child_input()
        for ask in (None, self._child.terminate, self._child.kill)[0 if patient else 1 :]:
            if ask is not None:
                ask()
            try:
                code = self._child.wait(CHILD_GRACE)
            except subprocess.TimeoutExpired:
                continue
            return 128 - code if code < 0 else code  # killed by a signal: as a shell says it
        return self._child.wait()

    def _close_child_input(self) -> None:
        """Unbuffered, without a lock: a write the official server does not read stays blocked in the kernel and
        ends with an error when that server is terminated; closing never waits for it."""
        assert self._child.stdin is not None
        try:
            self._child.stdin.close()
        except OSError:
            pass

    # The client's side

    def _from_client(self) -> None:
        try:
            for line in _lines(self._in):
                if line.strip():
                    self._judge(line)
        finally:
            self.stop.set()  # the client left: the official server is given the end of its input

    def _judge(self, line: bytes) -> None:
        message = _parsed(line)
        if isinstance(message, list):
            self._refuse_batch(message)
            return
        if not isinstance(message, dict):
            self._send(_error(None, PARSE_ERROR, "Parse error: not a JSON object on one line"))
            return
        method = message.get("method")
        if "method" not in message:  # an answer to the official server's own request (roots, sampling)
            self._forward(message)
            return
        asks = "id" in message
        if method == "server/discover":
            if asks:
                self._send(
                    _error(
                        message["id"],
                        METHOD_NOT_FOUND,
                        "Method not found: this server speaks the initialize handshake (the official Blender Lab "
                        "server it relays)",
                    )
                )
            return
        if method == "notifications/initialized":
            self._ready = True
        if method == "tools/list" and asks:
            why = self._gate.why_shut()
            with self._state:
                self._told = why is None
            if why is not None:
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
                return
        elif not _passed_while_shut(method):
            why = self._gate.why_shut()
            if why is not None:
                if asks:
                    self._send(self._refused(message["id"], method, why))
                return  # a notification that could reach Blender is dropped
        self._forward(message)

    def _refused(self, request_id: Any, method: Any, why: str) -> dict[str, Any]:
        state = self._gate.refusal(why)
        if method == "tools/call":  # a tool's answer: the model reads the state and its action
            result = {"content": [{"type": "text", "text": json.dumps(state)}], "isError": True}
            return {"jsonrpc": "2.0", "id": request_id, "result": result}
        return _error(request_id, LAB_LISTENER_OFF_CODE, state["error"], state)

    def _refuse_batch(self, batch: list[Any]) -> None:
        """JSON-RPC batches (which MCP dropped in 2025-06-18) are not passed on: each request in one is answered
        with an error, and none reaches the official server."""
        said = "Invalid Request: batches are not supported; send each message on a line of its own"
        answers = [
            _error(item["id"], INVALID_REQUEST, said) for item in batch if isinstance(item, dict) and "id" in item
        ]
        if not batch:
            self._send(_error(None, INVALID_REQUEST, said))
        elif answers:
            self._write(_line(answers))

    def _forward(self, message: dict[str, Any]) -> None:
        """Only the client's thread writes to the official server."""
        assert self._child.stdin is not None
        try:
            _write_all(self._child.stdin.fileno(), _line(message))
        except (OSError, ValueError):
            pass  # the official server is gone (or its input closed): its end ends the relay

    # The official server's side

    def _from_server(self) -> None:
        assert self._child.stdout is not None
        try:
            for line in _lines(self._child.stdout.fileno()):
                self._write(_as_offered(line))
        finally:
            self.stop.set()

    # The gate's watcher

    def _watch_gate(self) -> None:
        while not self.stop.wait(GATE_POLL):
            if not self._ready or self._told is None:
                continue  # nothing was offered yet: the client's first tools/list asks the gate itself
            why = self._gate.why_shut()
            with self._state:
                if (why is None) == self._told:
                    continue
                self._told = why is None
            said = "offered" if why is None else f"withdrawn: {why}"
            print(
                printable(f"hermes-blender lab: the Blender Lab tools are {one_line(said)}"),
                file=sys.stderr,
                flush=True,
            )
            self._send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    def _send(self, message: dict[str, Any]) -> None:
        self._write(_line(message))

    def _write(self, line: bytes) -> None:
        with self._to_client:
            try:
                _write_all(self._out, line)
            except OSError:
                self.stop.set()  # nobody reads the answers any more


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lines(fd: int) -> Iterator[bytes]:
    """The lines read from a descriptor, each with its newline (the last one without, if it has none), until its
    end. Raw reads: a daemon thread blocked inside a buffered reader aborts the interpreter at exit."""
    pending = bytearray()
    while True:
        try:
            chunk = os.read(fd, READ_SIZE)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            if pending:
                yield bytes(pending)
            return
        start, look = 0, len(pending)  # only the new bytes are searched: a long line costs its length, not its square
        pending += chunk
        while (end := pending.find(b"\n", look)) != -1:
            yield bytes(pending[start : end + 1])
            start = look = end + 1
        del pending[:start]


def _parsed(line: bytes) -> Any:
    """The JSON value of a line, or None when it is not JSON."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def _passed_while_shut(method: Any) -> bool:
    return isinstance(method, str) and (method in PASSED_WHILE_SHUT or method.startswith("notifications/"))


def _as_offered(line: bytes) -> bytes:
    """The official server's answer to `initialize` as the relay offers it: its tools, whose list may change (the
    relay tells when), and nothing else: no resources, prompts or completions (the pinned server has none, but its
    SDK announces them all the same, and Hermes makes four tools of its own of them, `list_resources`,
    `read_resource`, `list_prompts`, `get_prompt`, which it would offer while the gate is shut). Any other line is
    passed back as it came."""
    if b'"capabilities"' not in line:
        return line
    message = _parsed(line)
    result = message.get("result") if isinstance(message, dict) else None
    if not (isinstance(result, dict) and isinstance(result.get("capabilities"), dict) and "protocolVersion" in result):
        return line
    capabilities = result["capabilities"]
    for offered_by_the_tools_alone in NOT_OFFERED:
        capabilities.pop(offered_by_the_tools_alone, None)
    tools = capabilities.get("tools")
    capabilities["tools"] = {**(tools if isinstance(tools, dict) else {}), "listChanged": True}
    return _line(message)


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _line(message: Any) -> bytes:
    """One JSON-RPC message on one line, ASCII (a lone surrogate the client sent stays escaped)."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def lab_address(env: Mapping[str, str]) -> tuple[str, int]:
    """The address the official server dials, read from its environment as it reads it, or LabRelayError."""
    raw = env.get(PORT_ENV, str(DEFAULT_PORT))
    if not (raw.isascii() and raw.isdigit() and 0 < int(raw) < 65536):
        raise LabRelayError(f"{PORT_ENV} must be a port number (1-65535), not {raw!r}")
    host = env.get(HOST_ENV, DEFAULT_HOST)
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise LabRelayError(
            f"{HOST_ENV} must be 127.0.0.1, ::1 or localhost (the Blender Lab listener serves on loopback only), "
            f"not {host!r}"
        )
    return host, int(raw)


def child_command(command: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """`command` with a bare `uv` first word made the uv that started this relay: uv sets `UV` to its own path for
    everything it runs (`uv tool run` included), and Hermes swaps its managed uv in for the first word of a server's
    command only. Without `UV`, `uv` is looked up on PATH."""
    if not command:
        raise LabRelayError("no command: name the official Blender Lab server after `--`")
    if command[0] == "uv" and env.get("UV"):
        return [env["UV"], *command[1:]]
    return list(command)


def serve_lab(command: Sequence[str], runtime_file: str = DECLARED_LAB_PATH) -> int:
    """Run the official server `command` behind the gate, over this process's stdin and stdout, until either side
    ends or SIGTERM comes; its exit status."""
    host, port = lab_address(os.environ)
    sys.stdout.flush()
    relay = LabRelay(child_command(command, os.environ), Gate(port, runtime_file, host), 0, 1)
    if threading.current_thread() is threading.main_thread():
        for name in ("SIGTERM", "SIGINT", "SIGHUP"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), lambda *_: setattr(relay, "signalled", True))
    return relay.run()
