"""The servers block of plugin.json, as data.

Strict models of `extensions."com.nousresearch.hermes".servers.<name>` following the Hermes
line that reads location lists. Every error names the rule it broke, in Hermes's words, so a
failing `hermes-blender validate` reads like the refusal Hermes itself would give. The models
are frozen dataclasses built by small parse functions, as Hermes's own `hermes_platform` does:
the rules are Hermes's, so no schema library's messages stand between them and the user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, cast

from ..errors import ContractError

OsKey = Literal["win32", "darwin", "linux"]
OS_KEYS: tuple[OsKey, ...] = ("win32", "darwin", "linux")
PRESENCES = ("executable", "bundle")
VERSION_KINDS: dict[str, OsKey | None] = {
    "pe_resource": "win32",
    "uninstall_registry": "win32",
    "plist": "darwin",
    "none": None,
}
# location kind -> (only valid under this OS, the key naming what to find, the presence it yields)
LOCATION_KINDS: dict[str, tuple[OsKey | None, str, str]] = {
    "command": (None, "name", "executable"),
    "uninstall_registry": ("win32", "display_name_prefix", "executable"),
    "app_bundle": ("darwin", "name", "bundle"),
    "flatpak": ("linux", "app_id", "executable"),
    "snap": ("linux", "name", "executable"),
}
_VERSION = re.compile(r"\d+(\.\d+)*")
_WINDOWS_ROOT = re.compile(r"[A-Za-z]:[\\/]")


Presence = Literal["executable", "bundle"]


@dataclass(frozen=True)
class AppLocation:
    """One place to look: a path (`*` matches a versioned folder part) or a location kind."""

    kind: str
    value: str
    file: str = ""


@dataclass(frozen=True)
class AppBlock:
    """Where the application lives on one OS, and how to read its version."""

    os: OsKey
    presence: Presence
    locations: tuple[AppLocation, ...]
    version_kind: str = "none"
    version_arg: str = ""


@dataclass(frozen=True)
class Requires:
    """Policy: whether the app must be present, and how new. Kept apart from `app` on purpose."""

    app: bool = False
    min_version: str | None = None


@dataclass(frozen=True)
class ServerDeclaration:
    name: str
    app: dict[OsKey, AppBlock] | None = None
    requires: Requires = Requires()
    liveness: dict[str, Any] | None = None
    """Kept raw, as Hermes does at load time; parsed at use (see liveness.parse_liveness)."""

    def app_for(self, os_key: str) -> AppBlock | None:
        return self.app.get(os_key) if self.app else None  # type: ignore[call-overload]


def parse_server_declaration(name: str, raw: Any) -> ServerDeclaration:
    """Parse one server's declaration; ContractError names the broken rule."""
    where = f"plugin.json extension server {name!r}"
    try:
        if not isinstance(raw, dict):
            raise ValueError(f"server declaration '{name}' must be an object")
        if "liveness" in raw and "app" not in raw and "requires" not in raw:
            raise ValueError(f"server declaration '{name}' has liveness without app or requires")
        unknown = set(raw) - {"app", "requires", "liveness"}
        if unknown:
            raise ValueError(f"server declaration '{name}' has unknown keys {sorted(unknown)}")
        liveness = raw.get("liveness")
        if liveness is not None and not isinstance(liveness, dict):
            raise ValueError(f"server declaration '{name}' liveness must be an object")
        app = _app(raw.get("app"))
        requires = _requires(raw.get("requires"), app)
        return ServerDeclaration(name=name, app=app, requires=requires, liveness=liveness)
    except ValueError as exc:
        raise ContractError(f"{where}: {exc}") from None


def _app(raw: Any) -> dict[OsKey, AppBlock] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("'app' must be a mapping")
    unknown = set(raw) - set(OS_KEYS)
    if unknown:
        raise ValueError(f"app has unknown OS keys {sorted(unknown)}; use {OS_KEYS}")
    if not raw:
        raise ValueError("app needs at least one OS block")
    return {cast(OsKey, osf): _app_block(cast(OsKey, osf), block) for osf, block in raw.items()}


def _app_block(osf: OsKey, block: Any) -> AppBlock:
    if not isinstance(block, dict):
        raise ValueError(f"'app.{osf}' must be a mapping")
    presence = block.get("presence")
    if presence not in PRESENCES:
        raise ValueError(f"app.{osf}.presence must be one of {PRESENCES}")
    location = block.get("location")
    if isinstance(location, str):
        locations = [_location(osf, presence, f"app.{osf}.location", location)]
    elif isinstance(location, list) and location:
        locations = [_location(osf, presence, f"app.{osf}.location[{i}]", item) for i, item in enumerate(location)]
    else:
        raise ValueError(f"app.{osf}.location is required")
    version = block.get("version") or {"kind": "none"}
    if not isinstance(version, dict):
        raise ValueError(f"'app.{osf}.version' must be a mapping")
    kind = version.get("kind", "none")
    if kind not in VERSION_KINDS:
        raise ValueError(f"app.{osf}.version.kind must be one of {sorted(VERSION_KINDS)}")
    only_on = VERSION_KINDS[kind]
    if only_on and only_on != osf:
        raise ValueError(f"app.{osf}.version.kind {kind!r} is only valid under app.{only_on}")
    prefix = str(version.get("display_name_prefix") or "")
    if kind == "uninstall_registry" and not prefix:
        raise ValueError(f"app.{osf}.version.display_name_prefix is required for uninstall_registry")
    return AppBlock(osf, cast(Presence, presence), tuple(locations), kind, prefix)


def _requires(raw: Any, app: dict[OsKey, AppBlock] | None) -> Requires:
    if raw is None:
        return Requires()
    if not isinstance(raw, dict):
        raise ValueError("'requires' must be a mapping")
    unknown = set(raw) - {"app", "min_version"}
    if unknown:
        raise ValueError(f"requires has unknown keys {sorted(unknown)}")
    needs_app = raw.get("app", False)
    if not isinstance(needs_app, bool):
        raise ValueError("requires.app must be a boolean")
    if needs_app and app is None:
        raise ValueError("requires.app is true but the declaration has no 'app' block")
    min_version = raw.get("min_version")
    if min_version is not None:
        if not isinstance(min_version, str) or not _VERSION.fullmatch(min_version):
            raise ValueError("requires.min_version must be a dotted numeric string")
        if not needs_app:
            raise ValueError("requires.min_version needs requires.app: true")
        assert app is not None
        # A Linux block has no version source, so it is gated on presence only, unless it is the only block.
        unversioned = [
            osf for osf in sorted(app) if app[osf].version_kind == "none" and (osf != "linux" or len(app) == 1)
        ]
        if unversioned:
            raise ValueError(f"requires.min_version needs a version source under app.{unversioned[0]} (kind is none)")
    return Requires(app=needs_app, min_version=min_version)


def _location(osf: str, presence: str, label: str, raw: Any) -> AppLocation:
    if isinstance(raw, str):
        path = raw.strip()
        if not path:
            raise ValueError(f"{label} is required")
        if not location_is_rooted(path, osf) or "**" in path:
            raise ValueError(
                f"{label} must be absolute or start with ~ / %VAR% / $VAR, without '..', '**' or a URL scheme"
            )
        return AppLocation(kind="path", value=path)
    if not isinstance(raw, dict) or raw.get("kind") not in LOCATION_KINDS:
        raise ValueError(f"{label} must be a path or a mapping with kind one of {sorted(LOCATION_KINDS)}")
    kind = raw["kind"]
    only_on, key, yields = LOCATION_KINDS[kind]
    if only_on and only_on != osf:
        raise ValueError(f"{label} kind {kind!r} is only valid under app.{only_on}")
    if yields != presence:
        raise ValueError(f"{label} kind {kind!r} needs app.{osf}.presence {yields}")
    value = raw.get(key)
    if not _relative_name(value, allow_dirs=False):
        raise ValueError(f"{label}.{key} must be a bare name")
    file = raw.get("file", "")
    if kind == "uninstall_registry" and not _relative_name(file, allow_dirs=True):
        raise ValueError(f"{label}.file must be a relative path inside the install folder")
    return AppLocation(kind=kind, value=str(value).strip(), file=str(file).strip())


def location_is_rooted(location: str, osf: str) -> bool:
    """Absolute for the declared OS, or starting with ~, %VAR% or $VAR; never '..' or a URL."""
    if ".." in location.replace("\\", "/").split("/") or "://" in location:
        return False
    if location.startswith(("~", "%", "$")):
        return True
    if osf == "win32":
        return bool(_WINDOWS_ROOT.match(location))
    return location.startswith("/")


def _relative_name(value: Any, *, allow_dirs: bool) -> bool:
    if not isinstance(value, str) or not value.strip() or "://" in value:
        return False
    parts = value.replace("\\", "/").split("/")
    return ".." not in parts and "" not in parts and (allow_dirs or len(parts) == 1) and ":" not in parts[0]
