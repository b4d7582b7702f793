"""The documentation site and the README, held against the code they describe: the tool reference against the shipped
catalogue, the named states against the contract and every state the code can answer, the decisions against the
README they were moved out of, and every command the README gives against a test that runs it."""

from __future__ import annotations

import html
import json
import re
import shlex
import socket
import subprocess
import sys
import time
import typing
import urllib.request
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hermes_blender.contract.status import State, describe
from hermes_blender.lab_relay import LAB_OFF
from tests.conftest import REPO_ROOT
from tests.docs.conftest import DOCS, docs_hooks

pytestmark = pytest.mark.timeout(180)
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
CATALOGUE = json.loads((REPO_ROOT / "hermes_blender" / "catalogue.json").read_text(encoding="utf-8"))
BEFORE_THE_MOVE = "bcc2690"
"""The last commit whose README held the Decisions section."""


class _Text(HTMLParser):
    """A page's text, its elements' ids in order, and each `<code>` inside a `<details>`."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.ids: list[tuple[str, int]] = []
        self.details: list[str] = []
        self._in_details = 0
        self._in_code = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs).get("id")
        if found:
            self.ids.append((found, len(self.parts)))
        self._in_details += tag == "details"
        if tag == "code" and self._in_details:
            self._in_code = True
            self.details.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_details -= tag == "details"
        if tag == "code":
            self._in_code = False

    def handle_data(self, data: str) -> None:
        self.parts.append(data)
        if self._in_code:
            self.details[-1] += data


def _read(page: Path) -> _Text:
    parsed = _Text()
    parsed.feed(page.read_text(encoding="utf-8"))
    return parsed


def _words(text: str) -> str:
    return " ".join(text.split())


def _sections(page: Path, names: list[str]) -> dict[str, tuple[str, list[str]]]:
    """Each named heading's text up to the next named one (or the page's end), and the output schemas in it."""
    parsed = _read(page)
    starts = [(name, at) for name, at in parsed.ids if name in names]
    assert [name for name, _ in starts] == names, "every name has its own heading, in the catalogue's order"
    sections = {}
    schemas = iter(parsed.details)
    for (name, at), (_, end) in zip(starts, [*starts[1:], ("", len(parsed.parts))], strict=True):
        text = "".join(parsed.parts[at:end])
        sections[name] = (_words(text), [next(schemas) for _ in range(text.count("Output schema"))])
    return sections


def test_every_catalogue_tool_is_in_the_built_reference_with_all_it_declares(site: Path) -> None:
    names = [tool["name"] for tool in CATALOGUE]
    relay = docs_hooks().relay_tools()
    sections = _sections(site / "tools" / "index.html", [*names, *(tool["name"] for tool in relay)])
    for tool in [*CATALOGUE, *relay]:
        text, schemas = sections[tool["name"]]
        assert _words(tool["description"]) in text, tool["name"]
        assert _words(tool["title"]) in text, tool["name"]
        for argument, schema in (tool["inputSchema"].get("properties") or {}).items():
            assert argument in text and _words(schema.get("description", "")) in text, (tool["name"], argument)
            for item in schema.get("enum", []) + (schema.get("items") or {}).get("enum", []):
                assert str(item) in text, (tool["name"], argument, item)
        for hint, value in (tool.get("annotations") or {}).items():
            if hint != "title":
                assert f"{hint}: {str(value).lower()}" in text, (tool["name"], hint)
        if "outputSchema" in tool:
            assert [json.loads(schema) for schema in schemas] == [tool["outputSchema"]], tool["name"]
        else:
            assert schemas == [], tool["name"]


def test_the_built_troubleshooting_page_names_every_state_as_status_says_it(site: Path) -> None:
    page = (site / "troubleshooting" / "index.html").read_text(encoding="utf-8")
    text = _words(html.unescape(re.sub(r"<[^>]+>", "", page)))
    assert "generated:" not in page
    for state in typing.get_args(State):
        reason, action, retry = describe(state, "Blender")
        assert f"{state} " in text and _words(f"{reason} {action}") in text and f"({retry})" in text, state


def test_the_built_command_line_page_has_every_commands_help(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_blender.cli import _parser

    monkeypatch.setenv("COLUMNS", "100")  # the width the page is made at: argparse wraps at its hyphens too
    text = _words(html.unescape(re.sub(r"<[^>]+>", "", (site / "cli" / "index.html").read_text(encoding="utf-8"))))
    names = [name for name, _ in docs_hooks().commands(_parser())]
    assert {"hermes-blender status", "hermes-blender call", "hermes-blender connect"} <= set(names)
    for name, sub in docs_hooks().commands(_parser()):
        assert f"usage: {name}" in text, name
        assert _words(sub.format_help()) in text, name


def _states_in_code() -> set[str]:
    """Every state name the add-on and the toolkit can answer, as the code writes them."""
    patterns = (
        r'\bstate\s*=\s*"([a-z_]+)"',
        r'\bstate\s*=\s*"[a-z_]+"\s+if\b[^\n]*?\belse\s+"([a-z_]+)"',
        r'"state":\s*"([a-z_]+)"',
        r'\bstate:\s*str\s*=\s*"([a-z_]+)"',
    )
    found = {LAB_OFF, *typing.get_args(State)}
    for package in ("blender_addon", "hermes_blender"):
        for path in (REPO_ROOT / package).rglob("*.py"):
            source = path.read_text(encoding="utf-8")
            found.update(name for pattern in patterns for name in re.findall(pattern, source))
    return found


def test_every_state_the_code_answers_is_documented_and_every_documented_one_exists() -> None:
    in_code = _states_in_code()
    assert {"busy", "nothing_to_redo", "user_edited_since", "lab_listener_off"} <= in_code  # the patterns reach
    documented = {
        name
        for page in DOCS.rglob("*.md")
        for name in re.findall(r"`([a-z]+(?:_[a-z]+)*)`", page.read_text(encoding="utf-8"))
    }
    assert sorted(in_code - documented) == [], "a state with no line in docs/ (troubleshooting.md's tables)"
    troubleshooting = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    first_cells = re.findall(r"^\| ((?:`[a-z_]+`(?: / )?)+) \|", troubleshooting, re.M)
    listed = {name for cell in first_cells for name in re.findall(r"`([a-z_]+)`", cell)}
    assert {"busy", "camera_not_found", "nothing_to_redo"} <= listed  # every row of every table is read
    assert sorted(listed - in_code) == [], "troubleshooting.md lists a state the code never answers"


def _decisions(text: str) -> dict[str, str]:
    """Each decision of a README's Decisions section: its bold title (on one line) and its whole recorded text."""
    section = text.split("\n## Decisions\n", 1)[1].split("\n## ", 1)[0]
    items = [item for item in re.split(r"\n(?=- \*\*)", section) if item.startswith("- **")]
    return {" ".join(re.match(r"- \*\*(.+?)\*\*", item, re.S).group(1).split()): item for item in items}


def _words_of(text: str) -> Counter[str]:
    """The words a text says, whatever its layout, headings, link targets or the marks around a word."""
    text = re.sub(r"\]\([^)]*\)", "]", re.sub(r"^#+ .*$", "", text, flags=re.M))
    words = (word.strip("*()[],.;:") for word in text.split())
    return Counter(word for word in words if word and word != "-")


def test_no_decision_was_lost_in_the_move_out_of_the_readme() -> None:
    shown = subprocess.run(
        ["git", "show", f"{BEFORE_THE_MOVE}:README.md"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30
    )
    assert shown.returncode == 0, f"this test needs the history down to {BEFORE_THE_MOVE}: {shown.stderr}"
    before = _decisions(shown.stdout)
    files = {
        path.read_text(encoding="utf-8").split("\n", 1)[0].removeprefix("# "): path
        for path in docs_hooks().decision_files()
    }
    print(f"{len(before)} decisions before, {len(files)} files after")
    assert len(before) == 60 and [title for title in before if title not in files] == []
    for title, recorded in before.items():
        text = files[title].read_text(encoding="utf-8")
        assert re.search(r"^\*\*Date:\*\* \d{4}-\d{2}-\d{2}", text, re.M), title
        assert "\n## Decision\n" in text, title
        sections = text[text.index("\n## ") :]
        assert _words_of(sections) == _words_of(recorded), f"{title}: words lost or added in the move"
    assert "## Decisions" not in README


def test_the_decisions_index_lists_every_decision(site: Path) -> None:
    index = (site / "decisions" / "index.html").read_text(encoding="utf-8")
    for path in docs_hooks().decision_files():
        assert f'href="{path.stem}/"' in index, path.name


def test_the_readme_is_short_and_keeps_the_two_developer_commands_as_they_were() -> None:
    lines = README.splitlines()
    assert len(lines) <= 250
    assert lines.index("## Install") < lines.index("## Developers")
    assert (
        "uv run hermes-blender demo   # main job: headless Blender + bridge on the factory scene, one real scene"
        in (README)
    )
    assert re.search(r"^uv run pytest +# the tests", README, re.M)


README_COMMANDS = {
    "uv run hermes-blender build-addon --output dist": ("tests/e2e/test_readme_path.py", '_readme_args("build-addon")'),
    "blender --command extension install-file --repo user_default --enable dist/hermes_bridge-0.1.0.zip": (
        "tests/gui/harness.py",
        '"extension", "install-file", "--repo", "user_default", "--enable"',
    ),
    "uv run hermes-blender install-addon --blender /path/to/blender": (
        "tests/e2e/test_readme_path.py",
        'run("install-addon")',
    ),
    "python scripts/warm_uv.py": ("tests/agent/test_warm_uv.py", 'SCRIPT = REPO_ROOT / "scripts" / "warm_uv.py"'),
    "hermes-blender connect claude-code --write": ("tests/clients/test_claude_code.py", 'connect("claude-code")'),
    "hermes-blender connect gemini --write": ("tests/clients/test_gemini_cli.py", 'connect("gemini")'),
    "hermes-blender connect cursor --write": ("tests/agent/test_client_configs.py", '"connect", name, "--write"'),
    "hermes-blender connect vscode --write": ("tests/agent/test_client_configs.py", '"connect", name, "--write"'),
    "hermes-blender status": ("tests/e2e/test_readme_path.py", '_readme_args("status")'),
    "hermes-blender call get_objects_summary": ("tests/e2e/test_readme_path.py", '_readme_args("call")'),
    "hermes-blender tools": ("tests/e2e/test_cli_helps.py", '_run("tools", "--runtime-file"'),
    "uv run hermes-blender demo": ("tests/e2e/test_cli.py", '[*CLI, "demo"]'),
    "uv run pytest": (".ci/run", '\n"${UV[@]}" run pytest --durations'),
    "uv run mkdocs serve": ("tests/docs/test_site.py", '"mkdocs", "serve"'),
    "uv run mkdocs build --strict": ("tests/docs/conftest.py", '"mkdocs", "build", "--strict"'),
}
"""Each command in the README's code blocks, and the file whose test runs it (the needle: where it does)."""
WRITTEN_DOWN_ONLY = {
    "hermes plugins install blender-bridge/blender-bridge/hermes_plugin": "installs from the published repository",
    "hermes plugins enable blender-bridge": "after the install above; tests/hermes installs the folder as shipped",
    "uv tool install git+https://github.com/blender-bridge/blender-bridge": "installs from the published repository",
}
"""Commands no test can run here (they fetch this project from where it is published), with the reason."""


def _readme_commands() -> list[str]:
    commands, shell = [], False
    for line in README.splitlines():
        if line.startswith("```"):
            shell = line in ("```sh", "```bash")
            continue
        if shell and line.strip():
            commands.append(" ".join(shlex.split(line, comments=True)))
    return commands


def test_every_command_in_the_readme_is_run_by_a_test() -> None:
    commands = _readme_commands()
    assert "uv run pytest" in commands and "uv run hermes-blender demo" in commands
    for command in commands:
        if command in WRITTEN_DOWN_ONLY:
            continue
        assert command in README_COMMANDS, f"no test runs the README's {command!r}"
        where, needle = README_COMMANDS[command]
        assert needle in (REPO_ROOT / where).read_text(encoding="utf-8"), (command, where)


def _anchors(site: Path, page: str) -> set[str]:
    built = site / page.removesuffix(".md").removesuffix("index") / "index.html"
    return {name for name, _ in _read(built).ids}


def test_the_readmes_links_into_the_docs_reach_a_page_and_its_heading(site: Path) -> None:
    for picture in re.findall(r'<img src="([^"]+)"', README):
        assert (REPO_ROOT / picture).is_file(), picture
    for target in re.findall(r"\]\((docs/[^)\s]+)\)", README):
        page, _, anchor = target.removeprefix("docs/").partition("#")
        if not page.endswith(".md"):
            assert (DOCS / page).is_file(), target
            continue
        assert (DOCS / page).is_file(), target
        assert not anchor or anchor in _anchors(site, page), target


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_mkdocs_serve_serves_the_site_as_the_readme_says() -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mkdocs", "serve", "--dev-addr", f"127.0.0.1:{port}", "--no-livereload"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, page = time.monotonic() + 90, ""
        while time.monotonic() < deadline and server.poll() is None and not page:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/tools/", timeout=5) as answer:
                    page = answer.read().decode()
            except OSError:
                time.sleep(0.3)
        assert 'id="get_objects_summary"' in page, server.stderr.read() if server.poll() is not None else "no page"
    finally:
        server.terminate()
        server.wait(30)
