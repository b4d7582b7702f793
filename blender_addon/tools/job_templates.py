"""Open Job Description job bundles as data: the frames a bundle renders, and its three files in Deadline Cloud's
layout (`template.yaml`, `parameter_values.yaml`, `asset_references.yaml`). No bpy: `job_bundles.py` checks the
scene and writes these.

Two flavours of template (docs/decisions/farm-bundles.md). `deadline_adaptor` is shaped as AWS's Blender submitter
shapes its own (one step per view layer, a `Frame` task over `{{Param.Frames}}`, a "sticky" Blender opened by
`blender-openjd daemon start` in a step environment and given one frame per task), so a Deadline Cloud queue whose
hosts have that adaptor runs it unchanged. `plain` needs nothing but a `blender` on the worker: one Blender per chunk
of frames (the TASK_CHUNKING extension), running the small script embedded in the template.

The files are written as JSON, which is YAML too (every YAML 1.2 reader, PyYAML and OpenJD's among them, reads it),
so the add-on needs no YAML library inside Blender.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ToolError

SPECIFICATION = "jobtemplate-2023-09"
PLAIN, ADAPTOR = "plain", "deadline_adaptor"
FLAVOURS = (PLAIN, ADAPTOR)
ADAPTOR_ENGINES = {
    "BLENDER_WORKBENCH": "workbench",
    "CYCLES": "cycles",
    "BLENDER_EEVEE": "eevee",
    "BLENDER_EEVEE_NEXT": "eevee",  # EEVEE's name in Blender 4.2 to 4.5
}
"""The engines AWS's adaptor knows (its init data's `render_engine`), by Blender's own name for them."""
MAX_FRAMES = 100_000
_RANGE = re.compile(r"\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*(?::\s*(\d+)\s*)?)?")
_NOT_IN_NAMES = ("{{", "}}", "/", "\\")
"""What a scene's or view layer's name may not hold to go into a template: a format string's braces, and a path
separator (the name is part of each frame's file name, as AWS's adaptor names them)."""

CHUNK_SCRIPT = """\
# Renders one chunk of frames (written by hermes-blender's export_render_job, flavour plain).
# blender -b FILE --python THIS -- SCENE VIEW_LAYER FIRST[-LAST] OUTPUT_BASE
import sys

import bpy

scene_name, layer, chunk, base = sys.argv[sys.argv.index("--") + 1 :]
scene = bpy.data.scenes[scene_name]
first, _, last = chunk.partition("-")
frames = range(int(first), int(last or first) + 1)
for done, frame in enumerate(frames, 1):
    scene.frame_set(frame)
    scene.render.filepath = base
    scene.render.filepath = scene.render.frame_path(frame=frame)
    bpy.ops.render.render(scene=scene.name, layer=layer, write_still=True)
    print(f"openjd_status: frame {frame} written: {scene.render.filepath}", flush=True)
    print(f"openjd_progress: {100 * done / len(frames):.1f}", flush=True)
"""
"""Run by the worker's Blender: it sets the frame, renders the one view layer and writes the file; every other
setting is the saved copy's own. A failure is a non-zero exit (`--python-exit-code 1`), so the task fails."""


def parse_frames(text: str) -> list[int]:
    """`1-250`, `1-3,8,11-15`, `1-9:2` as frame numbers in order (OpenJD's range expressions, which Deadline
    Cloud's `Frames` takes); ToolError `invalid_frames` or `empty_frame_range`."""
    frames: list[int] = []
    for part in text.split(","):
        found = _RANGE.fullmatch(part)
        if found is None:
            raise ToolError(
                f"frames {text[:200]!r}: {part.strip()[:50]!r} is not a frame or a range (write 1-250, 1-3,8,11-15 "
                "or 1-9:2). Nothing was written",
                state="invalid_frames",
            )
        first, last, step = found.groups()
        start, end = int(first), int(last) if last is not None else int(first)
        if end < start or (step is not None and int(step) < 1):
            raise ToolError(
                f"frames {text[:200]!r}: {part.strip()!r} is reversed or steps by nothing, so it holds no frame. "
                "Nothing was written",
                state="empty_frame_range",
            )
        frames += range(start, end + 1, int(step or 1))
        if len(frames) > MAX_FRAMES:
            raise ToolError(f"more than {MAX_FRAMES} frames; export the range in parts", state="invalid_frames")
    if len(set(frames)) != len(frames):
        raise ToolError(
            f"frames {text[:200]!r} name a frame twice; each frame may be rendered once. Nothing was written",
            state="invalid_frames",
        )
    return frames


def frames_expression(frames: list[int]) -> str:
    """The frames (in order, none twice) as the shortest list of runs: `1-3,8,11-15`."""
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in _runs(frames))


def chunk_count(frames: list[int], size: int) -> int:
    """Tasks a CONTIGUOUS chunking of `size` makes: each run of consecutive frames is cut into chunks."""
    return sum(-(-(last - first + 1) // size) for first, last in _runs(frames))


def _runs(frames: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for frame in frames:
        if runs and frame == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], frame)
        else:
            runs.append((frame, frame))
    return runs


def check_name(kind: str, name: str) -> None:
    if any(part in name for part in _NOT_IN_NAMES):
        raise ToolError(
            f"the {kind} {name!r} holds {' or '.join(repr(p) for p in _NOT_IN_NAMES)}, which a job template cannot "
            f"carry; rename it. Nothing was written",
            state="unsupported_name",
        )


class Job:
    """What one bundle renders: where from and to, which frames, scene and view layers, in which flavour."""

    def __init__(
        self,
        *,
        name: str,
        blend: str,
        output_folder: str,
        frames: list[int],
        scene: str,
        view_layers: list[str],
        engine: str,
        output_format: str,
        file_pattern: str,
        chunk_size: int,
        flavour: str,
    ) -> None:
        self.name = name
        self.blend = blend
        self.output_folder = output_folder
        self.frames = frames
        self.scene = scene
        self.view_layers = view_layers
        self.engine = engine
        self.output_format = output_format
        self.file_pattern = file_pattern
        self.chunk_size = chunk_size
        self.flavour = flavour

    def tasks(self) -> int:
        per_layer = len(self.frames) if self.flavour == ADAPTOR else chunk_count(self.frames, self.chunk_size)
        return per_layer * len(self.view_layers)

    def template(self) -> dict[str, Any]:
        steps = [
            self._adaptor_step(layer) if self.flavour == ADAPTOR else self._plain_step(layer)
            for layer in self.view_layers
        ]
        template: dict[str, Any] = {
            "specificationVersion": SPECIFICATION,
            "name": self.name,
            "description": f"Written by hermes-blender's export_render_job (flavour {self.flavour}).",
            "parameterDefinitions": self._parameters(),
            "steps": steps,
        }
        if self.flavour == PLAIN:
            template = {"specificationVersion": SPECIFICATION, "extensions": ["TASK_CHUNKING"], **template}
        return template

    def parameter_values(self) -> dict[str, Any]:
        """Deadline Cloud's `parameter_values.yaml` (`openjd run` wants the same as a {name: value} mapping)."""
        values = {
            "BlenderFile": self.blend,
            "OutputDir": self.output_folder,
            "Frames": frames_expression(self.frames),
            "RenderScene": self.scene,
            "OutputFileName": self.file_pattern,
        }
        if self.flavour == PLAIN:
            values["ChunkSize"] = self.chunk_size
        else:
            values |= {"RenderEngine": ADAPTOR_ENGINES[self.engine], "OutputFormat": self.output_format}
        return {"parameterValues": [{"name": name, "value": value} for name, value in values.items()]}

    def asset_references(self, external_files: list[str]) -> dict[str, Any]:
        """Deadline Cloud's `asset_references.yaml`: what a farm uploads (the copy, the files it reads), and the
        folder it brings back."""
        return {
            "assetReferences": {
                "inputs": {"filenames": [self.blend, *external_files], "directories": []},
                "outputs": {"directories": [self.output_folder]},
                "referencedPaths": [],
            }
        }

    def _parameters(self) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = [
            {
                "name": "BlenderFile",
                "type": "PATH",
                "objectType": "FILE",
                "dataFlow": "IN",
                "description": "The copy of the .blend made for this job.",
            },
            {
                "name": "OutputDir",
                "type": "PATH",
                "objectType": "DIRECTORY",
                "dataFlow": "OUT",
                "description": "Where the frames are written.",
            },
            {
                "name": "Frames",
                "type": "STRING",
                "minLength": 1,
                "description": "The frames to render, e.g. 1-3,8,11-15.",
            },
            {"name": "RenderScene", "type": "STRING", "minLength": 1, "description": "The scene to render."},
            {
                "name": "OutputFileName",
                "type": "STRING",
                "minLength": 1,
                "description": "Each frame's file name after its view layer's and `_`, #### standing for the frame.",
            },
        ]
        if self.flavour == PLAIN:
            parameters.append({"name": "ChunkSize", "type": "INT", "minValue": 1, "description": "Frames per task."})
        else:
            parameters += [
                {"name": "RenderEngine", "type": "STRING", "allowedValues": sorted(set(ADAPTOR_ENGINES.values()))},
                {"name": "OutputFormat", "type": "STRING", "minLength": 1},
                {"name": "GPUDevice", "type": "STRING", "default": "NONE"},
            ]
        return parameters

    def _plain_step(self, layer: str) -> dict[str, Any]:
        return {
            "name": _step_name(layer),
            "parameterSpace": {
                "taskParameterDefinitions": [
                    {
                        "name": "Frame",
                        "type": "CHUNK[INT]",
                        "range": "{{Param.Frames}}",
                        "chunks": {"defaultTaskCount": "{{Param.ChunkSize}}", "rangeConstraint": "CONTIGUOUS"},
                    }
                ]
            },
            "script": {
                "embeddedFiles": [
                    {"name": "renderChunk", "type": "TEXT", "filename": "render_chunk.py", "data": CHUNK_SCRIPT}
                ],
                "actions": {
                    "onRun": {
                        "command": "blender",
                        "args": [
                            "-b",
                            "{{Param.BlenderFile}}",
                            "--python-exit-code",
                            "1",
                            "--python",
                            "{{Task.File.renderChunk}}",
                            "--",
                            "{{Param.RenderScene}}",
                            layer,
                            "{{Task.Param.Frame}}",
                            f"{{{{Param.OutputDir}}}}/{layer}_{{{{Param.OutputFileName}}}}",
                        ],
                        "cancelation": {"mode": "NOTIFY_THEN_TERMINATE"},
                    }
                },
            },
        }

    def _adaptor_step(self, layer: str) -> dict[str, Any]:
        connection = "{{Session.WorkingDirectory}}/connection.json"
        init_data = "".join(
            f"{key}: {value}\n"
            for key, value in (
                ("scene_file", "{{Param.BlenderFile}}"),
                ("render_engine", "{{Param.RenderEngine}}"),
                ("gpu_device", "{{Param.GPUDevice}}"),
                ("render_scene", "{{Param.RenderScene}}"),
                ("view_layer", layer),
                ("output_dir", "{{Param.OutputDir}}"),
                ("output_file_name", "{{Param.OutputFileName}}"),
                ("output_format", "{{Param.OutputFormat}}"),
            )
        )

        def daemon(verb: str, *more: str) -> dict[str, Any]:
            return {
                "command": "blender-openjd",
                "args": ["daemon", verb, "--connection-file", connection, *more],
                "cancelation": {"mode": "NOTIFY_THEN_TERMINATE"},
            }

        return {
            "name": _step_name(layer),
            "parameterSpace": {
                "taskParameterDefinitions": [{"name": "Frame", "type": "INT", "range": "{{Param.Frames}}"}]
            },
            "stepEnvironments": [
                {
                    "name": "Blender",
                    "description": "One Blender kept open for the step's frames (AWS's Blender adaptor).",
                    "script": {
                        "embeddedFiles": [
                            {"name": "initData", "filename": "init-data.yaml", "type": "TEXT", "data": init_data}
                        ],
                        "actions": {
                            "onEnter": daemon("start", "--init-data", "file://{{Env.File.initData}}"),
                            "onExit": daemon("stop"),
                        },
                    },
                }
            ],
            "script": {
                "embeddedFiles": [
                    {
                        "name": "runData",
                        "filename": "run-data.yaml",
                        "type": "TEXT",
                        "data": "frame: {{Task.Param.Frame}}\n",
                    }
                ],
                "actions": {"onRun": daemon("run", "--run-data", "file://{{Task.File.runData}}")},
            },
        }


def _step_name(layer: str) -> str:
    """A step per view layer, named after it (OpenJD names are at most 64 characters)."""
    return f"Render {layer}"[:64]
