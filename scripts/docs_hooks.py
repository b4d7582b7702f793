"""MkDocs hooks (mkdocs.yml › hooks): the pages made from the code at build time, so they cannot drift from it.

- `tools.md`, the tool reference: every tool of hermes_blender/catalogue.json (what a client lists) and the relay's
  own tool, then the resources and prompts of hermes_blender/views.json.
- The named states in troubleshooting.md: each state of `hermes_blender.contract.status.State`, with the sentence,
  user action and retry policy `describe` gives it (what `status` and the relay say).
- performance.md's first section: the latest full benchmark run (docs/bench-*.json) as a table and a plot of each
  path's p50 against the floor it was measured beside.
- decisions/index.md: every file in docs/decisions/, by title and date.
- cli.md's last section: every `hermes-blender` command's `--help`, from the toolkit's own parser.

tests/docs/test_site.py holds each against its source.
"""

from __future__ import annotations

import html
import json
import re
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CATALOGUE = ROOT / "hermes_blender" / "catalogue.json"
VIEWS = ROOT / "hermes_blender" / "views.json"
STATES_MARK = "<!-- generated: the named states -->"
"""Where troubleshooting.md takes the generated table of named states."""
HELP_MARK = "<!-- generated: every command's help -->"
"""Where cli.md takes each `hermes-blender` command's `--help`."""
PLOT = "images/bench-ratios.svg"
GENERATED = ("tools.md", "decisions/index.md", PLOT)
"""The site's pages and pictures only the build makes (docs/ holds no copy that could go stale)."""

# --- the tool reference ---------------------------------------------------------------------------------------------

HINTS = (
    ("readOnlyHint", "read-only", "changes the scene or files"),
    ("destructiveHint", "may destroy data", "adds or updates only"),
    ("idempotentHint", "idempotent", "not idempotent"),
    ("openWorldHint", "reaches outside Blender", "stays inside this Blender"),
)


def prose(text: object) -> str:
    """Text from the code as it reads: no HTML of its own, and Markdown's marks (`*`, `_`, `[`, a backquote) kept
    as characters."""
    return re.sub(r"([\\`*_\[\]])", r"\\\1", html.escape(str(text), quote=False))


def cell(text: object, *, markdown: bool = False) -> str:
    """One table cell: on one line, with no `|` of its own; `markdown`: text this module wrote as Markdown."""
    line = " ".join(str(text).split())
    return (line if markdown else prose(line)).replace("|", "\\|")


def type_of(schema: dict[str, Any]) -> str:
    """A schema's type in a few words: `integer 1..5000`, `array of string (one of …)`, `string | null`."""
    if "anyOf" in schema:
        return " | ".join(type_of(branch) for branch in schema["anyOf"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " | ".join(kind)
    if kind == "array" and isinstance(schema.get("items"), dict):
        kind = f"array of {type_of(schema['items'])}"
        if "maxItems" in schema:
            kind += f", at most {schema['maxItems']}"
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        kind += f" {'' if low is None else low}..{'' if high is None else high}"
    if "maxLength" in schema:
        kind += f", {schema.get('minLength', 0)}-{schema['maxLength']} characters"
    if "enum" in schema:
        kind += " (one of " + ", ".join(f"`{item}`" for item in schema["enum"]) + ")"
    return kind


def annotations_of(tool: dict[str, Any]) -> str:
    """The annotations as words; a hint a tool leaves out is said as MCP's default."""
    marks = tool.get("annotations") or {}
    defaults = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
    words = []
    for key, yes, no in HINTS:
        value = marks.get(key, defaults[key])
        words.append(f"{yes if value else no} (`{key}: {str(value).lower()}`{'' if key in marks else ', default'})")
    return "; ".join(words)


def tool_section(tool: dict[str, Any]) -> str:
    lines = [f"## `{tool['name']}`", ""]
    title = tool.get("title") or (tool.get("annotations") or {}).get("title")
    if title:
        lines += [f"*{prose(title)}*", ""]
    lines += [prose(tool.get("description", "")), ""]
    lines += [f"**Annotations:** {annotations_of(tool)}.", ""]
    schema = tool.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    if properties:
        required = set(schema.get("required") or ())
        lines += ["| argument | type | default | description |", "|---|---|---|---|"]
        for name, prop in properties.items():
            default = (
                "required" if name in required else (f"`{json.dumps(prop['default'])}`" if "default" in prop else "")
            )
            kind, described = cell(type_of(prop), markdown=True), cell(prop.get("description", ""))
            lines.append(f"| `{name}` | {kind} | {cell(default, markdown=True)} | {described} |")
        lines.append("")
    else:
        lines += ["No arguments.", ""]
    output = tool.get("outputSchema")
    if output:
        lines += ['??? note "Output schema"', "", "    ```json"]
        lines += ["    " + line for line in json.dumps(output, indent=2, ensure_ascii=False).splitlines()]
        lines += ["    ```", ""]
    return "\n".join(lines)


def relay_tools() -> list[dict[str, Any]]:
    """The tools `hermes-blender mcp` adds of its own, as it lists them."""
    from hermes_blender.stdio_server import _own_tools

    return [tool.model_dump(by_alias=True, exclude_none=True) for tool in _own_tools()]


def tool_reference() -> str:
    catalogue = json.loads(CATALOGUE.read_text(encoding="utf-8"))
    views = json.loads(VIEWS.read_text(encoding="utf-8"))
    lines = [
        "# Tool reference",
        "",
        f"Made from `hermes_blender/catalogue.json` when the site is built: the {len(catalogue)} tools a Blender lists",
        "to an MCP client (server `blender`), with their arguments, annotations and output schemas. A failed call is a",
        "result with `isError` whose JSON text carries `state` and `error` (every output schema admits that shape):",
        "the states are on the [troubleshooting page](troubleshooting.md#what-a-tool-call-can-answer).",
        "",
        "| tool | title | annotations |",
        "|---|---|---|",
    ]
    for tool in catalogue:
        marks = tool.get("annotations") or {}
        short = "read-only" if marks.get("readOnlyHint") else "changes things"
        lines.append(f"| [`{tool['name']}`](#{tool['name']}) | {cell(tool.get('title', ''))} | {short} |")
    lines += ["", *(tool_section(tool) for tool in catalogue)]
    lines += [
        "# Through `hermes-blender mcp`",
        "",
        "The stdio relay lists the tools above and one of its own:",
        "",
        *(tool_section(tool) for tool in relay_tools()),
        "# Resources and prompts",
        "",
        "What a client lists while Blender is closed (`hermes_blender/views.json`); each resource reads what the named",
        "tool answers.",
        "",
        "| URI | title | what it holds |",
        "|---|---|---|",
    ]
    for resource in views["resources"]:
        lines.append(f"| `{resource['uri']}` | {cell(resource['title'])} | {cell(resource['description'])} |")
    for template in views["resourceTemplates"]:
        lines.append(f"| `{template['uriTemplate']}` | {cell(template['title'])} | {cell(template['description'])} |")
    lines += ["", "| prompt | what it asks | arguments |", "|---|---|---|"]
    for prompt in views["prompts"]:
        arguments = ", ".join(
            f"`{a['name']}`{' (required)' if a.get('required') else ''}: {prose(a.get('description', ''))}"
            for a in prompt.get("arguments", [])
        )
        lines.append(
            f"| `{prompt['name']}` | {cell(prompt['description'])} | {cell(arguments or 'none', markdown=True)} |"
        )
    return "\n".join(lines) + "\n"


# --- the named states -----------------------------------------------------------------------------------------------

MEANING = {
    "ready": "Blender is found, its bridge publishes a live endpoint and (with `status`) answered an authenticated "
    "round trip.",
    "missing_app": "No Blender where `plugin.json` tells Hermes to look (the registry and Program Files on Windows, "
    "`/Applications` on macOS, `blender` on PATH, Flatpak or Snap on Linux).",
    "version_too_old": "Blender is older than the server needs (`blender` 4.5, `blender_lab` 5.1). Hermes reads the "
    "version on Windows and macOS; on Linux `status` asks `blender --version`.",
    "no_interactive_session": "The server needs an interactive desktop session and this one has none.",
    "app_not_running": "No runtime file (Blender closed, or its bridge not started), a broken one, or one naming a "
    "process that has exited.",
    "endpoint_unavailable": "The runtime file's address is not plain http on loopback with a port, or Blender refused "
    "the token (401).",
    "hermes_not_connected": "Blender is ready but Hermes holds no MCP connection to it (`status --no-connect` can say "
    "no more than this, as Hermes's own local probe).",
}
ACTION = {
    "ready": "nothing",
    "missing_app": "install Blender 4.5 LTS or newer ([Install](install.md))",
    "version_too_old": "update Blender ([Blender versions](install.md#blender-versions))",
    "no_interactive_session": "use an interactive Blender",
    "app_not_running": "start Blender (the bridge starts with it), or *Sidebar › Hermes › Start Bridge*",
    "endpoint_unavailable": "in Blender: *Sidebar › Hermes › Stop Bridge*, then *Start Bridge*",
    "hermes_not_connected": "type `/reload-mcp` in Hermes",
}
RETRY = {
    "after_user_action": "after you act",
    "never_here": "never on this machine",
    "none": "nothing to retry",
}


def states() -> tuple[str, ...]:
    from hermes_blender.contract.status import State

    return typing.get_args(State)


def state_table() -> str:
    from hermes_blender.contract.status import describe

    lines = ["| state | what it means | what to do | what Hermes and the relay say | retry |", "|---|---|---|---|---|"]
    for state in states():
        reason, action, retry = describe(state, "Blender")  # type: ignore[arg-type]
        said = f"{reason} {action}".strip()
        meaning, action = cell(MEANING[state], markdown=True), cell(ACTION[state], markdown=True)
        lines.append(f"| `{state}` | {meaning} | {action} | {cell(said)} | {RETRY[retry]} (`{retry}`) |")
    return "\n".join(lines)


# --- the command line ----------------------------------------------------------------------------------------------


def commands(parser: Any, prefix: str = "hermes-blender") -> list[tuple[str, Any]]:
    """Each command and subcommand of a parser, depth first, with its own parser."""
    import argparse

    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += [(f"{prefix} {name}", sub), *commands(sub, f"{prefix} {name}")]
    return found


def command_help() -> str:
    """`--help` of every command, as a person sees it in a 100-column terminal."""
    import os

    from hermes_blender.cli import _parser

    kept, os.environ["COLUMNS"] = os.environ.get("COLUMNS"), "100"
    try:
        lines = []
        for name, sub in commands(_parser()):
            lines += [f"### `{name}`", "", "```", sub.format_help().rstrip(), "```", ""]
        return "\n".join(lines)
    finally:
        if kept is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = kept


# --- the benchmark --------------------------------------------------------------------------------------------------

BENCH = re.compile(r"bench-(\d{4}-\d{2}-\d{2})(?:-[\w-]+)?\.json$")


def latest_run() -> Path:
    """The newest recorded full run of `scripts/bench.py --json` (a file with rows measured beside a floor)."""
    runs = []
    for path in DOCS.glob("bench-*.json"):
        found = BENCH.search(path.name)
        report = json.loads(path.read_text(encoding="utf-8"))
        if found and isinstance(report.get("latency"), dict) and "machine" in report:
            runs.append((found.group(1), path.name, path))
    return max(runs)[2]


def ratio_rows(report: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """Each row with a ratio, and the anchor it was measured against: the floor before it, or the direct call."""
    rows, anchor = [], ""
    for name, stats in report["latency"].items():
        if name.startswith("floor:") and "ratio_p50" not in stats:
            anchor = name.removeprefix("floor: ")
            continue
        if "ratio_p50" in stats:
            rows.append((name, stats, "the same call straight to the bridge" if "direct_p50" in stats else anchor))
    return rows


def ratio_plot(rows: list[tuple[str, dict[str, Any], str]]) -> str:
    """A horizontal bar per row: its p50 in multiples of its anchor's, the anchor at 1."""
    width, label, bar_room, row_height = 900, 430, 400, 22
    top = max(max(stats["ratio_p50"] for _, stats, _ in rows), 1.0)
    scale = bar_room / top
    height = row_height * len(rows) + 50
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12" role="img" aria-label="p50 of each path in multiples of its floor">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for i, (name, stats, _) in enumerate(rows):
        y = 10 + i * row_height
        ratio = stats["ratio_p50"]
        short = name if len(name) <= 68 else name[:66] + "…"
        parts.append(f'<text x="{label - 8}" y="{y + 14}" text-anchor="end">{html.escape(short)}</text>')
        parts.append(f'<rect x="{label}" y="{y + 3}" width="{ratio * scale:.1f}" height="14" fill="#4051b5"/>')
        parts.append(f'<text x="{label + ratio * scale + 4:.1f}" y="{y + 14}">{ratio:.2f}x</text>')
    one = label + scale
    base = 10 + row_height * len(rows)
    parts.append(f'<line x1="{one:.1f}" y1="5" x2="{one:.1f}" y2="{base}" stroke="#c62828" stroke-dasharray="4 3"/>')
    parts.append(f'<text x="{one:.1f}" y="{base + 16}" text-anchor="middle" fill="#c62828">1x = the anchor</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def latest_section() -> str:
    path = latest_run()
    report = json.loads(path.read_text(encoding="utf-8"))
    machine = report["machine"]
    rows = ratio_rows(report)
    lines = [
        "## Today's figures",
        "",
        f"The latest full run on record, [`{path.name}`]({path.name}) (made at build time from that file):",
        f"{machine['cpu']}, {machine['cores']} cores, Python {machine['python']}, bpy {machine['bpy']}, "
        f"mcp {machine['mcp']}. Each path alternated call by call with its anchor (the floor it is measured",
        "against, or for the stdio relay the same call made straight to the bridge); *x anchor* is the ratio of",
        "their p50s. The sections after this one are the history, as each was recorded.",
        "",
        "| path | p50 ms | p95 ms | p99 ms | x anchor | anchor |",
        "|---|---:|---:|---:|---:|---|",
    ]
    anchors = list(dict.fromkeys(anchor for _, _, anchor in rows))
    for name, stats, anchor in rows:
        p99 = f"{stats['p99']:.3f}" if "p99" in stats else ""
        lines.append(
            f"| {cell(name)} | {stats['p50']:.3f} | {stats['p95']:.3f} | {p99} | {stats['ratio_p50']:.2f} | "
            f"{chr(65 + anchors.index(anchor))} |"
        )
    lines += ["", "Anchors:", ""]
    lines += [f"- **{chr(65 + i)}**: {prose(anchor)}" for i, anchor in enumerate(anchors)]
    lines += ["", f"![p50 of each path in multiples of its anchor]({PLOT})", ""]
    return "\n".join(lines)


# --- the decisions --------------------------------------------------------------------------------------------------

DATE_LINE = re.compile(r"^\*\*Date:\*\* (\d{4}-\d{2}-\d{2})", re.M)


def decision_files() -> list[Path]:
    return sorted(path for path in (DOCS / "decisions").glob("*.md") if path.name != "index.md")


def decisions_index() -> str:
    entries = []
    for path in decision_files():
        text = path.read_text(encoding="utf-8")
        title = text.split("\n", 1)[0].removeprefix("# ").strip()
        date = DATE_LINE.search(text)
        entries.append((date.group(1) if date else "", title, path.name))
    lines = [
        "# Decisions",
        "",
        f"One file per decision, {len(entries)} in all, newest first: the decision, the context that led to it and its",
        "consequences (as far as they were recorded), and its date. The decisions made before issue 58 were the README's",
        "Decisions section, moved here in their own words.",
        "",
        "| date | decision |",
        "|---|---|",
    ]
    for date, title, name in sorted(entries, key=lambda e: (e[0], e[1]), reverse=True):
        lines.append(f"| {date} | [{cell(title, markdown=True)}]({name}) |")
    return "\n".join(lines) + "\n"


# --- the hooks ------------------------------------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    plot = ratio_plot(ratio_rows(json.loads(latest_run().read_text(encoding="utf-8"))))
    made = dict(zip(GENERATED, (tool_reference(), decisions_index(), plot), strict=True))
    for uri, content in made.items():
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "troubleshooting.md":
        if STATES_MARK not in markdown:
            raise ValueError(f"troubleshooting.md lost its mark {STATES_MARK}")
        return markdown.replace(STATES_MARK, state_table())
    if page.file.src_uri == "cli.md":
        if HELP_MARK not in markdown:
            raise ValueError(f"cli.md lost its mark {HELP_MARK}")
        return markdown.replace(HELP_MARK, command_help())
    if page.file.src_uri == "performance.md":
        head, found, rest = markdown.partition("\n## ")
        return f"{head}\n{latest_section()}{found}{rest}" if found else markdown + "\n" + latest_section()
    return markdown
