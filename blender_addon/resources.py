"""The scene as MCP resources and the prompts: views of the read-only tools, under URIs a client can cache and
subscribe to.

A resource is what one read-only tool answers for fixed arguments, so a resource and its tool never disagree
and a read runs as that tool's job, with its rules (budget, refusals, time limit). A template names the
argument in its URI (`blender://objects/{name}`, the name percent-encoded). The render tasks working or kept
are listed one by one. Prompts are short instructions for the model that name the tools to use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

SCHEME = "blender://"
JSON = "application/json"


@dataclass(frozen=True)
class View:
    """A resource, or a template of them: a read-only tool's answer under a URI."""

    uri: str
    """A URI, or for a template an RFC 6570 URI template with one `{argument}` at its end."""
    name: str
    title: str
    description: str
    tool: str
    arguments: dict[str, Any]
    """The tool's fixed arguments; a template adds its own."""

    @property
    def argument(self) -> str | None:
        """The template's argument, None for a plain resource."""
        return self.uri[self.uri.index("{") + 1 : -1] if self.uri.endswith("}") else None

    @property
    def prefix(self) -> str:
        return self.uri[: self.uri.index("{")] if self.argument else self.uri

    def descriptor(self, uri: str | None = None, name: str | None = None) -> dict[str, Any]:
        key = "uriTemplate" if self.argument and uri is None else "uri"
        return {
            key: uri or self.uri,
            "name": name or self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": JSON,
        }


SCENE = View(
    f"{SCHEME}scene",
    "scene",
    "The scene",
    "What get_objects_summary answers: counts, the active object, mode and camera, and the first page of objects "
    "under their collections, with the scene's revision.",
    "get_objects_summary",
    {},
)
SELECTION = View(
    f"{SCHEME}selection",
    "selection",
    "The selection",
    "The selected objects (get_objects_summary with selected=true), with the active object.",
    "get_objects_summary",
    {"selected": True},
)
FILE = View(
    f"{SCHEME}file",
    "file",
    "The open .blend file",
    "The open file's path, whether it has unsaved changes, its size and age (get_blendfile_summary_path_info).",
    "get_blendfile_summary_path_info",
    {},
)
HISTORY = View(
    f"{SCHEME}agent-history",
    "agent-history",
    "The agent's history",
    "The agent's steps that undo_agent_steps can take back, and what redo can bring back (get_agent_history).",
    "get_agent_history",
    {},
)
OBJECT = View(
    f"{SCHEME}objects/{{name}}",
    "object",
    "One object",
    "One object's transform, data, modifiers, materials and visibility (get_object_detail_summary); the name "
    "percent-encoded.",
    "get_object_detail_summary",
    {},
)
RENDER_TASK = View(
    f"{SCHEME}render-tasks/{{task_id}}",
    "render-task",
    "A frame-range render task",
    "A task's status, frames done and the last one written (get_render_frames_task).",
    "get_render_frames_task",
    {},
)
RESOURCES = (SCENE, SELECTION, FILE, HISTORY)
TEMPLATES = (OBJECT, RENDER_TASK)


def task_uri(task_id: str) -> str:
    return RENDER_TASK.prefix + quote(task_id, safe="")


def task_uris(task_ids: list[str]) -> set[str]:
    return {task_uri(task_id) for task_id in task_ids}


def listed(task_ids: list[str]) -> list[dict[str, Any]]:
    """`resources/list`: the fixed views, then each render task the bridge keeps."""
    tasks = [RENDER_TASK.descriptor(task_uri(task_id), f"render-task {task_id}") for task_id in task_ids]
    return [view.descriptor() for view in RESOURCES] + tasks


OBJECT_LISTS = ("added", "removed", "transformed", "data_changed", "shading_changed", "visibility_changed")


def touched(summary: dict[str, Any], wanted: frozenset[str], *, history_moved: bool = False) -> set[str]:
    """The URIs among `wanted` whose reading a recorded change may have changed: every change touches the scene,
    the file (its unsaved flag) and the agent's history (which the user's edits can block); the selection when
    it or the active object moved; an object when the summary names it (renames under both names). A file loaded
    or Blender's history moved (an undo, the user's Ctrl+Z) replaced every datablock, and a change of collection
    membership names collections only: then every object and the selection may read differently; so too after the
    agent's own undo or redo (`history_moved`), whose summary names what its steps named, when the summary's
    names were cut at the answer budget (the objects past the cut are named nowhere), and when it names only kinds
    (`unnamed_changed`: a hidden object's edit, which nothing says is whose) or nothing (`unreadable`)."""
    uris = {SCENE.uri, FILE.uri, HISTORY.uri}
    replaced = history_moved or any(event.get("event") != "saved" for event in summary.get("file", ()))
    if replaced or "selection" in summary or "active_object" in summary:
        uris.add(SELECTION.uri)
    spellings: dict[str, list[str]] = {}  # a name, and each way a listener wrote its URI (`%28` or `(`)
    for uri in wanted:
        if uri.startswith(OBJECT.prefix):
            spellings.setdefault(unquote(uri[len(OBJECT.prefix) :]), []).append(uri)
    unnamed = "unnamed_changed" in summary or "unreadable" in summary
    if replaced or "collections_changed" in summary or unnamed or summary.get("cut_at_budget"):
        uris.update(uri for found in spellings.values() for uri in found)
    elif spellings:
        named = {name for key in OBJECT_LISTS for name in summary.get(key, ())}
        named.update(side for pair in summary.get("renamed", ()) for side in (pair["from"], pair["to"]))
        uris.update(uri for name in named & spellings.keys() for uri in spellings[name])
    return uris & wanted


def resolve(uri: str) -> tuple[View, dict[str, Any]] | None:
    """The view a URI names and the tool arguments to read it with; None for a URI this bridge does not serve."""
    for view in RESOURCES:
        if uri == view.uri:
            return view, dict(view.arguments)
    for view in TEMPLATES:
        if uri.startswith(view.prefix) and len(uri) > len(view.prefix):
            value = unquote(uri[len(view.prefix) :], errors="strict")
            return view, {**view.arguments, str(view.argument): value}
    return None


@dataclass(frozen=True)
class Prompt:
    """A short instruction for the model, with the arguments it fills in."""

    name: str
    title: str
    description: str
    text: str
    """With `{argument}` for each argument."""
    arguments: tuple[tuple[str, str], ...] = ()
    """Each argument's name and description; all required."""

    def descriptor(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "title": self.title, "description": self.description}
        if self.arguments:
            entry["arguments"] = [
                {"name": name, "description": description, "required": True} for name, description in self.arguments
            ]
        return entry

    def messages(self, given: dict[str, str]) -> list[dict[str, Any]]:
        text = self.text
        for name, _ in self.arguments:
            text = text.replace("{" + name + "}", given[name])
        return [{"role": "user", "content": {"type": "text", "text": text}}]


PROMPTS = {
    prompt.name: prompt
    for prompt in (
        Prompt(
            "inspect-scene",
            "Inspect my scene",
            "Read the open scene and describe it, changing nothing.",
            "Describe the Blender scene that is open now, changing nothing. Read get_objects_summary first (the "
            "resource blender://scene holds the same), then get_object_detail_summary for the objects that matter, "
            "and get_view_montage to look at it. Say what the scene holds, what looks unfinished or wrong, and "
            "which file is open (get_blendfile_summary_path_info).",
        ),
        Prompt(
            "safe-change",
            "Make a safe change",
            "Make one change to the scene in steps that can each be checked and taken back.",
            "Make this change to the open Blender scene: {change}\n\nWork safely: read get_objects_summary first; "
            "save_checkpoint before a large change; make the change in small calls (each is one step "
            "undo_agent_steps can take back) and read each answer's `changes` to check it did only what you meant; "
            "look at the result with get_view_montage. If a step went wrong, undo it with undo_agent_steps, or "
            "restore_checkpoint. Never save over the user's file unless they ask.",
            (("change", "The change to make, in words (e.g. 'make the chair wooden')."),),
        ),
    )
}
