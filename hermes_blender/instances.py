"""Every Blender serving at once: the per-process records beside the runtime file.

Hermes reads only `server.json`, which names the newest bridge. Each bridge also keeps
`servers/<pid>.json` (same fields, same rules), so a person can see all of them and a call can
pick one. Each record is read with the runtime file's own reader: the same checks, the same
refusals, and a dead pid's record is never listed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .contract.host import HostFacts
from .contract.liveness import LiveEndpoint, RuntimeFileSpec, published_fields, read_live_endpoint
from .errors import LiveEndpointUnavailable

INSTANCES_FOLDER = "servers"
"""Must equal the add-on's folder name (a test holds both)."""


@dataclass(frozen=True)
class Instance:
    endpoint: LiveEndpoint
    blender_version: str | None
    started_at: str | None
    current: bool
    """The one `server.json` names: what Hermes connects to."""

    def payload(self) -> dict[str, object]:
        return {
            "pid": self.endpoint.pid,
            "url": self.endpoint.url,
            "blender_version": self.blender_version,
            "started_at": self.started_at,
            "current": self.current,
        }


def instance_spec(spec: RuntimeFileSpec, pid: int, host: HostFacts | None = None) -> RuntimeFileSpec:
    """The runtime-file spec of one bridge's own record."""
    folder = (host or HostFacts()).expand_path(spec.path).parent / INSTANCES_FOLDER
    return replace(spec, path=str(folder / f"{pid}.json"))


def live_instances(spec: RuntimeFileSpec = RuntimeFileSpec(), host: HostFacts | None = None) -> list[Instance]:
    """The running bridges, the one Hermes uses first, then newest first."""
    host = host or HostFacts()
    try:
        current: int | None = read_live_endpoint(spec, host).pid
    except LiveEndpointUnavailable:
        current = None
    folder = host.expand_path(spec.path).parent / INSTANCES_FOLDER
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if not path.stem.isdigit():
            continue
        try:
            endpoint = read_live_endpoint(replace(spec, path=str(path)), host)
        except LiveEndpointUnavailable:
            continue
        if path.stem != str(endpoint.pid):
            continue  # a record must name the process its file is named for
        extra = published_fields(path)
        published = extra.get("published_ns")
        newest_first = -published if isinstance(published, int) else 0
        found.append(
            (endpoint.pid != current, newest_first, Instance(endpoint, *_texts(extra), endpoint.pid == current))
        )
    found.sort(key=lambda item: item[:2])
    return [instance for *_, instance in found]


def _texts(extra: dict[str, object]) -> tuple[str | None, str | None]:
    version, started = extra.get("blender_version"), extra.get("started_at")
    return (version if isinstance(version, str) else None, started if isinstance(started, str) else None)
