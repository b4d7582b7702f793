"""Pictures the tools answer with: PNG bytes made with the standard library, pixels read through Blender, and a
picture shrunk to fit a byte budget (the official screenshot tools' `size_limit_in_bytes`)."""

from __future__ import annotations

import struct
import zlib
from array import array
from pathlib import Path

import bpy

from ..errors import ToolError
from .base import Image

SIZE_LIMIT = {
    "type": "integer",
    "minimum": 0,
    "maximum": 50_000_000,
    "description": "Shrink the PNG below this many bytes (0: no limit).",
}
SMALLEST_SIDE = 64


def pixels_of(path: Path) -> tuple[tuple[int, int], array[float]]:
    """A picture's size and its RGBA floats as Blender reads them, bottom row first."""
    image = bpy.data.images.load(str(path))
    try:
        width, height = image.size
        pixels = array("f", bytes(4 * 4 * width * height))
        image.pixels.foreach_get(pixels)
    finally:
        bpy.data.images.remove(image)
    return (width, height), pixels


def fitted(path: Path, size_limit: int) -> Image:
    """The PNG at `path`, halved until it fits `size_limit` bytes (0: no limit)."""
    image = bpy.data.images.load(str(path))
    try:
        width, height = image.size
        png = path.read_bytes()
        while size_limit and len(png) > size_limit:
            width, height = width // 2, height // 2
            if min(width, height) < SMALLEST_SIDE:
                raise ToolError(f"The picture cannot be made smaller than {size_limit} bytes.", state="too_large")
            image.scale(width, height)
            image.filepath_raw = str(path)
            image.file_format = "PNG"
            image.save()
            png = path.read_bytes()
    finally:
        bpy.data.images.remove(image)
    return Image(png, {"width": width, "height": height, "bytes": len(png)})


def png_bytes(width: int, height: int, rgba_bottom_up: bytes) -> bytes:
    """An RGBA PNG, rows top first as PNG wants them (standard library only)."""
    stride = width * 4
    rows = b"".join(b"\0" + rgba_bottom_up[y * stride : (y + 1) * stride] for y in reversed(range(height)))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b"")
