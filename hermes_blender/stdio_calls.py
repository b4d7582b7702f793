"""The stdio server's calls to Blender: which Blender a session talks to, each request sent on to it, and its
absence answered as a named state.

`stdio_server` answers the handshake and the listings from what ships with the toolkit; this is loaded at the
first request that needs Blender (a call, a resource list or read, a prompt, a subscription's stream), so a
client's `initialize` waits for the SDK alone (the contract's parsers, the pid checks and the HTTP transport are
about 20 ms of a start: docs/performance.md › cold start).

The runtime file is read for every request, its owner, mode and pid checked; it is judged again (JSON, address,
token) only when its bytes changed (`RuntimeFileReader`). The token goes from the 0600 runtime file to the bridge and nowhere
else: not argv, not the environment, not stdout (the protocol) or the log (stderr). One link to the bridge is kept
while the runtime file names the same Blender (`transport.Links`: opening an MCP session costs more than a call);
a new endpoint opens a new one. The transport checks before every new connection that the pid is this user's
Blender owning its port.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import types
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR

from .contract.host import HostFacts
from .contract.liveness import LiveEndpoint, RuntimeFileSpec, endpoint_in, read_runtime_file, runtime_file_path
from .contract.redact import REDACTOR
from .contract.status import describe
from .errors import BlenderBridgeError, LiveEndpointUnavailable, ToolCallFailed
from .instances import instance_spec, live_instances
from .protocol import agent_mode, versions
from .surrogates import well_formed_in
from .transport import BridgeLink, Links, OnProgress, TokenRefused, request_once

log = logging.getLogger("hermes_blender.mcp")

APP = "Blender"


def text_result(payload: dict[str, Any], *, is_error: bool = False) -> types.CallToolResult:
    """A result the relay composes: paths in it that are not UTF-8 say U+FFFD, as the bridge says them."""
    payload = well_formed_in(payload)
    text = json.dumps(payload, ensure_ascii=False)
    structured = None if is_error else payload
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured, is_error=is_error
    )


def _state_payload(state: str, detail: str) -> dict[str, Any]:
    """The named state, its sentence, its one action and retry policy, as `status` says them."""
    reason, action, retry = describe(state, APP)  # type: ignore[arg-type]
    return {
        "state": state,
        "error": f"{reason} {action}".strip(),
        "user_action": action,
        "retry": retry,
        "detail": detail,
    }


def unavailable(state: str, detail: str, *, as_result: bool = False) -> types.CallToolResult:
    """A call Blender could not take, as a tool error carrying the named state.

    `as_result`: nothing was sent to Blender, so nothing was rejected; for a client whose breaker counts tool
    errors (Hermes) the same JSON is an ordinary result (with it as structured content), never `isError`."""
    return text_result(_state_payload(state, detail), is_error=not as_result)


def unavailable_error(state: str, detail: str) -> MCPError:
    """A read Blender could not answer (a resource, a prompt): a JSON-RPC error whose message starts with the state
    and whose data is the state's JSON, as a tool error carries it."""
    payload = well_formed_in(_state_payload(state, detail))
    return MCPError(INTERNAL_ERROR, f"{state}: {payload['error']}", payload)


NOT_RUN = frozenset({"busy", *agent_mode.ACTIONS})
"""Blender's own answers for a call it never began (its main thread did not take it in time; the person at Blender
did not let it run): for Hermes, results."""


def _state_of(result: types.CallToolResult) -> str | None:
    """The state a tool error's JSON text names, if any."""
    first = result.content[0] if result.content else None
    try:
        payload = json.loads(first.text) if isinstance(first, types.TextContent) else None
    except ValueError:
        return None
    return payload.get("state") if isinstance(payload, dict) else None


@dataclass
class BlenderChoice:
    """Which Blender this session talks to: pinned (`--pid`, `--file`), else the runtime file's, kept once reached.

    With several Blenders open, the runtime file names the newest; a session that began with another stays
    with it while it serves. When its Blender has closed, it follows the runtime file to the one serving now
    (a restart), and says so in that answer: it never switches silently. `spec` and `host` are the session's, fixed
    once made: its reader is made from them.
    """

    spec: RuntimeFileSpec
    pinned: int | None = None
    """A pid the user chose: only that Blender, never another."""
    wanted_file: str | None = None
    """Pin, at the first call, the one Blender that has this file open (a path, or a bare file name)."""
    current: int | None = None
    """The Blender this session has talked to."""
    host: HostFacts = field(default_factory=HostFacts)
    """Made once: reading the environment on every call cost more than reading the runtime file."""

    def __post_init__(self) -> None:
        self._reader = RuntimeFileReader(self.host)
        self._record: tuple[int, RuntimeFileSpec] | None = None

    @property
    def talking_to(self) -> int | None:
        return self.pinned if self.pinned is not None else self.current

    async def endpoint(self) -> tuple[LiveEndpoint, str | None]:
        """The endpoint to call now, and a note for the model when it is not the Blender used so far."""
        if self.pinned is None and self.wanted_file is not None:
            self.pinned = await pin_by_file(self.spec, self.wanted_file)
        if self.pinned is not None:
            return self._read(self._own_record(self.pinned)), None
        if self.current is not None:
            try:
                return self._read(self._own_record(self.current)), None
            except LiveEndpointUnavailable:
                pass  # closed (or a bridge without per-process records): the runtime file decides
        endpoint = self._read(self.spec)
        note = None
        if self.current is not None and endpoint.pid != self.current:
            note = (
                f"Note: the Blender this session used before (pid {self.current}) is no longer serving; this "
                f"answer comes from the Blender serving now (pid {endpoint.pid}). Its scene may differ."
            )
        self.current = endpoint.pid
        return endpoint, note

    def _read(self, spec: RuntimeFileSpec) -> LiveEndpoint:
        return self._reader.endpoint(spec)

    def _own_record(self, pid: int) -> RuntimeFileSpec:
        """The spec of that Blender's own record (`servers/<pid>.json`), worked out again only for another pid."""
        if self._record is None or self._record[0] != pid:
            self._record = (pid, instance_spec(self.spec, pid, self.host))
        return self._record[1]


class RuntimeFileReader:
    """The runtime files one session reads (`server.json`, a Blender's own record): read on every call, and judged
    in full (JSON, pid, address, token: `endpoint_in`) only when their bytes differ from the last ones judged.

    Every call still reads the file as this user's alone (owner, mode, a regular file of bounded size) and checks
    that the pid it names runs; what is skipped is parsing and judging the same bytes again: the relay's look at
    Blender went from about 200 to about 100 µs of a relayed call (docs/performance.md). Bytes, not the file's
    times: a restart can rewrite it within one tick of the file system's clock, with the same size and the inode
    just freed.
    """

    KEPT = 8
    """Files judged and kept, the least recently read dropped first: `server.json` and the records of the Blenders
    this session followed."""

    def __init__(self, host: HostFacts) -> None:
        self._host = host
        self._judged: dict[RuntimeFileSpec, tuple[Path, bytes, LiveEndpoint]] = {}

    def endpoint(self, spec: RuntimeFileSpec) -> LiveEndpoint:
        """The endpoint the file names, or LiveEndpointUnavailable saying why, as `read_live_endpoint` says it."""
        judged = self._judged.pop(spec, None)  # put back once read and judged again: a failure forgets it
        path = judged[0] if judged is not None else runtime_file_path(spec, self._host)
        data = read_runtime_file(path)
        if judged is not None and judged[1] == data and self._host.pid_alive(judged[2].pid):
            endpoint = judged[2]
            if endpoint.token:
                REDACTOR.register(endpoint.token)  # the newest again: it keeps the latest few, and this one is sent
        else:
            endpoint = endpoint_in(data, spec, path, self._host)
        self._judged[spec] = (path, data, endpoint)
        if len(self._judged) > self.KEPT:
            del self._judged[next(iter(self._judged))]
        return endpoint


def _progress_to(ctx: Any, params: types.CallToolRequestParams) -> OnProgress | None:
    """When the client asked for progress: each of the bridge's notifications, sent on under the client's token."""
    token = (params.meta or {}).get("progress_token")
    if token is None:
        return None

    async def forward(notification: dict[str, Any]) -> None:
        await ctx.session.send_progress_notification(
            token,
            notification["progress"],
            notification.get("total"),
            notification.get("message"),
            related_request_id=ctx.request_id,
        )

    return forward


ASKING_ROUNDS = 3
"""Questions the relay puts to its client's user for one call (the bridge asks one)."""
ASKING_LIMIT = 3610.0
"""Seconds the relay waits for its client's answer: past the longest question timeout a person can set (an hour),
so the bridge then answers `confirmation_timed_out`, and a client that never answers holds its call no longer."""


def _asks_its_user(ctx: Any) -> bool:
    """Whether this relay's client can put the bridge's question to its user: it declared elicitation, in its
    handshake (2025) or with this request (2026-07-28). Without a request context (a call the relay makes itself),
    nobody can be asked."""
    if ctx is None:
        return False
    if ctx.protocol_version == versions.STATELESS:
        meta = (ctx.params or {}).get("_meta")
        declared = meta.get(versions.META_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
        return isinstance(declared, dict) and isinstance(declared.get("elicitation"), dict)
    params = getattr(ctx.session, "client_params", None)
    capabilities = getattr(params, "capabilities", None)
    return getattr(capabilities, "elicitation", None) is not None


def _dumped(responses: Any) -> dict[str, Any]:
    """A 2026-07-28 client's answers as the bridge reads them (JSON)."""
    if not isinstance(responses, dict):
        return {}
    return {
        key: value.model_dump(by_alias=True, exclude_none=True, mode="json") if hasattr(value, "model_dump") else value
        for key, value in responses.items()
    }


async def _asked(ctx: Any, answer: dict[str, Any]) -> dict[str, Any]:
    """The bridge's questions put to this client's user (MCP elicitation): their answers, by the bridge's keys. A
    question the relay cannot put is answered `cancel`: the bridge then runs nothing."""
    answers: dict[str, Any] = {}
    for key, asked in (answer.get("inputRequests") or {}).items():
        given = asked.get("params", {}) if isinstance(asked, dict) else {}
        if not isinstance(asked, dict) or asked.get("method") != "elicitation/create":
            answers[key] = {"action": "cancel"}
            continue
        try:
            result = await asyncio.wait_for(
                ctx.session.elicit_form(
                    str(given.get("message", "")), given.get("requestedSchema") or {}, related_request_id=ctx.request_id
                ),
                ASKING_LIMIT,
            )
        except (MCPError, TimeoutError):  # its client could not ask, or nobody answered: as dismissed
            answers[key] = {"action": "cancel"}
            continue
        answers[key] = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return answers


@dataclass(frozen=True)
class Answered:
    """The Blender that answered a call, and the link it answered on (its own tools are compared once)."""

    pid: int
    link: BridgeLink


class BlenderCalls:
    """Each request that needs Blender, sent on to the Blender this session talks to."""

    def __init__(self, choice: BlenderChoice, links: Links) -> None:
        self._choice = choice
        self._links = links
        self._heard_from: int | None = None
        """The Blender whose updates were followed last."""

    @classmethod
    def from_options(cls, runtime_file: str, *, pid: int | None, file: str | None, inactivity: float) -> BlenderCalls:
        """As `hermes-blender mcp`'s options say: the runtime file, a pin (`--pid`, `--file`), the inactivity limit."""
        choice = BlenderChoice(RuntimeFileSpec(path=runtime_file), pinned=pid, wanted_file=file)
        return cls(choice, Links(inactivity))

    async def close(self) -> None:
        await self._links.close()

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams, *, states_as_results: bool = False
    ) -> tuple[types.CallToolResult | types.InputRequiredResult, Answered | None]:
        """The tool's result, and who answered it (None: Blender was not reached, or the exchange failed, or the
        person at Blender's mode has the call wait for the client's user: the client calls again with the answer).

        `states_as_results`: Blender's absence found before anything is sent answers as a result, not `isError`
        (Hermes: `stdio_server` says why)."""
        try:
            endpoint, note = await self._choice.endpoint()
            link = await self._links.link_to(endpoint)
            arguments: dict[str, Any] = {"name": params.name, "arguments": params.arguments or {}}
            if _asks_its_user(ctx):
                arguments["_meta"] = {versions.META_CLIENT_CAPABILITIES: {"elicitation": {"form": {}}}}
            if params.request_state is not None:  # a 2026-07-28 client calls again with its user's answer
                arguments |= {"inputResponses": _dumped(params.input_responses), "requestState": params.request_state}
            answer = await link.request("tools/call", arguments, _progress_to(ctx, params))
            for _ in range(ASKING_ROUNDS):  # the person at Blender's mode is ask: this client's user answers
                if answer.get("resultType") != "input_required":
                    break
                if ctx.protocol_version == versions.STATELESS:  # its client asks and calls again (no back-channel)
                    return types.InputRequiredResult.model_validate(answer), None
                answered = {"inputResponses": await _asked(ctx, answer), "requestState": answer.get("requestState")}
                answer = await link.request("tools/call", {**arguments, **answered}, _progress_to(ctx, params))
            result = types.CallToolResult.model_validate(answer)
        except LiveEndpointUnavailable as exc:  # read from the runtime file: nothing was sent
            return unavailable(exc.state, str(exc), as_result=states_as_results), None
        except TokenRefused as exc:  # refused at the bridge's gate: nothing ran, like a state read from the file
            return unavailable("endpoint_unavailable", str(exc), as_result=states_as_results), None
        except ToolCallFailed as exc:  # sent, and then failed: the outcome is not known, an error for everyone
            return unavailable("endpoint_unavailable", str(exc)), None
        if states_as_results and result.is_error and _state_of(result) in NOT_RUN:
            result.is_error = False  # Blender never began it: nothing was rejected, as for a state read from the file
        if note is not None:
            result.content.append(types.TextContent(type="text", text=note))
        return result, Answered(endpoint.pid, link)

    async def forward(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request other than a tool call; Blender's absence or a failed exchange as `unavailable_error`, the
        bridge's own JSON-RPC error as it came (MCPError)."""
        try:
            endpoint, _note = await self._choice.endpoint()
            link = await self._links.link_to(endpoint)
            return await link.request(method, params)
        except LiveEndpointUnavailable as exc:
            raise unavailable_error(exc.state, str(exc)) from None
        except (TokenRefused, ToolCallFailed) as exc:
            raise unavailable_error("endpoint_unavailable", str(exc)) from None

    async def tools(self, answered: Answered) -> list[types.Tool]:
        """The tools the Blender that answered lists."""
        return types.ListToolsResult.model_validate(await answered.link.request("tools/list", {})).tools

    async def follow(self, uris: list[str], updated: Callable[[str], Awaitable[None]]) -> None:
        """One stream of updates to `uris` from the Blender this session talks to, until it ends (MCPError: Blender
        refused it; BlenderBridgeError: none could be reached). A Blender other than the one followed last has
        every one of them told as updated first: each may read differently there."""
        endpoint, _note = await self._choice.endpoint()
        if self._heard_from is not None and endpoint.pid != self._heard_from:
            for uri in uris:
                await updated(uri)
        self._heard_from = endpoint.pid
        await BridgeLink(endpoint).listen(uris, updated)

    async def list_blenders(self) -> types.CallToolResult:
        serving = []
        for instance in live_instances(self._choice.spec):
            entry = instance.payload()
            entry.pop("url")  # the port is not the model's business; the pid names a Blender
            entry["this_session"] = instance.endpoint.pid == self._choice.talking_to
            entry["open_file"] = await self._open_file(instance.endpoint)
            serving.append(entry)
        return text_result({"serving": serving, "this_session_pid": self._choice.talking_to})

    async def _open_file(self, endpoint: LiveEndpoint) -> str | None:
        try:
            return await open_file(endpoint)
        except (BlenderBridgeError, MCPError) as exc:
            log.warning("could not ask Blender (pid %s) for its open file: %s", endpoint.pid, exc)
            return None


async def open_file(endpoint: LiveEndpoint) -> str | None:
    """The .blend a Blender has open (None: unsaved), asked of its bridge."""
    result = await request_once(
        endpoint, "tools/call", {"name": "get_blendfile_summary_path_info", "arguments": {}}, limit=10.0
    )
    path = (result.get("structuredContent") or {}).get("filepath")
    return path if isinstance(path, str) and path else None


async def pin_by_file(spec: RuntimeFileSpec, wanted: str) -> int:
    """The pid of the one serving Blender whose open file is `wanted` (a path, or a bare file name)."""
    matches, seen = [], []
    for instance in live_instances(spec):
        path = await open_file(instance.endpoint)
        seen.append(f"pid {instance.endpoint.pid}: {path or '(unsaved)'}")
        if path and is_open_file(path, wanted):
            matches.append(instance.endpoint.pid)
    if len(matches) != 1:
        found = "no Blender has" if not matches else "more than one Blender has"
        raise LiveEndpointUnavailable(
            f"{found} {wanted} open (serving: {'; '.join(seen) or 'none'})", state="app_not_running"
        )
    return matches[0]


def is_open_file(path: str, wanted: str) -> bool:
    """Whether the file a bridge says is open (`path`) is `wanted`, a path or a bare file name. A name that is not
    UTF-8 on disk reaches us with U+FFFD (what every client parses), which other names may share: such a name never
    matches, so no other Blender is ever pinned for it (`mcp --file` refuses a wanted name that is not UTF-8 and
    says to use `--pid`; the bridge's answers never hold one)."""
    if Path(wanted).name == wanted:  # a bare file name: only the open file's name is compared
        return "\ufffd" not in Path(path).name and Path(path).name == wanted
    return "\ufffd" not in path and Path(path).resolve() == Path(wanted).expanduser().resolve()
