"""`hermes-blender farm run` renders the bundle `export_render_job` wrote, with the real `openjd run` and a real
Blender (the bpy wheel behind a `blender` command) in processes of its own: every frame is there, decodes, moves
with the animation and matches the frame `render_frames_to_folder` renders in the bridge's Blender. A cancel stops
the run and every process it started; a Blender that dies mid-run fails it; the frames written by then are kept."""

from __future__ import annotations

import asyncio
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

from hermes_blender.client import BridgeClient
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from tests import blender_launcher

pytestmark = pytest.mark.timeout(600)
HERMES_BLENDER = Path(sys.executable).parent / "hermes-blender"
SCENE = """
import bpy
bpy.ops.wm.read_homefile(use_factory_startup=True)
scene = bpy.context.scene
scene.render.engine = "BLENDER_WORKBENCH"
scene.render.resolution_x, scene.render.resolution_y = 64, 48
scene.frame_start, scene.frame_end = 1, 6
cube = bpy.data.objects["Cube"]
for frame, x in ((1, -2.0), (6, 2.0)):
    cube.location.x = x
    cube.keyframe_insert("location", frame=frame)
bpy.ops.wm.save_as_mainfile(filepath={path!r})
result = {{}}
"""
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
    "to_reference": [float(numpy.abs(a - b).max()) for a, b in zip(farm, reference)],
    "to_next": [float(numpy.abs(a - b).mean()) for a, b in zip(farm, farm[1:])],
}}
"""


class Bridge:
    def __init__(self, runtime_file: Path) -> None:
        self.client = BridgeClient(RuntimeFileSpec(path=str(runtime_file)))

    def ok(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = asyncio.run(self.client.call_tool(name, arguments))
        assert not result.is_error, result.text
        assert result.structured is not None
        return result.structured

    def run(self, code: str) -> Any:
        return self.ok("execute_blender_code", {"code": code})["result"]


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    runtime_file = tmp_path_factory.mktemp("farm") / "server.json"
    with HeadlessBlender(runtime_file):
        yield Bridge(runtime_file)


@pytest.fixture
def shot(bridge: Bridge, tmp_path: Path) -> Path:
    """A saved Workbench scene whose cube moves from frame 1 to 6; the frames' folder beside its project."""
    (tmp_path / "project").mkdir()
    (tmp_path / "frames").mkdir()
    bridge.run(SCENE.format(path=str(tmp_path / "project" / "shot.blend")))
    return tmp_path


def export(bridge: Bridge, folder: Path, **arguments: Any) -> Path:
    answer = bridge.ok(
        "export_render_job",
        # The agent's call that saved is an undo step, which Blender counts as a change after the save.
        {"bundle_folder": str(folder / "bundle"), "output_folder": str(folder / "frames"), "use_unsaved_changes": True}
        | arguments,
    )
    return Path(answer["bundle_folder"])


def farm_run(bundle: Path, folder: Path) -> subprocess.Popen[str]:
    (folder / "bin").mkdir(exist_ok=True)
    blender = blender_launcher.install(folder / "bin")
    command = [str(HERMES_BLENDER), "farm", "run", str(bundle), "--blender", str(blender), "--json"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def outcome(run: subprocess.Popen[str]) -> dict[str, Any]:
    stdout, stderr = run.communicate(timeout=500)
    assert stdout.strip(), stderr
    return json.loads(stdout.splitlines()[-1]) | {"exit": run.returncode, "progress": stderr}


def test_a_plain_bundle_renders_every_frame_in_chunks_as_render_frames_to_folder_does(
    bridge: Bridge, shot: Path
) -> None:
    bundle = export(bridge, shot, frames="1-6", chunk_size=4)
    (shot / "reference").mkdir()
    bridge.ok("render_frames_to_folder", {"output_folder": str(shot / "reference"), "frame_start": 1, "frame_end": 6})
    done = outcome(farm_run(bundle, shot))
    assert (done["status"], done["exit"]) == ("completed", 0), done
    farm = [str(shot / "frames" / f"ViewLayer_frame_{frame:04d}.png") for frame in range(1, 7)]
    assert done["frames_written"] == farm
    assert done["progress"].count("task Frame=") == 2  # six frames in chunks of at most four: two Blender starts
    reference = [str(shot / "reference" / f"frame_{frame:04d}.png") for frame in range(1, 7)]
    differences = bridge.run(DIFFERENCES.format(farm=farm, reference=reference))
    assert max(differences["to_reference"]) < 0.02, differences  # the same pixels, but for rounding
    assert min(differences["to_next"]) > 0.001, differences  # the cube moves between every two frames
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


def test_a_cancel_during_a_frame_stops_the_run_and_every_process_it_started(bridge: Bridge, shot: Path) -> None:
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


def test_a_blender_that_dies_mid_run_fails_it_and_the_frames_written_are_kept(bridge: Bridge, shot: Path) -> None:
    bundle = export(bridge, shot, frames="1-6", chunk_size=3)
    run = farm_run(bundle, shot)
    first = _blender_of(run)
    first.wait(300)  # the first chunk, 1-3, written
    _blender_of(run).kill()  # the second chunk's Blender, as a crash ends it
    done = outcome(run)
    assert (done["status"], done["exit"]) == ("failed", 1), done
    assert done["frames_written"] == [str(shot / "frames" / f"ViewLayer_frame_{frame:04d}.png") for frame in (1, 2, 3)]
    assert "failed" in done["message"] and "3 frames written before it, kept" in done["message"]
