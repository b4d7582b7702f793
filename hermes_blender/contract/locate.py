"""Where the application is on this host, and which version each copy reports (host I/O)."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .declaration import AppBlock, AppLocation
from .host import HostFacts, is_absolute_text

_DIGITS = re.compile(r"(\d+)")
_BLENDER_VERSION = re.compile(r"Blender (\d+\.\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class AppCopy:
    path: Path
    version: str | None
    """None when the block has no version source or the source could not be read."""


def locate_app(block: AppBlock, host: HostFacts) -> list[AppCopy]:
    """Every present copy, in declared location order (a `*` pattern newest first)."""
    copies: list[AppCopy] = []
    seen: set[Path] = set()
    for location in block.locations:
        for path in _candidates(location, host):
            if path in seen or not _present(path, block.presence):
                continue
            seen.add(path)
            copies.append(AppCopy(path, _version(block, path, host)))
    return copies


def where_searched(block: AppBlock, host: HostFacts) -> list[str]:
    """What a person should know was looked at when nothing was found."""
    described: list[str] = []
    for location in block.locations:
        if location.kind == "path":
            described.append(host.expand(location.value))
        elif location.kind == "command":
            described.append(f"'{location.value}' on PATH")
        else:
            described.append(f"{location.kind} {location.value}")
    return described


def _candidates(location: AppLocation, host: HostFacts) -> Iterator[Path]:
    home = Path(host.home() or "~")
    if location.kind == "path":
        expanded = host.expand(location.value)
        if "%" in expanded or "$" in expanded or not is_absolute_text(expanded):
            return  # unexpanded or relative: missing, even if such a path exists in the CWD
        if "*" in expanded:
            yield from (Path(match) for match in sorted(glob.glob(expanded), key=_natural, reverse=True))
        else:
            yield Path(expanded)
    elif location.kind == "command":
        found = shutil.which(location.value, path=host.env.get("PATH", ""))
        if found:
            yield Path(found)
    elif location.kind == "uninstall_registry":
        for entry in host.uninstall_entries():
            folder = entry.install_location or ""
            if entry.display_name.startswith(location.value) and folder and not folder.startswith("\\\\"):
                yield Path(folder) / location.file
    elif location.kind == "app_bundle":
        yield host.system_root / "Applications" / location.value
        yield home / "Applications" / location.value
    elif location.kind == "flatpak":
        yield host.system_root / "var/lib/flatpak/exports/bin" / location.value
        yield home / ".local/share/flatpak/exports/bin" / location.value
    elif location.kind == "snap":
        yield host.system_root / "snap/bin" / location.value


def _present(path: Path, presence: str) -> bool:
    if presence == "bundle":
        return path.is_dir() and (path / "Contents" / "Info.plist").is_file()
    return path.is_file()


def _version(block: AppBlock, path: Path, host: HostFacts) -> str | None:
    try:
        if block.version_kind == "plist":
            info = host.read_plist(path / "Contents" / "Info.plist")
            value = info.get("CFBundleShortVersionString") or info.get("CFBundleVersion")
            return str(value) if value else None
        if block.version_kind == "pe_resource":
            return host.read_pe_version(path)
        if block.version_kind == "uninstall_registry":
            for entry in host.uninstall_entries():
                if entry.display_name.startswith(block.version_arg):
                    return entry.display_version
    except (OSError, ValueError):
        return None
    return None


def _natural(text: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in _DIGITS.split(text)]


def blender_cli_version(path: Path, timeout: float = 20.0) -> str | None:
    """`blender --version` as information where no declared version source exists (Linux)."""
    try:
        run = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = _BLENDER_VERSION.search(run.stdout)
    return match.group(1) if match else None
