"""One state, one sentence, one action and a retry policy per server; and the install gate."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any, get_args

import pytest

from hermes_blender.contract.declaration import parse_server_declaration
from hermes_blender.contract.gate import install_refusals
from hermes_blender.contract.host import HostFacts, linux_interactive_session
from hermes_blender.contract.liveness import LiveEndpoint
from hermes_blender.contract.package import load_plugin
from hermes_blender.contract.status import State, compose, describe
from hermes_blender.errors import ToolCallFailed
from tests.conftest import PLUGIN_ROOT

TOKEN = "status-test-token-1234567890"


def _declaration(liveness: dict[str, Any] | None = None) -> Any:
    raw = json.loads((PLUGIN_ROOT / "plugin.json").read_text())["extensions"]["com.nousresearch.hermes"]["servers"][
        "blender"
    ]
    if liveness is not None:
        raw = {**raw, "liveness": liveness}
    return parse_server_declaration("blender", raw)


def _linux_host(tmp_path: Path, *, alive: bool = True, interactive: bool = True) -> HostFacts:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    blender = bin_dir / "blender"
    blender.write_text("#!/bin/sh\necho 'Blender 5.1.2'\n")
    blender.chmod(blender.stat().st_mode | stat.S_IXUSR)
    return HostFacts(
        os="linux",
        env={"HOME": str(tmp_path), "PATH": str(bin_dir)},
        pid_alive=lambda pid: alive,
        interactive_session=lambda: interactive,
        system_root=tmp_path,
    )


def _runtime_file(tmp_path: Path, record: dict[str, Any]) -> None:
    path = tmp_path / "AppData" / "Local" / "Blender" / "server.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


GOOD = {"http": "http://127.0.0.1:45678", "token": TOKEN, "pid": 4242}


@pytest.mark.parametrize("state", [state for state in get_args(State) if state != "ready"])
def test_each_state_has_one_sentence_and_one_action(state: str) -> None:
    reason, action, retry = describe(state, "blender")  # type: ignore[arg-type]
    assert reason.startswith("blender") and reason.endswith(".") and reason.count(".") == 1
    assert action.endswith(", then try again.") and action.count(".") == 1
    assert retry == ("never_here" if state == "no_interactive_session" else "after_user_action")


def test_version_too_old_names_found_and_required_versions(tmp_path: Path) -> None:
    import plistlib

    bundle = tmp_path / "Applications" / "Blender.app" / "Contents"
    bundle.mkdir(parents=True)
    (bundle / "Info.plist").write_bytes(plistlib.dumps({"CFBundleShortVersionString": "4.4.0"}))
    status = compose(
        "blender", _declaration(), HostFacts(os="darwin", env={"HOME": str(tmp_path)}, system_root=tmp_path)
    )
    assert status.state == "version_too_old" and status.retry == "after_user_action"
    assert (
        status.sentence
        == "blender version 4.4.0 is too old; version 4.5 or newer is required. Update blender, then try again."
    )


def test_missing_app_says_where_it_looked(tmp_path: Path) -> None:
    status = compose(
        "blender", _declaration(), HostFacts(os="linux", env={"HOME": str(tmp_path), "PATH": ""}, system_root=tmp_path)
    )
    assert status.state == "missing_app"
    assert "'blender' on PATH" in status.checks[0].detail and "flatpak org.blender.Blender" in status.checks[0].detail


def test_dead_pid_is_app_not_running_and_never_connects(tmp_path: Path) -> None:
    _runtime_file(tmp_path, GOOD)
    status = compose("blender", _declaration(), _linux_host(tmp_path, alive=False), connect=_never)
    assert status.state == "app_not_running" and status.user_action == "Start blender, then try again."


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:45678",
        "http://user:pw@127.0.0.1:45678",
        "http://10.0.0.5:45678",
        "http://127.0.0.1",
        "http://127.0.0.1:99999",
        "http://[::1:45678",
    ],
)
def test_hostile_endpoints_are_endpoint_unavailable_and_never_contacted(tmp_path: Path, url: str) -> None:
    _runtime_file(tmp_path, {**GOOD, "http": url})
    status = compose("blender", _declaration(), _linux_host(tmp_path), connect=_never)
    assert status.state == "endpoint_unavailable"
    assert status.user_action == "Open blender and enable its local connection, then try again."


def test_missing_runtime_file_is_app_not_running_as_in_hermes(tmp_path: Path) -> None:
    status = compose("blender", _declaration(), _linux_host(tmp_path), connect=_never)
    assert status.state == "app_not_running" and "no runtime file" in status.checks[-1].detail
    assert status.user_action == "Start blender, then try again."


def test_running_app_with_live_endpoint_and_no_connection_attempt_is_hermes_not_connected(tmp_path: Path) -> None:
    _runtime_file(tmp_path, GOOD)
    status = compose("blender", _declaration(), _linux_host(tmp_path))
    assert status.state == "hermes_not_connected"
    assert status.user_action == "Reconnect blender in Hermes, then try again."


def test_a_successful_round_trip_is_ready_and_a_failed_one_names_the_endpoint(tmp_path: Path) -> None:
    _runtime_file(tmp_path, GOOD)
    seen: list[str] = []
    ready = compose(
        "blender", _declaration(), _linux_host(tmp_path), connect=lambda endpoint: seen.append(endpoint.url)
    )
    assert ready.state == "ready" and ready.ready and seen == ["http://127.0.0.1:45678/mcp"]
    assert ready.payload()["error"] is None and ready.retry == "none"

    def refused(endpoint: LiveEndpoint) -> None:
        raise ToolCallFailed("Blender refused the token (HTTP 401)")

    failed = compose("blender", _declaration(), _linux_host(tmp_path), connect=refused)
    assert failed.state == "endpoint_unavailable" and "401" in failed.checks[-1].detail


def test_interactive_session_liveness_on_a_service_host_is_never_here(tmp_path: Path) -> None:
    status = compose("blender", _declaration({"kind": "interactive_session"}), _linux_host(tmp_path, interactive=False))
    assert status.state == "no_interactive_session" and status.retry == "never_here"


def test_invalid_liveness_degrades_to_static_with_a_warning(tmp_path: Path) -> None:
    status = compose("blender", _declaration({"kind": "pidfile"}), _linux_host(tmp_path), connect=_never)
    assert status.state == "hermes_not_connected"
    assert any("treats it as static" in warning for warning in status.warnings)


def test_title_is_preferred_over_the_server_slug(tmp_path: Path) -> None:
    status = compose(
        "blender_lab",
        _declaration(),
        HostFacts(os="linux", env={"PATH": ""}, system_root=Path("/nonexistent")),
        title="Blender",
    )
    assert status.sentence == "Blender is not installed. Install Blender, then try again."
    assert status.payload()["app"]["name"] == "blender_lab"


def test_token_never_appears_in_any_status_output(tmp_path: Path) -> None:
    _runtime_file(tmp_path, GOOD)
    for connect in (None, lambda endpoint: None):
        status = compose("blender", _declaration(), _linux_host(tmp_path), connect=connect)
        assert TOKEN not in json.dumps(status.payload()) + repr(status)


def test_install_gate_accepts_a_present_app_and_refuses_a_missing_or_old_one(tmp_path: Path) -> None:
    package = load_plugin(PLUGIN_ROOT)
    assert install_refusals(package, _linux_host(tmp_path)) == []
    missing = install_refusals(
        package, HostFacts(os="linux", env={"HOME": str(tmp_path), "PATH": ""}, system_root=tmp_path)
    )
    assert missing == [
        f"Plugin 'blender-bridge' server '{s}' is unavailable: missing_app." for s in ("blender", "blender_lab")
    ]
    import plistlib

    contents = tmp_path / "Applications" / "Blender.app" / "Contents"
    contents.mkdir(parents=True)
    plist = contents / "Info.plist"
    mac = HostFacts(os="darwin", env={"HOME": str(tmp_path)}, system_root=tmp_path)
    plist.write_bytes(plistlib.dumps({"CFBundleShortVersionString": "4.4.2"}))
    assert install_refusals(package, mac) == [
        f"Plugin 'blender-bridge' server '{s}' is unavailable: version_too_old, found version 4.4.2."
        for s in ("blender", "blender_lab")
    ]
    # 4.5 LTS serves `blender`, but Hermes gates every server: blender_lab's 5.1 refuses the whole install.
    plist.write_bytes(plistlib.dumps({"CFBundleShortVersionString": "4.5.2"}))
    assert install_refusals(package, mac) == [
        "Plugin 'blender-bridge' server 'blender_lab' is unavailable: version_too_old, found version 4.5.2."
    ]


def _never(endpoint: LiveEndpoint) -> None:
    raise AssertionError(f"must not connect to {endpoint.url}")


@pytest.mark.parametrize(
    ("session_id", "run_user", "interactive"),
    [("3", True, True), ("4294967295", True, False), ("", True, False), ("3", False, False), (None, True, False)],
)
def test_linux_interactive_session_needs_a_login_session_and_a_run_user_folder(
    tmp_path: Path, session_id: str | None, run_user: bool, interactive: bool
) -> None:
    if session_id is not None:
        (tmp_path / "proc/self").mkdir(parents=True)
        (tmp_path / "proc/self/sessionid").write_text(session_id)
    if run_user:
        (tmp_path / "run/user/1000").mkdir(parents=True)
    assert linux_interactive_session(tmp_path, 1000) is interactive
