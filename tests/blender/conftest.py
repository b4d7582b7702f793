"""Real Blender in this process (bpy from uv.lock, or a CI line's), with the add-on installed from the repository."""

from __future__ import annotations

import importlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hermes_blender.blender_host import ADDON_MODULE, enable_extension
from hermes_blender.resources import ADDON_SOURCE


@pytest.fixture(scope="session")
def addon() -> Iterator[ModuleType]:
    import bpy  # first: it puts Blender's own modules (addon_utils, ...) on the path

    # isort: split
    import addon_utils

    bpy.ops.wm.read_homefile(use_factory_startup=True)
    module = enable_extension(ADDON_SOURCE)  # into tests/conftest.py's throw-away BLENDER_USER_RESOURCES
    yield module
    addon_utils.disable(ADDON_MODULE, default_set=True)


@pytest.fixture
def service(addon: ModuleType) -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.service")


@pytest.fixture
def factory_scene(addon: ModuleType) -> None:
    import bpy

    bpy.ops.wm.read_homefile(use_factory_startup=True)


def serve_while(
    dispatcher: Any,
    client: Callable[[], Any],
    serve: Callable[[], None] | None = None,
    done: Callable[[], None] | None = None,
) -> Any:
    """Run `client` on a thread while this (main) thread pumps jobs (or runs `serve`, e.g. a bridge's main loop);
    when the client is through, `done` ends the serving (by default the dispatcher's stop)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = client()
        except BaseException as exc:
            box["error"] = exc
        finally:
            (done or dispatcher.request_stop)()

    thread = threading.Thread(target=target)
    thread.start()
    if serve is None:
        dispatcher.pump_until_stopped(poll=0.05)
    else:
        serve()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def tick_while(client: Callable[[], Any]) -> Any:
    """Run `client` on a thread while this thread plays Blender's event loop, calling the GUI's timer pump."""
    runtime = importlib.import_module(f"{ADDON_MODULE}.runtime").RUNTIME
    finished = threading.Event()

    def tick() -> None:
        while not finished.is_set():
            runtime.tick()
            time.sleep(0.002)

    return serve_while(None, client, tick, finished.set)


@pytest.fixture
def dispatch(addon: ModuleType) -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.dispatch")


@pytest.fixture
def errors(addon: ModuleType) -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.errors")


@pytest.fixture
def runtime(addon: ModuleType) -> Iterator[Any]:
    """The add-on's one owner of the bridge; whatever a test started is stopped after it."""
    owner = importlib.import_module(f"{ADDON_MODULE}.runtime").RUNTIME
    yield owner
    owner.stop()


def a_job(dispatcher: Any) -> Any:
    """What a tool runs as on `dispatcher`, as the bridge's Execution makes it (no client hears its progress)."""
    context = importlib.import_module(f"{ADDON_MODULE}.tools.context")
    frame_tasks = importlib.import_module(f"{ADDON_MODULE}.frame_tasks")
    changes = importlib.import_module(f"{ADDON_MODULE}.changes")
    history = importlib.import_module(f"{ADDON_MODULE}.agent_history")
    checkpoints = importlib.import_module(f"{ADDON_MODULE}.checkpoints")
    agent_mode = importlib.import_module(f"{ADDON_MODULE}.agent_mode")
    scene = changes.Scene(between="between jobs")  # not installed: these jobs' tools never ask what changed
    return context.JobContext(
        report=lambda fraction=None, message=None: None,
        interrupts=dispatcher.interrupter,
        start_background=dispatcher.start_background,
        tasks=frame_tasks.FrameTasks(),
        changes=scene,
        history=history.AgentHistory(scene, gui=False),
        checkpoints=checkpoints.Checkpoints(Path(tempfile.mkdtemp(prefix="hermes-checkpoints-")), scene.copying),
        agent_mode=agent_mode.AgentMode.FULL,
    )


@pytest.fixture
def mcp_bridge(service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, monkeypatch: Any) -> Any:
    """A bridge serving MCP in this (background) Blender on the factory scene, for `tool_calls`; the client's pid
    check is off: the bridge runs in this pytest process, which rightly is no Blender."""
    monkeypatch.setattr("tests.sdk_client.require_own_blender", lambda endpoint: None)
    return runtime.start(service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None))


def tool_calls(bridge: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each (tool, arguments) through the official SDK's client, in order, while this thread serves the bridge."""
    import asyncio

    from hermes_blender.contract.liveness import RuntimeFileSpec
    from tests.sdk_client import SdkClient

    client = SdkClient(RuntimeFileSpec(path=str(bridge.runtime_file)), mode="2026-07-28")  # type: ignore[arg-type]

    async def script() -> list[Any]:
        return [await client.call_tool(name, arguments) for name, arguments in calls]

    return serve_while(bridge.dispatcher, lambda: asyncio.run(script()))
