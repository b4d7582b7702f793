"""`export_render_job`: the live scene as an Open Job Description job bundle, for a farm or `hermes-blender farm run`.

A render leaves the user's Blender this way: the bundle holds a copy of the file saved for the job (never the
user's file, never overwritten: the bundle's folder is new), the template of the flavour asked for
(`job_templates.py`), its parameter values and the files it reads. Everything a farm would fail on late is checked
first, each as a named state, and a refusal writes nothing.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import bpy

from ..errors import ToolError
from ..owner_files.folders import NotOwnFolder, own_folder
from .base import ADDITIVE, Tool, shallow
from .blendfile import external_files
from .context import JobContext
from .job_templates import ADAPTOR, ADAPTOR_ENGINES, FLAVOURS, PLAIN, Job, check_name, frames_expression, parse_frames
from .render import FILE_MAX, apply_settings, restore_settings

IMAGE_FORMATS = ("PNG", "JPEG", "OPEN_EXR", "TIFF", "TARGA", "WEBP")
"""Formats a farm writes frame by frame (farms render image sequences; a video is made from them after)."""
VIDEO_FORMATS = ("FFMPEG", "AVI_JPEG", "AVI_RAW")
"""Blender's video outputs (before Blender 5, a video is a file format; since, a media type)."""
SHOWN = 50
"""External files named in an answer (the first ones); the counts are whole."""
PATH = {"type": "string", "minLength": 1, "maxLength": FILE_MAX - 64}
EXPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "bundle_folder": {
            **PATH,
            "description": "Absolute path of a new (or empty) folder to write the bundle in (default: a new folder "
            "in the bridge's own owner-only jobs folder).",
        },
        "output_folder": {**PATH, "description": "Absolute path of an existing folder the frames are written to."},
        "frames": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1000,
            "description": "Frames to render, e.g. 1-250 or 1-3,8,11-15 (default: the scene's range).",
        },
        "scene": {"type": "string", "description": "Scene to render (default: the current one)."},
        "view_layers": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "View layers, one step each (default: those the scene renders).",
        },
        "camera": {"type": "string", "description": "Camera object (default: the scene's camera)."},
        "engine": {"type": "string", "description": "Render engine, e.g. CYCLES (default: the scene's)."},
        "resolution_x": {"type": "integer", "minimum": 4, "maximum": 65536},
        "resolution_y": {"type": "integer", "minimum": 4, "maximum": 65536},
        "resolution_percentage": {"type": "integer", "minimum": 1, "maximum": 100},
        "output_format": {"type": "string", "enum": list(IMAGE_FORMATS), "description": "Default: the scene's."},
        "file_pattern": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200,
            "default": "frame_####",
            "description": "Each frame's file name after `<view layer>_`, #### standing for the frame number.",
        },
        "chunk_size": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10000,
            "default": 10,
            "description": "Frames per task in the plain flavour (one Blender start each).",
        },
        "flavour": {
            "type": "string",
            "enum": list(FLAVOURS),
            "default": PLAIN,
            "description": "plain: needs only `blender` on the worker; deadline_adaptor: AWS's Blender adaptor "
            "(one Blender kept open per step).",
        },
        "use_unsaved_changes": {
            "type": "boolean",
            "default": False,
            "description": "Render the scene as it is now, changes not saved included (else unsaved changes are "
            "refused).",
        },
        "output_in_blend_folder": {
            "type": "boolean",
            "default": False,
            "description": "Allow an output folder inside the .blend's own folder.",
        },
    },
    "required": ["output_folder"],
    "additionalProperties": False,
}


def export_render_job(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    scene = _scene(arguments.get("scene"))
    layers = _view_layers(scene, arguments.get("view_layers"))
    camera = _camera(scene, arguments.get("camera"))
    frames = _frames(scene, arguments.get("frames"))
    flavour = arguments.get("flavour", PLAIN)
    engine = _engine(scene, arguments.get("engine"), flavour, job)
    output_format = _output_format(scene, arguments.get("output_format"))
    pattern = _file_pattern(arguments.get("file_pattern", "frame_####"))
    blend_state = _blend_state(arguments.get("use_unsaved_changes", False))
    external, path_warnings = _external_files()
    output = _output_folder(arguments["output_folder"], arguments.get("output_in_blend_folder", False))
    named = arguments.get("bundle_folder")
    bundle, made = _bundle_folder(named) if named is not None else _own_bundle_folder(Path(bpy.data.filepath).stem)
    copy = bundle / "scene" / Path(bpy.data.filepath).name
    spec = Job(
        name=f"{Path(bpy.data.filepath).stem} {scene.name} {frames_expression(frames)}"[:128],
        blend=str(copy),
        output_folder=str(output),
        frames=frames,
        scene=scene.name,
        view_layers=layers,
        engine=engine,
        output_format=output_format,
        file_pattern=pattern,
        chunk_size=arguments.get("chunk_size", 10),
        flavour=flavour,
    )
    settings = {"camera": camera, "render.engine": engine, "render.use_file_extension": True}
    settings |= {f"render.{key}": arguments[key] for key in _RESOLUTION if key in arguments}
    if hasattr(scene.render.image_settings, "media_type"):
        settings["render.image_settings.media_type"] = "IMAGE"
    settings["render.image_settings.file_format"] = output_format
    try:
        extension = _save_copy(scene, settings, copy, job)
        _write(bundle / "template.yaml", spec.template())
        _write(bundle / "parameter_values.yaml", spec.parameter_values())
        _write(bundle / "asset_references.yaml", spec.asset_references(external))
    except (OSError, RuntimeError) as exc:
        _take_back(bundle, made)
        raise ToolError(
            f"the bundle could not be written in {bundle}: {exc}. Nothing of it was kept; the open file is untouched",
            state="bundle_not_written",
        ) from None
    render = scene.render
    width = round((arguments.get("resolution_x") or render.resolution_x) * _percent(arguments, render))
    height = round((arguments.get("resolution_y") or render.resolution_y) * _percent(arguments, render))
    first = output / f"{layers[0]}_{pattern.replace('####', f'{frames[0]:04d}')}{extension}"
    state_words = (
        "the file as last saved"
        if blend_state == "saved"
        else "the scene as it is now, changes not saved to the user's file included"
    )
    return {
        "status": "ok",
        "bundle_folder": str(bundle),
        "flavour": flavour,
        "blend_copy": str(copy),
        "blend_state": blend_state,
        "frames": frames_expression(frames),
        "frame_count": len(frames),
        "tasks": spec.tasks(),
        "view_layers": layers,
        "camera": camera.name,
        "engine": engine,
        "width": width,
        "height": height,
        "output_folder": str(output),
        "first_frame_file": str(first),
        "external_files": external[:SHOWN],
        "external_count": len(external),
        "path_warnings": path_warnings[:SHOWN],
        "path_warning_count": len(path_warnings),
        "summary": f"{len(frames)} frames ({frames_expression(frames)}) of scene {scene.name!r}, view layers "
        f"{', '.join(layers)}, camera {camera.name!r}, {engine} at {width}x{height}, as {spec.tasks()} tasks "
        f"({flavour}). The job renders a copy holding {state_words} ({copy}), reading {len(external)} external "
        f"files{_warned(path_warnings)}; frames land in {output}, the first as {first.name}.",
        "run_here": f"hermes-blender farm run {bundle}",
        "submit": f"deadline bundle submit {bundle}",
    }


_RESOLUTION = ("resolution_x", "resolution_y", "resolution_percentage")


def _percent(arguments: dict[str, Any], render: Any) -> float:
    return arguments.get("resolution_percentage", render.resolution_percentage) / 100


def _scene(name: str | None) -> Any:
    if name is None:
        scene = bpy.context.scene
    elif (scene := bpy.data.scenes.get(name)) is None:
        raise ToolError(
            f"no scene {name!r}; the file has {', '.join(repr(s.name) for s in bpy.data.scenes)}. Nothing was written",
            state="scene_not_found",
        )
    check_name("scene", scene.name)
    return scene


def _view_layers(scene: Any, names: list[str] | None) -> list[str]:
    if names is None:
        names = [layer.name for layer in scene.view_layers if layer.use]
        if not names:
            raise ToolError(
                f"scene {scene.name!r} renders no view layer (each has Use for Rendering off); name the view layers "
                "to render. Nothing was written",
                state="view_layer_not_found",
            )
    for name in names:
        if scene.view_layers.get(name) is None:
            raise ToolError(
                f"scene {scene.name!r} has no view layer {name!r}; it has "
                f"{', '.join(repr(layer.name) for layer in scene.view_layers)}. Nothing was written",
                state="view_layer_not_found",
            )
        check_name("view layer", name)
    if len(set(names)) != len(names):
        raise ToolError("a view layer is named twice. Nothing was written", state="invalid_arguments")
    return names


def _camera(scene: Any, name: str | None) -> Any:
    if name is None:
        if scene.camera is None:
            raise ToolError(
                f"scene {scene.name!r} has no camera; name one (camera). Nothing was written", state="camera_not_found"
            )
        return scene.camera
    camera = bpy.data.objects.get(name)
    if camera is None or camera.type != "CAMERA":
        raise ToolError(
            f"no camera object {name!r}; the cameras are "
            f"{', '.join(repr(o.name) for o in bpy.data.objects if o.type == 'CAMERA') or 'none'}. Nothing was written",
            state="camera_not_found",
        )
    return camera


def _frames(scene: Any, text: str | None) -> list[int]:
    frames = parse_frames(text) if text is not None else list(range(scene.frame_start, scene.frame_end + 1))
    if not frames:
        raise ToolError(f"scene {scene.name!r} has no frame in its range", state="empty_frame_range")
    outside = [frame for frame in frames if not scene.frame_start <= frame <= scene.frame_end]
    if outside:
        raise ToolError(
            f"frame{'s' if len(outside) > 1 else ''} {frames_expression(outside)[:200]} outside scene "
            f"{scene.name!r}'s range {scene.frame_start}-{scene.frame_end}; widen the scene's range or ask for "
            "frames in it. Nothing was written",
            state="frames_outside_scene",
        )
    return frames


def _engine(scene: Any, name: str | None, flavour: str, job: JobContext) -> str:
    """The engine, tried on the scene and taken back (Blender's list of engines is not in its RNA's enum)."""
    engine = scene.render.engine if name is None else name
    with job.changes.unrecorded():
        try:
            restore_settings(scene, apply_settings(scene, {"render.engine": engine}))
        except ToolError:
            raise ToolError(
                f"no render engine {engine!r} in this Blender. Nothing was written", state="invalid_engine"
            ) from None
    if flavour == ADAPTOR and engine not in ADAPTOR_ENGINES:
        raise ToolError(
            f"AWS's Blender adaptor renders {', '.join(ADAPTOR_ENGINES)} only, not {engine}; use the plain flavour. "
            "Nothing was written",
            state="engine_not_supported",
        )
    return engine


def _output_format(scene: Any, name: str | None) -> str:
    if name is not None:
        return name
    settings = scene.render.image_settings
    found = settings.file_format
    if getattr(settings, "media_type", "IMAGE") == "VIDEO" or found in VIDEO_FORMATS:
        raise ToolError(
            f"the scene writes a video ({found}): farms render image sequences, frame by frame. Pass output_format "
            f"(one of {', '.join(IMAGE_FORMATS)}) and make the video from the frames after. Nothing was written",
            state="video_output",
        )
    if found not in IMAGE_FORMATS:
        raise ToolError(
            f"the scene writes {found}, which a bundle does not offer; pass output_format (one of "
            f"{', '.join(IMAGE_FORMATS)}). Nothing was written",
            state="unsupported_output_format",
        )
    return found


def _file_pattern(pattern: str) -> str:
    if "####" not in pattern or any(part in pattern for part in ("/", "\\", "{{", "}}", "\0")):
        raise ToolError(
            f"file_pattern {pattern[:100]!r} must hold #### (the frame number) and no path separator or braces. "
            "Nothing was written",
            state="invalid_file_pattern",
        )
    return pattern


def _blend_state(use_unsaved: bool) -> str:
    if not bpy.data.filepath:
        raise ToolError(
            "the open file was never saved: a farm reads a .blend, and its relative paths mean nothing until the "
            "file has a place. Save it, then export. Nothing was written",
            state="file_never_saved",
        )
    if bpy.data.is_dirty:
        if not use_unsaved:
            raise ToolError(
                f"{bpy.data.filepath} has changes not saved. Save it, or pass use_unsaved_changes: true to render "
                "the scene as it is now (the bundle gets a copy; the user's file is not touched). Nothing was written",
                state="unsaved_changes",
            )
        return "unsaved_changes_included"
    return "saved"


ABSOLUTE_WARNING = (
    "an absolute path: a farm that moves the job's files (Deadline Cloud's job attachments) finds it only on "
    "storage every worker shares at this same path; neither AWS's adaptor nor the plain template applies OpenJD's "
    "path-mapping rules inside the .blend. Make it relative (File > External Data > Make Paths Relative) or pack it"
)
"""Why an absolute path is listed: the copy's `//` paths are rebased on it and travel with the bundle's files."""


def _external_files() -> tuple[list[str], list[dict[str, str]]]:
    """The files the copy reads (resolved, each once), and those a farm may not find by the path the copy holds,
    each with why. A path relative to the working folder is `unmappable_paths`, a file not there `missing_files`."""
    found: dict[str, None] = {}
    missing: list[str] = []
    unmappable: list[str] = []
    warned: dict[str, dict[str, str]] = {}
    for _kind, block, path, absolute in external_files():
        relative = path.startswith("//")  # which os.path.isabs calls absolute
        if not relative and not os.path.isabs(path):
            unmappable.append(path)
            continue
        resolved = os.path.realpath(absolute)
        if not os.path.isfile(resolved):
            missing.append(absolute)
            continue
        found[resolved] = None
        if not relative:
            warned.setdefault(resolved, {"file": resolved, "path": path, "why": ABSOLUTE_WARNING})
        elif block.library is not None:
            warned.setdefault(
                resolved,
                {
                    "file": resolved,
                    "path": path,
                    "why": f"relative to the folder of the library {block.library.filepath}, not the .blend's: the "
                    "copy's own relative paths are rebased on the copy, a library's are not, so a farm finds it only "
                    "if that library keeps its place beside it. Make the library's paths absolute or pack them",
                },
            )
    if unmappable:
        raise ToolError(
            f"{len(unmappable)} external files have paths relative to the folder Blender was started in, not to the "
            f".blend (no leading //), which a farm's Blender, started elsewhere, cannot find: "
            f"{', '.join(unmappable[:SHOWN])}. Make them relative to the .blend (//...) or absolute, or pack them, "
            "then export. Nothing was written",
            state="unmappable_paths",
            unmappable=unmappable[:SHOWN],
        )
    if missing:
        raise ToolError(
            f"{len(missing)} external files are missing, so a farm would render without them: "
            f"{', '.join(missing[:SHOWN])}. Find them (get_blendfile_summary_missing_files) or pack them, then "
            "export. Nothing was written",
            state="missing_files",
            missing=missing[:SHOWN],
        )
    return list(found), list(warned.values())


def _warned(warnings: list[dict[str, str]]) -> str:
    if not warnings:
        return ""
    return f", {len(warnings)} of them by a path a farm that moves files may not find (path_warnings say why)"


def _absolute(raw: str, what: str, *, resolved: bool = True) -> Path:
    """`raw` as an absolute path (`~` expanded); not `resolved`: its links kept, for each to be judged on the way."""
    if "\0" in raw or not os.path.isabs(os.path.expanduser(raw)):
        raise ToolError(f"{what} must be an absolute path: {raw[:200]!r}. Nothing was written", state="invalid_path")
    expanded = os.path.expanduser(raw)
    return Path(os.path.realpath(expanded) if resolved else os.path.abspath(expanded))


def _output_folder(raw: str, in_blend_folder: bool) -> Path:
    folder = _absolute(raw, "output_folder")
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ToolError(
            f"the output folder {folder} {'is not writable by this user' if folder.is_dir() else 'does not exist'}; "
            "name an existing folder you may write to. Nothing was written",
            state="output_not_writable",
        )
    blend_folder = Path(os.path.realpath(bpy.data.filepath)).parent
    if not in_blend_folder and folder.is_relative_to(blend_folder):
        raise ToolError(
            f"the output folder {folder} is inside the .blend's own folder {blend_folder}, where a farm's frames "
            "would mix with the project's files. Name another folder, or pass output_in_blend_folder: true. Nothing "
            "was written",
            state="output_in_blend_folder",
        )
    return folder


def _bundle_folder(raw: str) -> tuple[Path, bool]:
    """The bundle's folder, and whether this call made it: a new one (0700), or one that is empty. Either way only
    this user may change it or any folder on the way, and a link on the way is one this user or root made
    (owner_files.folders): else another user could edit the template `farm run` runs, or swap the folder for a link
    while the bundle is written. Another user's is `unsafe_folder`, and nothing is written."""
    folder = _absolute(raw, "bundle_folder", resolved=False)
    if os.path.lexists(folder) and not os.path.islink(folder) and not folder.is_dir():
        raise _not_empty(folder)
    try:
        made = not own_folder(folder, create=False, private=False)
        if made:
            if not folder.parent.is_dir():
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(folder.parent))
            own_folder(folder)  # made 0700; one another user made meanwhile is theirs, refused
    except NotOwnFolder as exc:
        raise ToolError(
            f"the bundle folder is not safe to write a bundle in: {exc}. Name a folder only you may change. Nothing "
            "was written",
            state="unsafe_folder",
        ) from None
    except OSError as exc:
        raise ToolError(
            f"the bundle folder {folder} could not be made ({exc.strerror}); its parent must exist and be yours. "
            "Nothing was written",
            state="invalid_path",
        ) from None
    folder = Path(os.path.realpath(folder))  # links on the way are this user's or root's: nobody can swap them
    if not made and any(folder.iterdir()):
        raise _not_empty(folder)
    return folder, made


def _not_empty(folder: Path) -> ToolError:
    return ToolError(
        f"{folder} is there and is not an empty folder; a bundle is written into a new or empty folder only, so "
        "nothing in it is replaced. Nothing was written",
        state="bundle_folder_not_empty",
    )


def default_jobs_folder() -> Path:
    """Where bundles go when nobody names a folder: the bridge's own, beside its checkpoints (service.py)."""
    return Path(bpy.utils.user_resource("CONFIG", path="hermes_bridge")) / "jobs"


def _own_bundle_folder(stem: str) -> tuple[Path, bool]:
    """A new folder (0700) in the jobs folder, which only this user may change (owner_files.folders): a folder of
    another user's there, or a link another user planted on the way, is `unsafe_folder`, and nothing is written."""
    jobs = default_jobs_folder()
    try:
        own_folder(jobs)
    except NotOwnFolder as exc:
        raise ToolError(
            f"the bridge's jobs folder is not safe to write a bundle in: {exc}. Name a bundle_folder, or run Blender "
            "as the user who owns that folder. Nothing was written",
            state="unsafe_folder",
        ) from None
    except OSError as exc:
        raise ToolError(
            f"the bridge's jobs folder {jobs} could not be made ({exc.strerror}); name a bundle_folder. Nothing was "
            "written",
            state="bundle_not_written",
        ) from None
    name = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    for attempt in range(100):  # nobody else may add names here: a name taken is one of this user's own exports
        folder = jobs / (f"{name}-{attempt}" if attempt else name)
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return folder, True
    raise ToolError(
        f"100 bundles named {name} already in {jobs}; name a bundle_folder. Nothing was written",
        state="bundle_not_written",
    )


def _save_copy(scene: Any, settings: dict[str, Any], copy: Path, job: JobContext) -> str:
    """The open file saved as `copy` with the job's settings (taken back after, unrecorded: the scene is as it was);
    the frames' file extension."""
    copy.parent.mkdir(mode=0o700)
    with job.changes.unrecorded():
        saved = apply_settings(scene, settings)
        try:
            extension = scene.render.file_extension
            job.changes.copying(True)
            try:
                bpy.ops.wm.save_as_mainfile(filepath=str(copy), copy=True, relative_remap=True, check_existing=False)
            finally:
                job.changes.copying(False)
        finally:
            restore_settings(scene, saved)
    os.chmod(copy, 0o600)
    return extension


def _write(path: Path, data: dict[str, Any]) -> None:
    """One of the bundle's files, new (O_EXCL), owner-only, as JSON (which YAML readers read)."""
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as out:
        json.dump(data, out, indent=2)
        out.write("\n")


def _take_back(bundle: Path, made: bool) -> None:
    """What a failed export wrote: the folder it made, or what it put in the empty one it was given."""
    with contextlib.suppress(OSError):
        if made:
            shutil.rmtree(bundle)
        else:
            for entry in bundle.iterdir():
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


EXPORT_RENDER_JOB = Tool(
    "export_render_job",
    "Export a render as a farm job bundle",
    "Write the scene's render as an Open Job Description job bundle (Deadline Cloud's layout: template.yaml, "
    "parameter_values.yaml, asset_references.yaml and a copy of the .blend made for the job) into a new folder, so "
    "the render leaves this Blender: `hermes-blender farm run BUNDLE` renders it on this machine, `deadline bundle "
    "submit BUNDLE` (or AWS's Deadline MCP server) sends it to a farm. Without bundle_folder, the bundle goes to a "
    "new folder in the bridge's own owner-only jobs folder; the answer says where. Prefer it to "
    "render_frames_to_folder for more than a few frames or long frames. Checked first, each a named state, nothing "
    "written: an unsaved or never-saved file, missing external files or ones relative to the working folder, a "
    "video output format, frames malformed, empty or outside the scene's range, a scene, view layer or camera not "
    "there, an output folder not writable or inside the .blend's folder, a bundle folder that is not new or empty, "
    "a bundle or jobs folder another user may change, or a link of theirs on the way (unsafe_folder). The answer says what the job renders, where frames "
    "land and which files it reads (path_warnings: those a farm that moves files may not find).",
    export_render_job,
    input_schema=EXPORT_SCHEMA,
    output_schema=shallow(
        status="string",
        bundle_folder="string",
        flavour="string",
        blend_copy="string",
        blend_state="string",
        frames="string",
        frame_count="integer",
        tasks="integer",
        view_layers="array",
        camera="string",
        engine="string",
        width="integer",
        height="integer",
        output_folder="string",
        first_frame_file="string",
        external_files="array",
        external_count="integer",
        path_warnings="array",
        path_warning_count="integer",
        summary="string",
        run_here="string",
        submit="string",
    ),
    annotations=dict(ADDITIVE),
)
