"""The picture a screenshot is put together from when Blender's own comes back one colour (tools/screen.py, with
the PNG helpers of tools/pictures.py)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from hermes_blender.blender_host import ADDON_MODULE


def _screen(addon: ModuleType) -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.tools.screen")


def _pictures() -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.tools.pictures")


def _read_back(screen: ModuleType, path: Path) -> tuple[tuple[int, int], bytes]:
    size, pixels = _pictures().pixels_of(path)
    return size, bytes(round(value * 255) for value in pixels)


def test_a_put_together_picture_is_a_png_blender_reads_back_pixel_for_pixel(addon: ModuleType, tmp_path: Path) -> None:
    screen = _screen(addon)
    width, height = 5, 3
    rows = bytes((x * 40, y * 80, 7, 255)[i] for y in range(height) for x in range(width) for i in range(4))
    path = tmp_path / "picture.png"
    path.write_bytes(_pictures().png_bytes(width, height, rows))
    assert _read_back(screen, path) == ((width, height), rows)  # both bottom row first, as Blender keeps pixels


def test_regions_are_placed_where_they_sit_and_a_panel_only_where_it_draws(addon: ModuleType) -> None:
    screen = _screen(addon)
    canvas = bytearray(screen._BACKGROUND * 16)  # 4 x 4
    main = bytes((10, 10, 10, 0)) * 4  # 2 x 2, alpha 0 as the 3D Viewport's own buffer has it: pasted opaque
    screen._paste(canvas, 4, 4, main, (1, 1, 2, 2), False)
    panel = bytes((200, 0, 0, 255)) + bytes(4)  # 2 x 1: draws its left pixel only
    screen._paste(canvas, 4, 4, panel, (1, 2, 2, 1), True)
    pixel = lambda x, y: bytes(canvas[(y * 4 + x) * 4 : (y * 4 + x) * 4 + 4])  # noqa: E731
    assert pixel(0, 0) == screen._BACKGROUND and pixel(1, 1) == bytes((10, 10, 10, 255))
    assert pixel(1, 2) == bytes((200, 0, 0, 255)) and pixel(2, 2) == bytes((10, 10, 10, 255))


def test_one_colour_is_told_apart_from_a_picture(addon: ModuleType) -> None:
    screen = _screen(addon)
    assert screen._uniform(bytes(4 * 100), 4)
    assert not screen._uniform(bytes(4 * 99) + b"\x01\0\0\0", 4)
