"""`hermes-blender mcp`: the bridge for any MCP client that starts a command, found the way Hermes finds it.

A client that takes a stdio command (Claude Code and Desktop, Cursor, VS Code, Codex, Gemini CLI, ...)
starts this once and keeps it. This module is its front: it answers the handshake and lists the tools,
resources and prompts even while Blender is closed (what ships in `catalogue.json` and `views.json`, held equal
to a live Blender's by tests), and keeps the client's subscriptions. Every request that needs Blender goes
through `stdio_calls.BlenderCalls`, made at the first such request so that `initialize` waits for the SDK alone:
it reads the runtime file for every call (a Blender that restarts on a new port and token is followed with no
change to the client's config) and answers a Blender it cannot reach at once with the named state, the one user
action and the retry policy, the same sentences as `status`.

Hermes runs this server from its plugin's mcp.json with `HERMES_BLENDER_CLIENT=hermes` in the environment
(`CLIENT_ENV`): Hermes counts every `isError` answer as a strike of its circuit breaker and, after three in a
row, pauses the server for 60 s behind its own sentence ("rejected the last 3 calls ... fix the arguments"),
also once Blender is back. For that client an answer saying Blender cannot be reached before anything was sent
is an ordinary result carrying the same JSON: nothing was rejected, and the next call after Blender starts gets
the scene. Hermes's own clientInfo (`mcp` 0.1.0, the Python SDK's default) names no client, so the launch line
says which client it is. Every other client keeps `isError`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from . import __version__
from .contract import DECLARED_PATH
from .errors import BlenderBridgeError
from .farm_tasks import FARM_TASK_NAMES, FARM_TASK_TOOLS, START_RUN, FarmTasks, mode_refusal
from .stdio_wire import stdio_streams
from .time_limits import SILENCE

if TYPE_CHECKING:
    from .stdio_calls import Answered, BlenderCalls

log = logging.getLogger("hermes_blender.mcp")

NAME = "blender"
CLIENT_ENV = "HERMES_BLENDER_CLIENT"
"""Set by the client's launch line (the Hermes plugin's mcp.json says `hermes`); unset for every other client."""
STATES_AS_RESULTS = frozenset({"hermes"})
"""Clients whose circuit breaker counts an `isError` answer as a failed call: Blender's absence is a result there."""
MAX_FOLLOWED = 256
"""Resources the relay follows at once: what one of Blender's streams may name (the add-on's MAX_URIS, held equal by
tests/agent/test_transport.py)."""
MAX_LISTENS = 32
"""Listen streams one client may keep open (the bridge's own limit)."""
RESUBSCRIBE_SETTLE = 0.25
"""Seconds the relay lets subscriptions settle before it opens the stream to Blender again."""
UPDATES_RETRY = 1.0
"""Seconds before the stream of resource updates is opened again after it ended or could not open."""
LIST_BLENDERS = "list_blenders"
"""A tool of this server's own: which Blenders serve, and which one this session talks to."""


def shipped_catalogue() -> list[dict[str, Any]]:
    """The tools a live bridge lists, as shipped with this toolkit (`tools/list` without Blender)."""
    return json.loads(resources.files(__package__).joinpath("catalogue.json").read_text(encoding="utf-8"))


def shipped_views() -> dict[str, list[dict[str, Any]]]:
    """The resources (without render tasks), templates and prompts a live bridge lists, as shipped with this toolkit
    (`views.json`): what a client lists while Blender is closed."""
    return json.loads(resources.files(__package__).joinpath("views.json").read_text(encoding="utf-8"))


def _own_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name=LIST_BLENDERS,
            title="List the Blenders on this computer",
            description=(
                "Which Blenders are serving on this computer (pid, version, open file) and which one this session's "
                "other tools talk to. A session stays with its Blender; start the server with --pid or --file to "
                "choose another."
            ),
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        *FARM_TASK_TOOLS,
    ]


OWN_TOOLS = [tool.name for tool in _own_tools()]
"""The tools of this server's own, listed after Blender's: `list_blenders` and the farm runs (farm_tasks.py)."""


NAME_CHARS = 64
"""Blender's longest datablock name (63 bytes) and more: a template's argument, percent-encoded, is at most 3x."""


def _served(uri: str) -> bool:
    """Whether `uri` names a resource a Blender serves: a listed one, or a template's with a name that fits."""
    views = shipped_views()
    if uri in {resource["uri"] for resource in views["resources"]}:
        return True
    prefixes = [template["uriTemplate"].split("{", 1)[0] for template in views["resourceTemplates"]]
    return any(uri.startswith(prefix) and 0 < len(uri) - len(prefix) <= 3 * NAME_CHARS for prefix in prefixes)


def states_as_results(env: dict[str, str] | None = None) -> bool:
    """Whether the launch line names a client whose breaker must not count Blender's absence (Hermes)."""
    client = (os.environ if env is None else env).get(CLIENT_ENV, "")
    return client.strip().lower() in STATES_AS_RESULTS


class StdioBridge:
    """The handlers: the shipped catalogue, and each call forwarded to the Blender this session talks to.

    `make_calls` makes the way to Blender (`stdio_calls.BlenderCalls`) at the first request that needs it: the
    handshake and the listings answer without it."""

    def __init__(self, make_calls: Callable[[], BlenderCalls], *, states_as_results: bool = False) -> None:
        self._make_calls = make_calls
        self._calls_made: BlenderCalls | None = None
        self._states_as_results = states_as_results
        """Blender's absence (found before anything is sent) answers as a result, not `isError` (Hermes)."""
        self._tools: list[types.Tool] | None = None
        """The tools served: the shipped catalogue (read at the first listing), then a Blender's own if it differs."""
        self._checked_pids: set[int] = set()
        """Blenders whose own catalogue was compared with the one served (once each)."""
        self._subscribed: set[str] = set()
        """The URIs the client subscribed to (`resources/subscribe`, 2025)."""
        self._farm: FarmTasks | None = None
        """The farm runs this session started (made at the first farm call)."""
        self._listened: dict[str, int] = {}
        """The URIs the client's open `subscriptions/listen` streams name (2026-07-28), each with its count."""
        self._refused: list[str] = []
        """The last set of URIs Blender refused to stream (said once)."""
        self._bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._bus, max_subscriptions=MAX_LISTENS)
        self._session: Any = None
        """The client's session, for its resource updates."""
        self._resubscribed = anyio.Event()
        """Set when the subscriptions changed: the stream to Blender is opened again for the new set."""

    @property
    def _calls(self) -> BlenderCalls:
        if self._calls_made is None:
            self._calls_made = self._make_calls()
        return self._calls_made

    async def close(self) -> None:
        if self._farm is not None:
            await anyio.to_thread.run_sync(self._farm.close)
        if self._calls_made is not None:
            await self._calls_made.close()

    @property
    def _catalogue(self) -> list[types.Tool]:
        if self._tools is None:
            self._tools = self._served([types.Tool.model_validate(tool) for tool in shipped_catalogue()])
        return self._tools

    def _served(self, tools: list[types.Tool]) -> list[types.Tool]:
        """The tools as this client gets them. Where Blender's absence is a result (Hermes), without output
        schemas: an SDK client refuses a result whose structured content does not match the tool's schema, and
        Hermes shows the model no output schema (it renders the text and structured content it receives)."""
        if not self._states_as_results:
            return tools
        return [tool.model_copy(update={"output_schema": None}) for tool in tools]

    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[*self._catalogue, *_own_tools()])

    async def list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        """Blender's list (its render tasks included); the shipped one while Blender cannot be reached."""
        try:
            return types.ListResourcesResult.model_validate(await self._calls.forward("resources/list", {}))
        except MCPError:
            return types.ListResourcesResult(resources=shipped_views()["resources"])

    async def list_resource_templates(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=shipped_views()["resourceTemplates"])

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        answer = await self._calls.forward("resources/read", {"uri": str(params.uri)})
        return types.ReadResourceResult.model_validate(answer)

    async def subscribe_resource(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """Refused for a URI no Blender serves: one such URI would make Blender refuse the shared stream, and with
        it every other subscription's updates."""
        uri = str(params.uri)
        self._check_followable([uri])
        self._session = ctx.session
        self._subscribed.add(uri)
        self._resubscribed.set()
        return types.EmptyResult()

    async def unsubscribe_resource(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self._subscribed.discard(str(params.uri))
        self._resubscribed.set()
        return types.EmptyResult()

    async def listen(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        """A 2026-07-28 client's stream, served by the SDK's handler from the updates the relay hears from Blender."""
        uris = list(params.notifications.resource_subscriptions or ())
        self._check_followable(uris)
        for uri in uris:
            self._listened[uri] = self._listened.get(uri, 0) + 1
        self._resubscribed.set()
        try:
            return await self._listen(ctx, params)
        finally:
            for uri in uris:
                self._listened[uri] -= 1
                if not self._listened[uri]:
                    del self._listened[uri]
            self._resubscribed.set()

    def _check_followable(self, uris: list[str]) -> None:
        """Refused (-32602) unless Blender can follow them all in the relay's one stream: a URI no Blender serves,
        or more at once than one stream may name, would make Blender refuse that stream and every subscription
        with it."""
        for uri in uris:
            if not _served(uri):
                raise MCPError(INVALID_PARAMS, f"no resource {uri[:200]!r} to follow (resources/list names them)")
        if len(set(self._wanted()) | set(uris)) > MAX_FOLLOWED:
            raise MCPError(INVALID_PARAMS, f"at most {MAX_FOLLOWED} resources are followed at once")

    def _wanted(self) -> list[str]:
        return sorted(self._subscribed | self._listened.keys())

    async def follow_updates(self) -> None:
        """For the server's life: while the client has subscriptions, one stream from the Blender this session
        talks to, its updates sent on; opened again when the subscriptions change, and when the stream ends
        (Blender stopped or restarted: a Blender that comes back is followed, and a new one's resources are told as
        updated, since every subscribed resource may read differently there)."""
        while True:
            self._resubscribed = changed = anyio.Event()
            uris = self._wanted()
            if uris:
                await self._follow(uris, changed)
                await anyio.sleep(RESUBSCRIBE_SETTLE)  # a burst of subscribes reopens the stream once
            else:
                await changed.wait()

    async def _follow(self, uris: list[str], changed: anyio.Event) -> None:
        """One stream, until it ends (then a pause) or the subscriptions change."""
        async with anyio.create_task_group() as group:

            async def stop_when_changed() -> None:
                await changed.wait()
                group.cancel_scope.cancel()

            group.start_soon(stop_when_changed)
            try:
                await self._calls.follow(uris, self._updated)
            except MCPError as exc:  # Blender refused the stream itself: say so once for this set, not every retry
                if uris != self._refused:
                    log.warning("Blender refused the stream of resource updates: %s", exc)
                    self._refused = uris
            except BlenderBridgeError as exc:
                log.info("no resource updates from Blender for now (%s); looking again shortly", exc)
            await anyio.sleep(UPDATES_RETRY)
            group.cancel_scope.cancel()

    async def _updated(self, uri: str) -> None:
        if self._session is not None and uri in self._subscribed:
            await self._session.send_resource_updated(uri)
        if uri in self._listened:
            await self._bus.publish(ResourceUpdated(uri=uri))

    async def list_prompts(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=shipped_views()["prompts"])

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        answer = await self._calls.forward("prompts/get", {"name": params.name, "arguments": params.arguments or {}})
        return types.GetPromptResult.model_validate(answer)

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name == LIST_BLENDERS:
            return await self._calls.list_blenders()
        if params.name in FARM_TASK_NAMES:
            from .stdio_calls import text_result

            if params.name == START_RUN and (refused := await self._farm_refused(ctx)) is not None:
                return refused
            self._farm = self._farm or FarmTasks()
            payload, is_error = await anyio.to_thread.run_sync(self._farm.call, params.name, params.arguments or {})
            return text_result(payload, is_error=is_error)
        result, answered = await self._calls.call_tool(ctx, params, states_as_results=self._states_as_results)
        if answered is not None and answered.pid not in self._checked_pids:
            await self._check_catalogue(ctx, answered)
        return result

    async def _farm_refused(self, ctx: Any) -> types.CallToolResult | None:
        """A farm run starts only where the person at the Blender this session talks to lets the agent change things
        without asking: its agent history says its mode (Blender's absence is its state, as for any call)."""
        from .stdio_calls import text_result

        asked = types.CallToolRequestParams(name="get_agent_history", arguments={})
        result, _ = await self._calls.call_tool(ctx, asked, states_as_results=self._states_as_results)
        if not isinstance(result, types.CallToolResult):
            return None  # never for a read: a mode that asks asks only before a change
        told = result.structured_content
        if result.is_error or told is None or "state" in told:  # Blender's state (for Hermes, as a result)
            return result
        refusal = mode_refusal(told)
        return None if refusal is None else text_result(refusal, is_error=True)

    async def _check_catalogue(self, ctx: Any, answered: Answered) -> None:
        """Once per Blender, after its first answer: the call's own answer never depends on this (a call that
        restarted the bridge would otherwise lose its answer to the catalogue's request, and invite a replay). A
        list that does not parse (ValueError: pydantic's) is said in the log, as a list that could not be asked."""
        try:
            changed = await self._catalogue_changed(answered)
        except (BlenderBridgeError, MCPError, ValueError) as exc:
            log.warning(
                "could not compare Blender's tools (pid %s) with those served: %s; asking again at the next call",
                answered.pid,
                exc,
            )
            return
        self._checked_pids.add(answered.pid)
        if changed:
            await ctx.session.send_tool_list_changed()

    async def _catalogue_changed(self, answered: Answered) -> bool:
        """Whether this Blender lists other tools than those served; if so they are served from now on."""
        live = self._served(await self._calls.tools(answered))
        served = self._catalogue
        if [tool.model_dump(mode="json") for tool in live] == [tool.model_dump(mode="json") for tool in served]:
            return False
        log.warning("this Blender's tools differ from the catalogue shipped with the toolkit; serving its own")
        self._tools = list(live)
        return True


def server(bridge: StdioBridge) -> Server[Any]:
    return Server(
        NAME,
        version=__version__,
        instructions=(
            "Tools for the Blender that is open on this computer, found through the runtime file it publishes. "
            "Read get_objects_summary before changing anything; list_blenders says which Blender this is when "
            "several are open. When code fails, read the error's `hint` first: it names what this Blender's API "
            "has. Code execution in Blender is not a sandbox."
        ),
        on_list_tools=bridge.list_tools,
        on_call_tool=bridge.call_tool,
        on_list_resources=bridge.list_resources,
        on_list_resource_templates=bridge.list_resource_templates,
        on_read_resource=bridge.read_resource,
        on_list_prompts=bridge.list_prompts,
        on_get_prompt=bridge.get_prompt,
        on_subscribe_resource=bridge.subscribe_resource,
        on_unsubscribe_resource=bridge.unsubscribe_resource,
        on_subscriptions_listen=bridge.listen,
    )


def run(
    runtime_file: str = DECLARED_PATH, *, pid: int | None = None, file: str | None = None, inactivity: float = SILENCE
) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin; a call is given up after `inactivity` seconds
    without a byte from Blender (a streamed answer's progress included), or at its tool's own limit."""
    as_results = states_as_results()

    def make_calls() -> BlenderCalls:
        from .stdio_calls import BlenderCalls  # at the first request that needs Blender, not before the handshake

        return BlenderCalls.from_options(runtime_file, pid=pid, file=file, inactivity=inactivity)

    async def main() -> None:
        bridge = StdioBridge(make_calls, states_as_results=as_results)
        app = server(bridge)
        app.middleware = []  # the SDK's default tracing span per message: no exporter here, a cost on every call
        options = app.create_initialization_options(notification_options=NotificationOptions(tools_changed=True))
        try:
            async with stdio_streams() as (read, write), anyio.create_task_group() as group:
                group.start_soon(bridge.follow_updates)
                await app.run(read, write, options)
                group.cancel_scope.cancel()
        finally:
            await bridge.close()

    anyio.run(main)
