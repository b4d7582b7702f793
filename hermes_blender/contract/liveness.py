"""The runtime file reader: the ONLY source of a live endpoint.

Read fresh on every call, never replaced by a configured URL (the stdio relay skips only judging again the
same bytes it judged before: `stdio_calls.RuntimeFileReader`). Where Hermes's
lines differ, the stricter rule wins for what we DIAL: a boolean or out-of-range pid is never
used, IPv6 brackets are kept, and the rebuilt URL is re-checked to still be loopback http on
the port. The STATE a failure carries is the one the real Hermes (location-list line) reports
for the same file, so `status` predicts what the user will see there: a missing, unreadable or
malformed file, or one without an integer pid, is `app_not_running`; a boolean pid is read by
Hermes as 0 or 1. The finer diagnosis stays in the message.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import ContractError, LiveEndpointUnavailable
from . import DECLARED_PATH
from .declaration import location_is_rooted
from .host import (
    HostFacts,
    UntrustedFile,
    is_absolute_text,
    read_small_file,
    serving_blender_problem,
    untrusted_file_problem,
)
from .redact import REDACTOR, Secret

DEFAULT_ENDPOINT_PATH = "/mcp"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_PID = 2**31 - 1
_ENDPOINT_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")
_FIELD_NAME = re.compile(r"[A-Za-z0-9_.-]+")
FIELD_DEFAULTS = {"url": "http", "token": "token", "pid": "pid"}
MAX_RUNTIME_FILE_BYTES = 64 * 1024
_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]{16,512}=*")
"""A bearer token (RFC 6750 b64token) of a sensible length: nothing that could break a header or a line."""

APP_NOT_RUNNING = "app_not_running"
ENDPOINT_UNAVAILABLE = "endpoint_unavailable"
HERMES_NOT_CONNECTED = "hermes_not_connected"


@dataclass(frozen=True)
class RuntimeFileSpec:
    """Where the endpoint is published and under which keys (plugin.json `liveness`)."""

    path: str = DECLARED_PATH
    url_key: str = "http"
    token_key: str = "token"
    pid_key: str = "pid"
    endpoint_path: str = DEFAULT_ENDPOINT_PATH


@dataclass(frozen=True)
class LivenessDeclaration:
    """A server's top-level `liveness` block: static, interactive_session, or server_json with its spec."""

    kind: str
    spec: RuntimeFileSpec | None = None


STATIC = LivenessDeclaration("static")


def parse_liveness(raw: object, host_os: str) -> LivenessDeclaration:
    """Parse a portable `liveness` block under the union of Hermes's rules (the stricter wins).

    Hermes never fails a load on this block, it degrades to static with a warning; our
    validator treats that as an error, because a static bridge would silently lose its endpoint.
    """
    if raw is None:
        return STATIC
    if not isinstance(raw, dict):
        raise ContractError("liveness must be an object")
    kind = raw.get("kind")
    if kind in ("static", "interactive_session"):
        if set(raw) != {"kind"}:
            raise ContractError(f"{kind} liveness only accepts 'kind'")
        return LivenessDeclaration(kind)
    if kind != "server_json":
        raise ContractError(f"unknown liveness kind: {kind!r}")
    if set(raw) - {"kind", "path", "fields"}:
        raise ContractError(f"server_json liveness has unknown fields {sorted(set(raw) - {'kind', 'path', 'fields'})}")
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip():
        raise ContractError("server_json liveness requires a non-empty path")
    if not location_is_rooted(path.strip(), host_os):
        raise ContractError(
            f"server_json liveness path {path!r} is not rooted for {host_os} (absolute, ~, %VAR% or $VAR)"
        )
    fields = raw.get("fields", {})
    if not isinstance(fields, dict):
        raise ContractError("server_json liveness fields must be an object")
    if set(fields) - set(FIELD_DEFAULTS):
        raise ContractError(f"server_json liveness fields may only name {sorted(FIELD_DEFAULTS)}")
    if any(not isinstance(name, str) or not _FIELD_NAME.fullmatch(name) for name in fields.values()):
        raise ContractError("server_json liveness field names must be simple keys ([A-Za-z0-9_.-]+)")
    names = {**FIELD_DEFAULTS, **fields}
    spec = RuntimeFileSpec(path=path.strip(), url_key=names["url"], token_key=names["token"], pid_key=names["pid"])
    return LivenessDeclaration("server_json", spec)


@dataclass(frozen=True)
class LiveEndpoint:
    url: str
    token: Secret
    pid: int
    runtime_file: Path

    @property
    def address(self) -> str:
        """The host part as dialed: an IP literal or `localhost` (endpoint_url() allows nothing else)."""
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None  # endpoint_url() guarantees an explicit port
        return port

    def headers(self) -> dict[str, str]:
        """The Authorization header, or none for a token-less (auth-disabled) build."""
        return {"Authorization": f"Bearer {self.token.reveal()}"} if self.token else {}


def read_live_endpoint(spec: RuntimeFileSpec = RuntimeFileSpec(), host: HostFacts | None = None) -> LiveEndpoint:
    """The endpoint the running app published, or LiveEndpointUnavailable saying why."""
    host = host or HostFacts()
    path = runtime_file_path(spec, host)
    return endpoint_in(read_runtime_file(path), spec, path, host)


def runtime_file_path(spec: RuntimeFileSpec, host: HostFacts) -> Path:
    """Where the spec's runtime file is on this host, or LiveEndpointUnavailable when that is not absolute."""
    path = host.expand_path(spec.path)
    if not is_absolute_text(str(path)):
        raise LiveEndpointUnavailable(
            f"the runtime file's path {spec.path!r} expands to {str(path)!r}, which is not absolute: this account has "
            "no home folder (HOME is unset and the user database names none), so nothing was read",
            state=APP_NOT_RUNNING,
        )
    return path


def read_runtime_file(path: Path, *, trusted_only: bool = True) -> bytes:
    """The runtime file's bytes, or LiveEndpointUnavailable saying why; with `trusted_only`, only from a file this
    user owns and nobody else can change."""
    try:
        return read_small_file(path, MAX_RUNTIME_FILE_BYTES, check=untrusted_file_problem if trusted_only else None)
    except FileNotFoundError:
        raise LiveEndpointUnavailable(
            f"no runtime file at {path}: Blender is closed, or open with its bridge stopped", state=APP_NOT_RUNNING
        ) from None
    except UntrustedFile as exc:
        raise LiveEndpointUnavailable(
            f"runtime file {path} {exc}; it is not used", state=ENDPOINT_UNAVAILABLE
        ) from None
    except OSError as exc:
        raise LiveEndpointUnavailable(f"cannot read runtime file {path}: {exc}", state=APP_NOT_RUNNING) from None


def endpoint_in(data: bytes, spec: RuntimeFileSpec, path: Path, host: HostFacts) -> LiveEndpoint:
    """The endpoint a runtime file's bytes name, judged as the contract says (JSON, pid, address, token), or
    LiveEndpointUnavailable saying why."""
    record = _record(path, data)
    pid = record.get(spec.pid_key)
    if isinstance(pid, bool):
        raise LiveEndpointUnavailable(
            f"runtime file {path} has a boolean pid ({pid!r}); Blender never writes one, so it is not used",
            state=_hermes_state_for_boolean_pid(pid, record.get(spec.url_key), host),
        )
    if not isinstance(pid, int) or not 1 <= pid <= MAX_PID:
        raise LiveEndpointUnavailable(f"runtime file {path} has no valid pid (found {pid!r})", state=APP_NOT_RUNNING)
    if not host.pid_alive(pid):
        raise LiveEndpointUnavailable(
            f"runtime file {path} names pid {pid}, which is not running: Blender has exited", state=APP_NOT_RUNNING
        )
    url = endpoint_url(record.get(spec.url_key), spec.endpoint_path)
    raw_token = record.get(spec.token_key)
    if isinstance(raw_token, str) and raw_token and not _TOKEN.fullmatch(raw_token):
        raise _invalid(
            f"runtime file {path} holds a token that no Blender writes (16 to 512 characters of A-Z a-z 0-9 . _ ~ + / -)"
        )
    token = Secret(raw_token if isinstance(raw_token, str) else "")
    if token:
        REDACTOR.register(token)  # before anything can build a header from it
    return LiveEndpoint(url=url, token=token, pid=pid, runtime_file=path)


def require_own_blender(endpoint: LiveEndpoint) -> None:
    """Raise unless the pid the file names is this OS user's Blender listening on the endpoint: checked before any
    byte (the token above all) goes out, by every path that dials it."""
    problem = serving_blender_problem(endpoint.pid, endpoint.address, endpoint.port)
    if problem is not None:
        raise LiveEndpointUnavailable(f"{problem}; nothing was sent to it", state=ENDPOINT_UNAVAILABLE)


def _hermes_state_for_boolean_pid(pid: bool, url: object, host: HostFacts) -> str:
    """This Hermes reads `true` as pid 1 (alive: init) and `false` as no pid, then goes on as usual."""
    if not pid or not host.pid_alive(1):
        return APP_NOT_RUNNING
    try:
        endpoint_url(url)
    except LiveEndpointUnavailable:
        return ENDPOINT_UNAVAILABLE
    return HERMES_NOT_CONNECTED


def endpoint_url(raw: object, endpoint_path: str = DEFAULT_ENDPOINT_PATH) -> str:
    """Validate a published address and rebuild it as http://host:port<endpoint_path>."""
    if not isinstance(raw, str) or not raw:
        raise _invalid(f"the endpoint address is missing or not a string ({raw!r})")
    if not _ENDPOINT_PATH.fullmatch(endpoint_path) or ".." in endpoint_path:
        raise _invalid(f"endpoint path {endpoint_path!r} is not a plain absolute path")
    try:
        parts = urlsplit(raw)
        port = parts.port
        hostname = parts.hostname
    except ValueError as exc:
        raise _invalid(f"the endpoint address {raw!r} is malformed ({exc})") from None
    if parts.scheme != "http":
        raise _invalid(f"the endpoint address {raw!r} must use plain http on loopback")
    if parts.username is not None or parts.password is not None:
        raise _invalid(f"the endpoint address {raw!r} must not carry credentials")
    if hostname not in LOOPBACK_HOSTS:
        raise _invalid(f"the endpoint address {raw!r} is not on loopback; it will not be contacted")
    if port is None or not 1 <= port <= 65535:
        raise _invalid(f"the endpoint address {raw!r} has no explicit port")
    host_part = f"[{hostname}]" if ":" in hostname else hostname
    url = f"http://{host_part}:{port}{endpoint_path}"
    check = urlsplit(url)
    if check.scheme != "http" or check.hostname not in LOOPBACK_HOSTS or check.port != port:
        raise _invalid(f"the endpoint address {raw!r} does not stay on loopback once joined")
    return url


def published_fields(path: Path) -> dict[str, object]:
    """Everything a runtime file says, extras included, or nothing: extras inform, they never decide a state."""
    try:
        return _record(path, read_runtime_file(path, trusted_only=False))
    except LiveEndpointUnavailable:
        return {}


def _record(path: Path, data: bytes) -> dict[str, object]:
    try:
        record = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise LiveEndpointUnavailable(f"cannot read runtime file {path}: {exc}", state=APP_NOT_RUNNING) from None
    except RecursionError:
        raise LiveEndpointUnavailable(f"runtime file {path} is nested too deeply", state=APP_NOT_RUNNING) from None
    except ValueError:
        raise LiveEndpointUnavailable(f"runtime file {path} is not valid JSON", state=APP_NOT_RUNNING) from None
    if not isinstance(record, dict):
        raise LiveEndpointUnavailable(f"runtime file {path} is not a JSON object", state=APP_NOT_RUNNING)
    return record


def _invalid(reason: str) -> LiveEndpointUnavailable:
    return LiveEndpointUnavailable(reason, state=ENDPOINT_UNAVAILABLE)
