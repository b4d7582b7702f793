"""Load a portable plugin directory under the rules Hermes applies at install and load time.

A fatal rule raises ContractError naming it; what Hermes only warns about (and drops) becomes
a diagnostic. Warnings add what would fail on Hermes's older hardened line.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from ..errors import ContractError
from .declaration import ServerDeclaration, parse_server_declaration
from .liveness import FIELD_DEFAULTS

PLUGIN_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
MCP_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"
HERMES_EXTENSION = "com.nousresearch.hermes"
_PLUGIN_FIELDS = {
    "$schema",
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "extensions",
}
_AUTHOR_FIELDS = {"name", "email", "url"}
_STDIO_FIELDS = {"type", "command", "args", "env", "cwd"}
_REMOTE_FIELDS = {"type", "url", "headers"}
_PLUGIN_NAME = re.compile(r"(?!.*(?:--|\.\.))[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?")
_SKILL_NAME = re.compile(r"(?!.*--)[a-z0-9]+(?:-[a-z0-9]+)*")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path


@dataclass(frozen=True)
class PluginPackage:
    name: str
    version: str
    root: Path
    mcp_servers: Mapping[str, dict[str, Any]]
    servers: Mapping[str, ServerDeclaration]
    skills: tuple[Skill, ...]
    diagnostics: tuple[str, ...]
    """What Hermes drops with a message (the package still loads)."""
    warnings: tuple[str, ...]
    """What older Hermes releases would refuse."""


def load_plugin(root: Path) -> PluginPackage:
    diagnostics: list[str] = []
    manifest = _manifest(root, diagnostics)
    mcp_servers = _mcp_servers(root, diagnostics)
    namespace = manifest.get("extensions", {}).get(HERMES_EXTENSION, {})
    raw_servers = namespace.get("servers", {})
    if not isinstance(raw_servers, dict):
        raise ContractError(f"extension '{HERMES_EXTENSION}'.servers must be an object")
    servers: dict[str, ServerDeclaration] = {}
    for name, raw in raw_servers.items():
        if name not in mcp_servers:
            cause = [d for d in diagnostics if d.startswith(f"mcp.json server '{name}' dropped")]
            because = f" ({cause[0]})" if cause else ""
            raise ContractError(f"server declaration '{name}' has no matching mcp.json server{because}")
        servers[name] = parse_server_declaration(name, raw)
    skills = _skills(root, diagnostics)
    return PluginPackage(
        name=manifest["name"],
        version=str(manifest.get("version", "")),
        root=root,
        mcp_servers=mcp_servers,
        servers=servers,
        skills=skills,
        diagnostics=tuple(diagnostics),
        warnings=tuple(_hardened_line_warnings(raw_servers)),
    )


def _read_object(path: Path, label: str) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeError, ValueError) as exc:
        raise ContractError(f"{label} is not valid readable JSON: {exc}") from None
    except RecursionError:
        raise ContractError(f"{label} is nested too deeply to be a plugin file") from None
    if not isinstance(value, dict):
        raise ContractError(f"{label} must contain a JSON object")
    return value


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve(strict=False).is_relative_to(root.resolve(strict=True))
    except (OSError, RuntimeError, ValueError):
        return False


def _manifest(root: Path, diagnostics: list[str]) -> dict[str, Any]:
    path = root / "plugin.json"
    if not _inside(path, root) or not path.is_file():
        raise ContractError("plugin.json must be a regular file within the plugin root")
    manifest = _read_object(path, "plugin.json")
    for unknown in sorted(set(manifest) - _PLUGIN_FIELDS):
        diagnostics.append(f"plugin.json: ignored unknown top-level field: {unknown}")
        manifest.pop(unknown)
    if manifest.get("$schema") != PLUGIN_SCHEMA:
        raise ContractError("plugin.json declares an unsupported or missing Agent Plugins schema")
    name = manifest.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= 64 or not _PLUGIN_NAME.fullmatch(name):
        raise ContractError("plugin.json name does not satisfy v1 constraints")
    for key in ("version", "description", "homepage", "repository", "license"):
        if key in manifest and not isinstance(manifest[key], str):
            raise ContractError(f"plugin.json {key} must be a string")
    keywords = manifest.get("keywords", [])
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        raise ContractError("plugin.json keywords must be an array of strings")
    author = manifest.get("author", {})
    if not isinstance(author, dict):
        raise ContractError("plugin.json author must be an object")
    if set(author) - _AUTHOR_FIELDS or not all(isinstance(v, str) for v in author.values()):
        raise ContractError("plugin.json author may contain only string name, email, and url fields")
    extensions = manifest.get("extensions", {})
    if not isinstance(extensions, dict):
        diagnostics.append("plugin.json: ignored non-object extensions field")
        manifest.pop("extensions")
    elif any(not isinstance(value, dict) for value in extensions.values()):
        raise ContractError("plugin.json extension namespace values must be objects")
    return manifest


def _mcp_servers(root: Path, diagnostics: list[str]) -> dict[str, dict[str, Any]]:
    path = root / "mcp.json"
    if not path.is_file():
        return {}  # declarations naming a server then fail as orphans
    config = _read_object(path, "mcp.json")
    if set(config) != {"$schema", "mcpServers"}:
        raise ContractError("mcp.json must contain exactly $schema and mcpServers")
    if config["$schema"] != MCP_SCHEMA:
        raise ContractError("mcp.json declares an unsupported Agent Plugins MCP schema")
    servers = config["mcpServers"]
    if not isinstance(servers, dict):
        raise ContractError("mcp.json mcpServers must be an object")
    surviving: dict[str, dict[str, Any]] = {}
    for name, server in servers.items():
        try:
            surviving[name] = _translate(server, root)
        except ValueError as exc:
            diagnostics.append(f"mcp.json server '{name}' dropped: {exc}")
    return surviving


def _translate(server: Any, root: Path) -> dict[str, Any]:
    if not isinstance(server, dict):
        raise ValueError("server entry must be an object")
    kind = server.get("type")
    if kind == "stdio":
        return _stdio(server, root)
    if kind == "streamable-http":
        return _remote(server)
    raise ValueError(f"unsupported server type {kind!r} (sse is rejected)")


def _stdio(server: dict[str, Any], root: Path) -> dict[str, Any]:
    if set(server) - _STDIO_FIELDS:
        raise ValueError("unknown stdio field")
    command = server.get("command")
    if not isinstance(command, str) or not command or "\x00" in command:
        raise ValueError("command must be a non-empty executable token")
    if command.startswith("./"):
        if not _inside(root / command[2:], root):
            raise ValueError("path escapes its resolved root")
    elif any(ch.isspace() for ch in command) or "/" in command or "\\" in command or command in (".", ".."):
        raise ValueError("command must be a bare executable or begin with ./")
    args = server.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError("args must be an array of strings")
    env = server.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ValueError("env must map string keys to string values")
    if {"PLUGIN_ROOT", "PLUGIN_DATA"} & set(env):
        raise ValueError("env must not set the reserved PLUGIN_ROOT or PLUGIN_DATA")
    return dict(server)


def _remote(server: dict[str, Any]) -> dict[str, Any]:
    if set(server) - _REMOTE_FIELDS:
        raise ValueError("unknown remote field")
    url = server.get("url")
    if not isinstance(url, str) or not url:
        raise ValueError("url must be a non-empty string")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("url scheme must be http or https")
    if parts.username is not None or parts.password is not None:
        raise ValueError("url must not contain user information")
    if parts.fragment:
        raise ValueError("url must not contain a fragment")
    if not parts.hostname:
        raise ValueError("url must have a host")
    if parts.scheme == "http" and parts.hostname != "localhost":
        try:
            loopback = ipaddress.ip_address(parts.hostname).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError("non-loopback url must use https")
    headers = server.get("headers")
    if headers is not None:
        names = (
            [n for n in headers if isinstance(n, str) and _HEADER_NAME.fullmatch(n)]
            if isinstance(headers, dict)
            else []
        )
        if (
            not isinstance(headers, dict)
            or len(names) != len(headers)
            or any(not isinstance(v, str) or "\r" in v or "\n" in v for v in headers.values())
        ):
            raise ValueError("invalid headers")
    return dict(server)


def _skills(root: Path, diagnostics: list[str]) -> tuple[Skill, ...]:
    folder = root / "skills"
    if not folder.exists() and not folder.is_symlink():
        return ()
    if not _inside(folder, root) or not folder.is_dir():
        diagnostics.append("skills: skills must be an in-root directory")
        return ()
    skills: list[Skill] = []
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        skill_md = child / "SKILL.md"
        if not child.is_dir() or not skill_md.exists():
            continue
        if not _inside(skill_md, root) or not skill_md.is_file():
            error: str | None = "SKILL.md must be a regular in-root file"
        else:
            try:
                front = skill_front_matter(skill_md)
            except (OSError, UnicodeError, ValueError) as exc:
                error = f"invalid SKILL.md: {exc}"
            else:
                error = _skill_error(front, child.name)
        if error:
            diagnostics.append(f"skill:{child.name}: {error}")
            continue
        skills.append(Skill(child.name, front["description"], skill_md))
    return tuple(skills)


def skill_front_matter(skill_md: Path) -> dict[str, Any]:
    content = skill_md.read_text(encoding="utf-8-sig").lstrip("\ufeff")
    if not content.startswith("---"):
        raise ValueError("missing YAML frontmatter")
    end = re.search(r"\n---\s*\n", content[3:])
    if end is None:
        raise ValueError("unterminated YAML frontmatter")
    try:
        parsed = yaml.safe_load(content[3 : end.start() + 3])
    except yaml.YAMLError as exc:
        raise ValueError(f"invalid YAML frontmatter: {exc}") from None
    except RecursionError:
        raise ValueError("YAML frontmatter is nested too deeply") from None
    if not isinstance(parsed, dict):
        raise ValueError("YAML frontmatter must be an object")
    return parsed


def _skill_error(front: Mapping[str, Any], folder: str) -> str | None:
    name = front.get("name")
    if not isinstance(name, str) or name != folder or not 1 <= len(name) <= 64 or not _SKILL_NAME.fullmatch(name):
        return "name must match the directory and satisfy Agent Skills constraints"
    description = front.get("description")
    if not isinstance(description, str) or not 1 <= len(description) <= 1024:
        return "description must be a non-empty string of at most 1024 characters"
    if "license" in front and not isinstance(front["license"], str):
        return "license must be a string"
    if "compatibility" in front and (
        not isinstance(front["compatibility"], str) or not 1 <= len(front["compatibility"]) <= 500
    ):
        return "compatibility must be a string of 1 to 500 characters"
    metadata = front.get("metadata", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        return "metadata must map string keys to string values"
    if "allowed-tools" in front and not isinstance(front["allowed-tools"], str):
        return "allowed-tools must be a string"
    return None


def _hardened_line_warnings(raw_servers: Mapping[str, Any]) -> list[str]:
    """One line per server that the older hardened Hermes line (location strings only) would refuse."""
    warnings: list[str] = []
    for name, raw in raw_servers.items():
        app = raw.get("app") or {}
        problems = [
            f"app.{osf}.location is a list" for osf, block in app.items() if isinstance(block.get("location"), list)
        ]
        if (raw.get("requires") or {}).get("min_version"):
            problems += [
                f"min_version with no version source under app.{osf}"
                for osf, block in app.items()
                if (block.get("version") or {}).get("kind", "none") == "none"
            ]
        if problems:
            warnings.append(
                f"server '{name}' needs a Hermes release that reads location lists; the older hardened "
                f"line refuses: {'; '.join(problems)}"
            )
        fields = (raw.get("liveness") or {}).get("fields")
        if isinstance(fields, dict) and set(fields) != set(FIELD_DEFAULTS):
            warnings.append(
                f"server '{name}' liveness.fields should name all of url, token and pid (some Hermes builds require all three)"
            )
    return warnings
