"""plugin.json's servers block: data parsed strictly, every error naming its rule."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from blender_addon.owner_files import runtime_file as addon_runtime_file
from hermes_blender import instances
from hermes_blender.checks import render_validation, validate, validation_report
from hermes_blender.contract import DECLARED_LAB_PATH, liveness
from hermes_blender.contract.declaration import parse_server_declaration
from hermes_blender.contract.host import HostFacts
from hermes_blender.contract.package import load_plugin
from hermes_blender.errors import ContractError
from tests.conftest import PLUGIN_ROOT, REPO_ROOT

from .conftest import servers

LINUX = HostFacts(os="linux", env={"HOME": "/home/ana", "PATH": ""})


def test_repository_plugin_validates_with_both_servers_declared() -> None:
    package = validate(PLUGIN_ROOT, LINUX)
    assert package.name == "blender-bridge"
    assert set(package.servers) == {"blender", "blender_lab"} == set(package.mcp_servers)
    assert package.mcp_servers["blender"]["type"] == "stdio"
    assert package.mcp_servers["blender_lab"]["type"] == "stdio"


TOOLKIT = "git+https://github.com/blender-bridge/blender-bridge"
OFFICIAL_SERVER = [
    "uv",
    "tool",
    "run",
    "--with",
    "mcp<2",
    "--from",
    "git+https://projects.blender.org/lab/blender_mcp.git@2cea8d566dde07fbac28a61d698909d69724e853#subdirectory=mcp",
    "blender-mcp",
    "--transport",
    "stdio",
]
"""The official Blender Lab server, pinned as the official plugin pins it (with the constraint its mcp 1.x needs)."""


def _pinned_toolkit(server: dict[str, Any]) -> str:
    """The commit a server's `uv tool run --from <toolkit>@<commit>` pins, after checking the launch's shape."""
    assert server["command"] == "uv" and server["args"][:2] == ["tool", "run"]
    source = server["args"][server["args"].index("--from") + 1]
    repository, _, commit = source.rpartition("@")
    assert repository == TOOLKIT and re.fullmatch("[0-9a-f]{40}", commit), source
    return commit


def _version_at(commit: str) -> str:
    """The toolkit's version at a commit of this history: pyproject.toml's own, or the file it reads it from."""
    import tomllib

    def show(path: str) -> str:
        return subprocess.run(
            ["git", "show", f"{commit}:{path}"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout  # a commit of this history (never a tag: a tag can be moved)

    project = tomllib.loads(show("pyproject.toml"))
    if "version" in project["project"]:
        return project["project"]["version"]
    assert "version" in project["project"]["dynamic"]
    found = re.search(r'^__version__ = "([^"]+)"$', show(project["tool"]["hatch"]["version"]["path"]), re.M)
    assert found is not None
    return found[1]


@pytest.mark.timeout(60)
def test_both_servers_run_the_toolkit_at_one_pinned_commit_of_this_version_through_hermess_own_uv() -> None:
    """Hermes swaps a bare `uv` for its managed copy; the toolkit is pinned like the official server is: one full
    commit of this history, whose toolkit is the plugin's version and has both commands the servers run."""
    from hermes_blender import __version__
    from hermes_blender.stdio_server import CLIENT_ENV

    plugin = json.loads((PLUGIN_ROOT / "plugin.json").read_text())
    mcp = json.loads((PLUGIN_ROOT / "mcp.json").read_text())["mcpServers"]
    blender, lab = mcp["blender"], mcp["blender_lab"]
    commit = _pinned_toolkit(blender)
    assert _pinned_toolkit(lab) == commit
    assert plugin["version"] == __version__ == _version_at(commit)
    pinned_cli = subprocess.run(
        ["git", "show", f"{commit}:hermes_blender/cli.py"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert '"mcp"' in pinned_cli and '"lab"' in pinned_cli and "serve_lab" in pinned_cli
    assert blender["args"][-2:] == ["hermes-blender", "mcp"] and blender["env"] == {CLIENT_ENV: "hermes"}
    relay = lab["args"].index("hermes-blender")
    assert lab["args"][relay : relay + 3] == ["hermes-blender", "lab", "--"]
    assert lab["args"][relay + 3 :] == OFFICIAL_SERVER  # the official server, behind the gate
    assert lab["env"] == {"BLENDER_MCP_HOST": "127.0.0.1", "BLENDER_MCP_PORT": "9876"}
    for name in ("blender", "blender_lab"):
        assert {"app", "requires", "liveness"} <= set(servers(plugin)[name])  # Hermes's install gate and verdicts


def test_runtime_file_path_and_fields_are_one_contract_on_both_sides() -> None:
    plugin = json.loads((PLUGIN_ROOT / "plugin.json").read_text())
    for name, declared in servers(plugin).items():
        spec = liveness.parse_liveness(declared["liveness"], "linux").spec
        assert spec is not None, name
        if name == "blender_lab":  # the Lab listener's own file, published only while it runs
            assert spec.path == addon_runtime_file.DECLARED_LAB_PATH == DECLARED_LAB_PATH
        else:
            assert spec.path == addon_runtime_file.DECLARED_PATH == liveness.DECLARED_PATH
        assert (spec.url_key, spec.token_key, spec.pid_key) == (
            addon_runtime_file.URL_FIELD,
            addon_runtime_file.TOKEN_FIELD,
            addon_runtime_file.PID_FIELD,
        )
    assert addon_runtime_file.INSTANCES_FOLDER == instances.INSTANCES_FOLDER


def test_app_block_parses_into_one_block_per_os_with_defaults() -> None:
    declaration = parse_server_declaration(
        "x",
        {
            "app": {
                "linux": {"presence": "executable", "location": "/usr/bin/blender"},
                "darwin": {"presence": "bundle", "location": "/Applications/Blender.app", "version": {"kind": "plist"}},
            },
            "requires": {"app": True},
        },
    )
    assert declaration.app is not None and set(declaration.app) == {"linux", "darwin"}
    linux = declaration.app["linux"]
    assert linux.version_kind == "none" and [(loc.kind, loc.value) for loc in linux.locations] == [
        ("path", "/usr/bin/blender")
    ]
    assert declaration.requires.app is True and declaration.requires.min_version is None


def test_location_list_parses_each_kind_in_order() -> None:
    declared = servers(json.loads((PLUGIN_ROOT / "plugin.json").read_text()))["blender"]
    declaration = parse_server_declaration("blender", declared)
    assert declaration.app is not None
    assert [(loc.kind, loc.value, loc.file) for loc in declaration.app["win32"].locations] == [
        ("uninstall_registry", "Blender", "blender.exe"),
        ("path", "%ProgramFiles%/Blender Foundation/Blender */blender.exe", ""),
    ]
    assert [loc.kind for loc in declaration.app["linux"].locations] == ["command", "flatpak", "snap"]
    assert declaration.app["darwin"].locations[0].kind == "app_bundle"


def _app(**block: Any) -> dict[str, Any]:
    return {"presence": "executable", "location": "/usr/bin/blender", **block}


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        ("nope", "must be an object"),
        ({"liveness": {"kind": "server_json"}}, "liveness without app or requires"),
        ({"app": {"linux": _app()}, "extra": 1}, "unknown keys ['extra']"),
        ({"app": {"windows": _app()}}, "unknown OS keys ['windows']"),
        ({"app": {}}, "at least one OS block"),
        ({"app": {"linux": _app(presence="folder")}}, "app.linux.presence must be one of"),
        ({"app": {"linux": _app(location="")}}, "app.linux.location is required"),
        ({"app": {"linux": _app(location=[])}}, "app.linux.location is required"),
        ({"app": {"linux": _app(location="usr/bin/blender")}}, "app.linux.location must be absolute"),
        ({"app": {"linux": _app(location="/opt/../blender")}}, "without '..'"),
        ({"app": {"linux": _app(location="https://example.com/blender")}}, "URL scheme"),
        ({"app": {"linux": _app(location="/opt/**/blender")}}, "'**'"),
        ({"app": {"win32": _app(location="\\\\server\\share\\blender.exe")}}, "app.win32.location must be absolute"),
        (
            {"app": {"linux": _app(location=[{"kind": "teleport"}])}},
            "location[0] must be a path or a mapping with kind",
        ),
        (
            {"app": {"linux": _app(location=[{"kind": "app_bundle", "name": "Blender.app"}])}},
            "only valid under app.darwin",
        ),
        (
            {"app": {"darwin": {"presence": "executable", "location": [{"kind": "app_bundle", "name": "B.app"}]}}},
            "needs app.darwin.presence bundle",
        ),
        (
            {"app": {"linux": _app(location=[{"kind": "command", "name": "bin/blender"}])}},
            "location[0].name must be a bare name",
        ),
        (
            {
                "app": {
                    "win32": _app(
                        location=[{"kind": "uninstall_registry", "display_name_prefix": "B", "file": "../x.exe"}]
                    )
                }
            },
            "file must be a relative path",
        ),
        ({"app": {"linux": _app(version={"kind": "plist"})}}, "version.kind 'plist' is only valid under app.darwin"),
        ({"app": {"linux": _app(version={"kind": "rpm"})}}, "version.kind must be one of"),
        (
            {"app": {"win32": _app(location="C:/B/blender.exe", version={"kind": "uninstall_registry"})}},
            "display_name_prefix is required",
        ),
        ({"app": {"linux": _app()}, "requires": {"app": "yes"}}, "requires.app must be a boolean"),
        ({"requires": {"app": True}}, "requires.app is true but the declaration has no 'app' block"),
        ({"app": {"linux": _app()}, "requires": {"app": True, "gpu": "x"}}, "requires has unknown keys ['gpu']"),
        ({"app": {"linux": _app()}, "requires": {"app": True, "min_version": "5.x"}}, "dotted numeric string"),
        ({"app": {"linux": _app()}, "requires": {"min_version": "5.1"}}, "min_version needs requires.app: true"),
        (
            {"app": {"linux": _app()}, "requires": {"app": True, "min_version": "5.1"}},
            "needs a version source under app.linux",
        ),
        (
            {
                "app": {"darwin": {"presence": "bundle", "location": "/A.app"}, "linux": _app()},
                "requires": {"app": True, "min_version": "5.1"},
            },
            "needs a version source under app.darwin",
        ),
        ({"app": {"linux": _app()}, "liveness": "server.json"}, "liveness must be an object"),
    ],
)
def test_invalid_blocks_name_the_rule(raw: Any, rule: str) -> None:
    with pytest.raises(ContractError) as caught:
        parse_server_declaration("blender", raw)
    assert rule in str(caught.value)
    assert "plugin.json extension server 'blender'" in str(caught.value)


def test_min_version_lets_a_linux_block_go_without_a_version_source() -> None:
    declaration = parse_server_declaration(
        "b",
        {
            "app": {"linux": _app(), "win32": _app(location="C:/B/blender.exe", version={"kind": "pe_resource"})},
            "requires": {"app": True, "min_version": "5.1"},
        },
    )
    assert declaration.requires.min_version == "5.1"


def _set(path: str, value: Any):
    def mutate(plugin: dict[str, Any], mcp: dict[str, Any]) -> None:
        target: Any = {"plugin": plugin, "mcp": mcp}
        *parents, last = [int(k) if k.isdigit() else k for k in path.split("/")]
        for key in parents:
            target = target[key]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value

    return mutate


_DELETE = object()
_S = "plugin/extensions/com.nousresearch.hermes/servers"


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (_set("plugin/$schema", "https://example.com/schema.json"), "unsupported or missing Agent Plugins schema"),
        (_set("plugin/name", "Blender Bridge"), "name does not satisfy v1 constraints"),
        (_set("plugin/name", "blender--bridge"), "name does not satisfy v1 constraints"),
        (_set("plugin/version", 1), "version must be a string"),
        (_set("plugin/keywords", "blender"), "keywords must be an array of strings"),
        (_set("plugin/author", {"name": "x", "phone": "1"}), "author may contain only"),
        (_set("plugin/extensions/com.nousresearch.hermes", []), "namespace values must be objects"),
        (_set(f"{_S}", []), "servers must be an object"),
        (
            _set(f"{_S}/blender_ghost", {"requires": {"app": False}}),
            "server declaration 'blender_ghost' has no matching mcp.json server",
        ),
        (
            _set("mcp/mcpServers/blender", {"type": "sse", "url": "http://127.0.0.1:1/sse"}),
            "mcp.json server 'blender' dropped: unsupported server type 'sse'",
        ),
        (
            _set("mcp/mcpServers/blender", {"type": "streamable-http", "url": "http://192.168.1.2:9/mcp"}),
            "non-loopback url must use https",
        ),
        (
            _set("mcp/mcpServers/blender", {"type": "streamable-http", "url": "http://user@127.0.0.1:9/mcp"}),
            "must not contain user information",
        ),
        (_set("mcp/mcpServers/blender_lab/command", "/usr/bin/uv"), "command must be a bare executable"),
        (_set("mcp/mcpServers/blender_lab/env/PLUGIN_ROOT", "/x"), "reserved PLUGIN_ROOT"),
        (_set("mcp/mcpServers/blender_lab/timeout", 5), "unknown stdio field"),
        (_set("mcp/$schema", "https://example.com/mcp.json"), "unsupported Agent Plugins MCP schema"),
        (_set("mcp/extra", {}), "exactly $schema and mcpServers"),
        (_set(f"{_S}/blender/app/linux/location/0/kind", "apt"), "location[0] must be a path or a mapping with kind"),
        (_set(f"{_S}/blender/requires/min_version", "five"), "dotted numeric string"),
        (_set(f"{_S}/blender/liveness/kind", "pidfile"), "unknown liveness kind"),
        (_set(f"{_S}/blender/liveness/path", "AppData/server.json"), "is not rooted"),
        (_set(f"{_S}/blender/liveness/endpoint_path", "/mcp"), "unknown fields ['endpoint_path']"),
        (_set(f"{_S}/blender/liveness/fields", {"url": "http address"}), "simple keys"),
    ],
)
def test_breaking_any_single_rule_in_a_copy_fails_with_that_rule(plugin_copy, mutate, rule: str) -> None:
    with pytest.raises(ContractError) as caught:
        validate(plugin_copy(mutate), LINUX)
    assert rule in str(caught.value)


def test_validate_command_exits_non_zero_and_names_the_rule(plugin_copy) -> None:
    broken = plugin_copy(_set(f"{_S}/blender/requires/app", "true"))
    run = subprocess.run(
        [sys.executable, "-m", "hermes_blender.cli", "validate", str(broken)], capture_output=True, text=True
    )
    assert run.returncode == 2
    assert "requires.app must be a boolean" in run.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "hermes_blender.cli", "validate", "--json"], capture_output=True, text=True
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["valid"] is True


def test_validate_says_when_hermes_install_gate_will_refuse_this_machine(tmp_path: Path) -> None:
    nowhere = HostFacts(os="linux", env={"HOME": str(tmp_path), "PATH": ""}, system_root=tmp_path)
    report = validation_report(validate(PLUGIN_ROOT, nowhere), nowhere)
    assert report["valid"] is True and report["install_gate"] == [
        f"Plugin 'blender-bridge' server '{name}' is unavailable: missing_app." for name in ("blender", "blender_lab")
    ]
    assert "install gate on this machine: Hermes will refuse it" in render_validation(report)


def test_orphan_declaration_disables_the_whole_package(plugin_copy) -> None:
    root = plugin_copy(_set("mcp/mcpServers/blender_lab", _DELETE))
    with pytest.raises(ContractError, match="'blender_lab' has no matching mcp.json server"):
        load_plugin(root)


def test_older_hardened_hermes_incompatibilities_are_warnings_not_errors() -> None:
    package = load_plugin(PLUGIN_ROOT)
    assert any("older hardened line refuses" in w and "app.win32.location is a list" in w for w in package.warnings)
    assert any("min_version with no version source under app.linux" in w for w in package.warnings)


def test_unknown_top_level_fields_are_dropped_with_a_diagnostic(plugin_copy) -> None:
    package = load_plugin(plugin_copy(_set("plugin/nickname", "bb")))
    assert package.diagnostics == ("plugin.json: ignored unknown top-level field: nickname",)
    with pytest.raises(ContractError, match="nickname"):
        validate(package.root, LINUX)


def test_declared_path_is_rooted_on_every_os() -> None:
    for host_os in ("win32", "darwin", "linux"):
        assert (
            liveness.parse_liveness({"kind": "server_json", "path": liveness.DECLARED_PATH}, host_os).spec is not None
        )
    assert Path(liveness.DECLARED_PATH).parts[0] == "~"
