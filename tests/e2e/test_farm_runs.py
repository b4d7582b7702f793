"""`hermes-blender farm run` renders the bundle `export_render_job` wrote, with the real `openjd run` and a real
Blender in processes of its own: the plain flavour with the bpy wheel behind a `blender` command, the Deadline
adaptor flavour under AWS's own `blender-openjd` (deadline-cloud-for-blender, unchanged) with the GUI tier's Blender
program. Every frame is there, decodes, moves with the animation and matches the frame `render_frames_to_folder`
renders in the bridge's Blender. A cancel stops the run and every process it started; a Blender that dies mid-run
fails it; the frames written by then are kept."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from hermes_blender.headless import HeadlessBlender
from scripts.harness import blender_launcher
from tests.gui.harness import blender_command, blender_version
from tests.moving_cube import moving_cube
from tests.tool_session import Session

pytestmark = pytest.mark.timeout(600)
HERMES_BLENDER = Path(sys.executable).parent / "hermes-blender"
ADAPTOR = "deadline-cloud-for-blender==0.6.9"
"""AWS's Blender submitter and adaptor (`blender-openjd`), in an environment of its own as a farm host has it."""
DIFFERENCES = """
import bpy, numpy
def pixels(path):
    image = bpy.data.images.load(path, check_existing=False)
    values = numpy.empty(len(image.pixels), dtype=numpy.float32)
    image.pixels.foreach_get(values)
    bpy.data.images.remove(image)
    return values
farm = [pixels(path) for path in {farm!r}]
reference = [pixels(path) for path in {reference!r}]
result = {{
    "to_reference": [float(numpy.abs(a - b).mean()) for a, b in zip(farm, reference)],
    "to_next": [float(numpy.abs(a - b).mean()) for a, b in zip(farm, farm[1:])],
}}
"""


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    runtime_file = tmp_path_factory.mktemp("farm") / "server.json"
    with HeadlessBlender(runtime_file):
        yield Session(runtime_file)


def scene(bridge: Session, folder: Path, engine: str = "BLENDER_WORKBENCH") -> Path:
    """A saved scene whose cube moves from frame 1 to 6; the frames' folder beside its project."""
    (folder / "project").mkdir()
    (folder / "frames").mkdir()
    bridge.run(moving_cube(str(folder / "project" / "shot.blend"), engine))
    return folder


@pytest.fixture
def shot(bridge: Session, tmp_path: Path) -> Path:
    return scene(bridge, tmp_path)


def export(bridge: Session, folder: Path, **arguments: Any) -> Path:
    answer = bridge.ok(
        "export_render_job",
        # The agent's call that saved is an undo step, which Blender counts as a change after the save.
        {"bundle_folder": str(folder / "bundle"), "output_folder": str(folder / "frames"), "use_unsaved_changes": True}
        | arguments,
    )
    return Path(answer["bundle_folder"])


@functools.cache
def adaptor_bin() -> Path:
    """AWS's adaptor's environment, resolved once: a `uv tool run` in each task resolved it again at every frame,
    and, where PYTHONDONTWRITEBYTECODE is set (this machine), each frame's start compiled its sources (docs/farms.md
    › What it costs)."""
    command = [
        "uv",
        "tool",
        "run",
        "--compile-bytecode",
        "--from",
        ADAPTOR,
        "python",
        "-c",
        "import sys; print(sys.prefix)",
    ]
    prefix = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout.strip()
    return Path(prefix) / "bin"


def farm_run(
    bundle: Path, folder: Path, blender: str | None = None, environ: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`farm run` of the bundle with `blender` (default: the bpy wheel's), AWS's adaptor on its PATH, and `environ`."""
    tools = folder / "bin"
    tools.mkdir(exist_ok=True)
    blender = blender or str(blender_launcher.install(tools))
    if not (tools / "blender-openjd").exists():
        (tools / "blender-openjd").symlink_to(adaptor_bin() / "blender-openjd")
    uv_cache = subprocess.run(["uv", "cache", "dir"], capture_output=True, text=True, check=True).stdout.strip()
    env = (
        os.environ
        | {
            "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
            "HERMES_IN_ROOT_BIND": uv_cache,  # the GUI tier's Blender runs in a root folder: the adaptor's client is there
        }
        | (environ or {})
    )
    command = [str(HERMES_BLENDER), "farm", "run", str(bundle), "--blender", blender, "--json"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def gui_tier_blender() -> str:
    """The GUI tier's Blender program (scripts/gui_root.sh); CI must have it."""
    command = blender_command()
    if command is None or blender_version(command)[1] < (5, 2):
        if os.environ.get("CI") == "true":
            pytest.fail("CI must have the GUI tier's Blender 5.2 (scripts/gui_root.sh)")
        pytest.skip("no Blender 5.2 program here (scripts/gui_root.sh makes one)")
    return command


def outcome(run: subprocess.Popen[str]) -> dict[str, Any]:
    stdout, stderr = run.communicate(timeout=500)
    assert stdout.strip(), stderr
    return json.loads(stdout.splitlines()[-1]) | {"exit": run.returncode, "progress": stderr}


CASES = {
    "plain, the bpy wheel's Blender, Workbench, chunks": ("plain", "BLENDER_WORKBENCH", 6, False),
    "deadline_adaptor, AWS's blender-openjd, the GUI tier's Blender, Cycles": ("deadline_adaptor", "CYCLES", 3, True),
}


@pytest.mark.parametrize("flavour, engine, last, gui_tier", CASES.values(), ids=CASES)
def test_a_bundle_renders_every_frame_as_render_frames_to_folder_renders_it(
    bridge: Session, tmp_path: Path, flavour: str, engine: str, last: int, gui_tier: bool
) -> None:
    blender = gui_tier_blender() if gui_tier else None
    folder = scene(bridge, tmp_path, engine)
    bundle = export(bridge, folder, frames=f"1-{last}", chunk_size=4, flavour=flavour)
    (folder / "reference").mkdir()
    bridge.ok(
        "render_frames_to_folder", {"output_folder": str(folder / "reference"), "frame_start": 1, "frame_end": last}
    )
    done = outcome(farm_run(bundle, folder, blender))
    assert (done["status"], done["exit"]) == ("completed", 0), done
    frames = range(1, last + 1)
    farm = [str(folder / "frames" / f"ViewLayer_frame_{frame:04d}.png") for frame in frames]
    assert done["frames_written"] == farm
    # Plain: six frames in chunks of at most four, two Blender starts; the adaptor: a task per frame, one Blender.
    assert done["progress"].count("task Frame=") == (2 if flavour == "plain" else last)
    reference = [str(folder / "reference" / f"frame_{frame:04d}.png") for frame in frames]
    differences = bridge.run(DIFFERENCES.format(farm=farm, reference=reference))
    # Each frame is its reference frame but for noise (Cycles in another build: 0.001 of mean difference), and the
    # cube moves between every two frames (at least 0.006 here): a frame off by one would be told.
    assert min(differences["to_next"]) > 0.004, differences
    assert max(differences["to_reference"]) < 0.003, differences
    assert os.stat(done["log"]).st_mode & 0o077 == 0


def _blender_of(run: subprocess.Popen[str]) -> psutil.Process:
    """The Blender the run's job started (the launcher's Python), once it is there."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        for child in psutil.Process(run.pid).children(recursive=True):
            try:
                if any("blender_launcher" in part for part in child.cmdline()):
                    return child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    raise AssertionError("the run started no Blender")


def _gone(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [process for process in processes if process.is_running() and process.status() != psutil.STATUS_ZOMBIE]


def test_a_cancel_during_a_frame_stops_the_run_and_every_process_it_started(bridge: Session, shot: Path) -> None:
    bundle = export(bridge, shot, frames="1-6", chunk_size=1)
    run = farm_run(bundle, shot)
    _blender_of(run)
    started = psutil.Process(run.pid).children(recursive=True)
    run.send_signal(signal.SIGINT)
    done = outcome(run)
    assert (done["status"], done["exit"]) == ("cancelled", 130), done
    assert _gone(started) == []
    assert all(Path(frame).is_file() for frame in done["frames_written"])
    assert len(os.listdir(shot / "frames")) == len(done["frames_written"]) < 6


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's word to openjd is Linux's")
def test_a_farm_run_killed_outright_leaves_neither_openjd_nor_its_blender_running(bridge: Session, shot: Path) -> None:
    """SIGKILL gives `farm run` no chance to cancel: the kernel tells `openjd` (PR_SET_PDEATHSIG), which cancels."""
    bundle = export(bridge, shot, frames="1-6", chunk_size=1)
    (shot / "tmp").mkdir()
    run = farm_run(bundle, shot, environ={"TMPDIR": str(shot / "tmp")})  # the scratch a killed run cannot remove
    blender = _blender_of(run)
    started = psutil.Process(run.pid).children(recursive=True)
    openjd = [process for process in started if "openjd" in " ".join(process.cmdline())]
    assert openjd and blender in started, started
    run.kill()
    run.communicate(timeout=60)
    deadline = time.monotonic() + 120  # a bound on the wait, not a measure: OpenJD's cancel takes well under it
    while _gone(started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(started) == [], [process.cmdline() for process in _gone(started)]


def test_a_blender_that_dies_mid_run_fails_it_and_the_frames_written_are_kept(bridge: Session, shot: Path) -> None:
    bundle = export(bridge, shot, frames="1-6", chunk_size=3)
    run = farm_run(bundle, shot)
    first = _blender_of(run)
    first.wait(300)  # the first chunk, 1-3, written
    _blender_of(run).kill()  # the second chunk's Blender, as a crash ends it
    done = outcome(run)
    assert (done["status"], done["exit"]) == ("failed", 1), done
    assert done["frames_written"] == [str(shot / "frames" / f"ViewLayer_frame_{frame:04d}.png") for frame in (1, 2, 3)]
    assert "failed" in done["message"] and "3 frames written before it, kept" in done["message"]


def test_through_hermes_blender_mcp_an_agent_exports_starts_polls_and_cancels_a_farm_run(
    bridge: Session, shot: Path
) -> None:
    """The official SDK's client, as an agent: Blender's export_render_job through the relay, then the relay's own
    farm run tools; Blender answers meanwhile, since nothing of the run is in it."""
    blender_launcher.install(shot)  # the `blender` on the server's PATH
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hermes_blender.cli", "mcp", "--runtime-file", str(bridge.runtime_file)],
        # uv fetches openjd-cli with this machine's certificates and index settings
        env=os.environ | {"PATH": f"{shot}{os.pathsep}{os.environ['PATH']}"},
    )

    async def agent() -> dict[str, Any]:
        async with Client(stdio_client(server), read_timeout_seconds=120) as client:  # type: ignore[arg-type]
            seen: dict[str, Any] = {}
            exported = await client.call_tool(
                "export_render_job",
                {
                    "bundle_folder": str(shot / "bundle"),
                    "output_folder": str(shot / "frames"),
                    "chunk_size": 1,
                    "use_unsaved_changes": True,
                },
            )
            bundle = exported.structured_content["bundle_folder"]
            started = await client.call_tool("start_farm_run_task", {"bundle_folder": bundle})
            assert not started.is_error, started.content[0].text
            task_id = started.structured_content["task_id"]
            seen["second"] = await client.call_tool("start_farm_run_task", {"bundle_folder": bundle})
            while (polled := (await client.call_tool("get_farm_run_task", {"task_id": task_id})).structured_content)[
                "frames_written_count"
            ] == 0:
                assert polled["status"] == "working", polled
                await asyncio.sleep(0.2)
            seen["meanwhile"] = await client.call_tool("get_objects_summary", {})
            seen["cancelled"] = (
                await client.call_tool("cancel_farm_run_task", {"task_id": task_id})
            ).structured_content
            seen["again"] = await client.call_tool("cancel_farm_run_task", {"task_id": task_id})
            seen["unknown"] = await client.call_tool("get_farm_run_task", {"task_id": "nope"})
            return seen

    seen = asyncio.run(agent())
    assert not seen["meanwhile"].is_error and seen["meanwhile"].structured_content["total_objects"] == 3
    cancelled = seen["cancelled"]
    assert cancelled["status"] == "cancelled" and 1 <= cancelled["frames_written_count"] < 6, cancelled
    assert all(Path(frame).is_file() for frame in cancelled["frames_written"])
    for name, state in (("second", "too_many_tasks"), ("again", "task_finished"), ("unknown", "not_found")):
        assert seen[name].is_error and json.loads(seen[name].content[0].text)["state"] == state, seen[name]


@pytest.mark.parametrize(
    "mode, state",
    [("read-only", "read_only"), ("ask", "confirmation_unavailable"), (None, "app_not_running")],
    ids=["read-only", "ask", "Blender closed"],
)
def test_where_the_person_at_blender_has_not_let_the_agent_change_things_no_farm_run_starts(
    tmp_path: Path, mode: str | None, state: str
) -> None:
    """A run writes frames without asking: only `full` lets the agent start one, and the person's mode is Blender's
    to say; nothing runs otherwise."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "template.yaml").write_text("{}")  # never read: the mode is asked first
    runtime_file = tmp_path / "Blender" / "server.json"
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)],
        env=dict(os.environ),
    )

    async def agent() -> Any:
        async with Client(stdio_client(server), read_timeout_seconds=60) as client:  # type: ignore[arg-type]
            return await client.call_tool("start_farm_run_task", {"bundle_folder": str(bundle)})

    if mode is None:
        refused = asyncio.run(agent())
    else:
        with HeadlessBlender(runtime_file, mode=mode):
            refused = asyncio.run(agent())
    assert refused.is_error and json.loads(refused.content[0].text)["state"] == state, refused
    assert os.listdir(bundle) == ["template.yaml"]  # no log: nothing ran
