"""Locating the app and gating on its version, on hosts stated by the test."""

from __future__ import annotations

import os
import plistlib
import stat
import struct
from pathlib import Path
from typing import Any

import pytest

from hermes_blender.contract.declaration import parse_server_declaration
from hermes_blender.contract.host import HostFacts, RegistryEntry, read_pe_version
from hermes_blender.contract.locate import locate_app
from hermes_blender.contract.requirements import availability, version_at_least
from tests.conftest import PLUGIN_ROOT


def _blender_declaration() -> Any:
    import json

    raw = json.loads((PLUGIN_ROOT / "plugin.json").read_text())["extensions"]["com.nousresearch.hermes"]["servers"][
        "blender"
    ]
    return parse_server_declaration("blender", raw)


def _check(declaration: Any, host: HostFacts):
    return availability(declaration, host.os, lambda block: locate_app(block, host))


def _executable(path: Path, text: str = "#!/bin/sh\necho 'Blender 5.1.2'\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _pe(path: Path, version: tuple[int, int, int, int]) -> Path:
    """A file holding a VS_FIXEDFILEINFO block, as a Windows executable's version resource does."""
    a, b, c, d = version
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        b"MZ" + b"\0" * 64 + struct.pack("<IIII", 0xFEEF04BD, 0x10000, (a << 16) | b, (c << 16) | d) + b"\0" * 16
    )
    return path


def _bundle(home: Path, version: str | None) -> Path:
    bundle = home / "Applications" / "Blender.app"
    (bundle / "Contents").mkdir(parents=True)
    info = {"CFBundleShortVersionString": version} if version else {"CFBundleName": "Blender"}
    (bundle / "Contents" / "Info.plist").write_bytes(plistlib.dumps(info))
    return bundle


def test_availability_with_no_requirements_does_no_io() -> None:
    declaration = parse_server_declaration("x", {"app": {"linux": {"presence": "executable", "location": "/x"}}})

    def forbidden(block: Any) -> list[Any]:
        raise AssertionError("no I/O expected")

    assert availability(declaration, "linux", forbidden).state == "no_requirements"


def test_availability_is_unsupported_os_when_no_block_covers_the_host() -> None:
    declaration = parse_server_declaration(
        "x", {"app": {"linux": {"presence": "executable", "location": "/x"}}, "requires": {"app": True}}
    )
    assert availability(declaration, "darwin", lambda block: []).state == "unsupported_os"


def test_availability_is_a_state_not_a_boolean() -> None:
    found = availability(_blender_declaration(), "linux", lambda block: [])
    assert found.state == "missing_app" and not isinstance(found, bool) and found.offerable is False


def test_macos_missing_then_present_then_version_gated(tmp_path: Path) -> None:
    host = HostFacts(os="darwin", env={"HOME": str(tmp_path)}, system_root=tmp_path)
    declaration = _blender_declaration()
    assert _check(declaration, host).state == "missing_app"
    bundle = _bundle(tmp_path, "4.4.3")
    old = _check(declaration, host)
    assert (old.state, old.version, old.min_version) == ("version_too_old", "4.4.3", "4.5")
    (bundle / "Contents" / "Info.plist").write_bytes(plistlib.dumps({"CFBundleShortVersionString": "5.1.2"}))
    assert _check(declaration, host).state == "available"
    (bundle / "Contents" / "Info.plist").write_bytes(b"not a plist")
    assert _check(declaration, host).state == "version_too_old"  # unreadable version fails closed


def test_system_wide_folders_come_from_the_stated_host_root_never_the_real_machine(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "root"
    mac = HostFacts(os="darwin", env={"HOME": str(home)}, system_root=root)
    assert _check(_blender_declaration(), mac).state == "missing_app"
    _bundle(root, "5.1.2")  # root/Applications/Blender.app
    assert _check(_blender_declaration(), mac).path == root / "Applications" / "Blender.app"
    linux = HostFacts(os="linux", env={"HOME": str(home), "PATH": ""}, system_root=root)
    snap = root / "snap" / "bin" / "blender"
    snap.parent.mkdir(parents=True)
    snap.write_text("#!/bin/sh\n")
    snap.chmod(0o755)
    assert _check(_blender_declaration(), linux).path == snap


def test_windows_registry_location_and_pe_version(tmp_path: Path) -> None:
    install = tmp_path / "Blender Foundation" / "Blender 5.1"
    _pe(install / "blender.exe", (5, 1, 2, 0))
    entries = [RegistryEntry("Blender 5.1", "5.1.2", str(install)), RegistryEntry("Unrelated", "1", str(tmp_path))]
    host = HostFacts(os="win32", env={"USERPROFILE": str(tmp_path)}, uninstall_entries=lambda: entries)
    found = _check(_blender_declaration(), host)
    assert (found.state, found.path, found.version) == ("available", install / "blender.exe", "5.1.2.0")


def test_a_newer_copy_found_after_an_old_one_satisfies_min_version(tmp_path: Path) -> None:
    program_files = tmp_path / "Program Files"
    _pe(program_files / "Blender Foundation" / "Blender 4.5" / "blender.exe", (4, 5, 0, 0))
    _pe(program_files / "Blender Foundation" / "Blender 5.10" / "blender.exe", (5, 10, 0, 0))
    _pe(program_files / "Blender Foundation" / "Blender 5.9" / "blender.exe", (5, 9, 0, 0))
    old_registry = [RegistryEntry("Blender", "4.2.0", str(tmp_path / "old"))]
    _pe(tmp_path / "old" / "blender.exe", (4, 2, 0, 0))
    host = HostFacts(os="win32", env={"ProgramFiles": str(program_files)}, uninstall_entries=lambda: old_registry)
    block = _blender_declaration().app_for("win32")
    copies = locate_app(block, host)
    assert [c.version for c in copies] == [
        "4.2.0.0",
        "5.10.0.0",
        "5.9.0.0",
        "4.5.0.0",
    ]  # registry first, then * newest first
    assert _check(_blender_declaration(), host).version == "5.10.0.0"


def test_only_old_copies_report_the_highest_readable_version(tmp_path: Path) -> None:
    program_files = tmp_path / "PF"
    for version in ((4, 2, 0, 0), (4, 4, 1, 0)):
        _pe(program_files / "Blender Foundation" / f"Blender {version[0]}.{version[1]}" / "blender.exe", version)
    host = HostFacts(os="win32", env={"ProgramFiles": str(program_files)}, uninstall_entries=lambda: [])
    found = _check(_blender_declaration(), host)
    assert (found.state, found.version) == ("version_too_old", "4.4.1.0")


def test_unexpanded_windows_variables_are_missing_on_posix_even_when_the_cwd_holds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _executable(tmp_path / "%ProgramFiles%" / "Blender Foundation" / "Blender 5.1" / "blender.exe")
    declaration = parse_server_declaration(
        "x",
        {
            "app": {
                "linux": {
                    "presence": "executable",
                    "location": "%ProgramFiles%/Blender Foundation/Blender */blender.exe",
                }
            },
            "requires": {"app": True},
        },
    )
    assert (
        _check(declaration, HostFacts(os="linux", env={"HOME": str(tmp_path)}, system_root=tmp_path)).state
        == "missing_app"
    )


def test_linux_finds_the_command_on_path_then_flatpak_and_snap(tmp_path: Path) -> None:
    blender = _executable(tmp_path / "bin" / "blender")
    host = HostFacts(os="linux", env={"HOME": str(tmp_path), "PATH": str(tmp_path / "bin")}, system_root=tmp_path)
    found = _check(_blender_declaration(), host)
    assert (found.state, found.path, found.version) == ("available", blender, None)  # no version source on Linux
    flatpak = _executable(tmp_path / ".local/share/flatpak/exports/bin/org.blender.Blender")
    host_without_path = HostFacts(os="linux", env={"HOME": str(tmp_path), "PATH": ""}, system_root=tmp_path)
    assert _check(_blender_declaration(), host_without_path).path == flatpak


def test_a_directory_is_not_an_executable_and_a_bundle_needs_its_info_plist(tmp_path: Path) -> None:
    (tmp_path / "bin" / "blender").mkdir(parents=True)
    host = HostFacts(os="linux", env={"HOME": str(tmp_path), "PATH": str(tmp_path / "bin")}, system_root=tmp_path)
    assert _check(_blender_declaration(), host).state == "missing_app"
    (tmp_path / "Applications" / "Blender.app").mkdir(parents=True)
    assert (
        _check(_blender_declaration(), HostFacts(os="darwin", env={"HOME": str(tmp_path)}, system_root=tmp_path)).state
        == "missing_app"
    )


@pytest.mark.parametrize(
    ("found", "minimum", "expected"),
    [
        ("5.1", "5.1", True),
        ("5.1.2", "5.1", True),
        ("5.10", "5.9", True),
        ("5.0.99", "5.1", False),
        ("6", "5.1", True),
        ("5", "5.1", False),
        (None, "5.1", False),
        ("5.1-beta", "5.1", False),
        ("5.1.", "5.1", False),
        ("1234567890.1", "5.1", False),
        ("٥.١", "5.1", False),
        ("", "5.1", False),
    ],
)
def test_version_comparison_accepts_only_bounded_ascii_components(
    found: str | None, minimum: str, expected: bool
) -> None:
    assert version_at_least(found, minimum) is expected


def test_pe_version_reader_fails_soft(tmp_path: Path) -> None:
    assert read_pe_version(tmp_path / "absent.exe") is None
    (tmp_path / "plain.exe").write_bytes(b"MZ no version here")
    assert read_pe_version(tmp_path / "plain.exe") is None
    assert read_pe_version(_pe(tmp_path / "b.exe", (5, 1, 0, 7))) == "5.1.0.7"


def test_home_and_variable_expansion_follow_the_host_os(tmp_path: Path) -> None:
    windows = HostFacts(os="win32", env={"USERPROFILE": "C:\\Users\\ana", "HOME": "/ignored"})
    assert windows.expand("~/AppData/Local/Blender/server.json") == "C:\\Users\\ana/AppData/Local/Blender/server.json"
    assert HostFacts(os="darwin", env={"HOME": "/Users/ana"}).expand("~") == "/Users/ana"
    # No HOME (a bare launcher): the account's home, as Python's expanduser; with none either, left as written.
    assert (
        os.fspath(HostFacts(os="linux", env={}, account_home=lambda: "/home/ana").expand_path("~/x")) == "/home/ana/x"
    )
    assert os.fspath(HostFacts(os="linux", env={}, account_home=lambda: None).expand_path("~/x")) == "~/x"
