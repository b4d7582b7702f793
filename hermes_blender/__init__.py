"""Agent-side toolkit for blender-bridge: the contract checks Hermes performs, a client, a headless runner."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hermes-blender")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
