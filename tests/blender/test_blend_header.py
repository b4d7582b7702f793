"""The recover path written into a checkpoint's FileGlobal: at the field the file's own SDNA names, nowhere else."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from blender_addon import blend_header

pytestmark = pytest.mark.timeout(60)

HEADER = b"BLENDER17-01v0500"
"""Blender 5's file header: 64-bit block headers `<4siQqq` (code, SDNA index, old address, size, count)."""
FILEGLOBAL = 1
PATH_AT = 8
"""FileGlobal below: char subvstr[4], short subversion, short flags, then char filename[1024]."""


def _block(code: bytes, sdna: int, data: bytes) -> bytes:
    return struct.pack("<4siQqq", code, sdna, 0x1000, len(data), 1) + data


def _strings(tag: bytes, strings: list[bytes]) -> bytes:
    raw = tag + struct.pack("<i", len(strings)) + b"".join(s + b"\0" for s in strings)
    return raw + b"\0" * (-len(raw) % 4)


def _sdna() -> bytes:
    """Two structs; the first has a field named like a block code, so the SDNA itself holds the bytes "DNA1"."""
    names = [b"DNA1", b"subvstr[4]", b"subversion", b"flags", b"filename[1024]"]
    types = [b"char", b"short", b"int", b"Marker", b"FileGlobal"]
    lengths = [1, 2, 4, 4, 1032]
    tlen = b"TLEN" + struct.pack(f"<{len(lengths)}H", *lengths)
    tlen += b"\0" * (-len(tlen) % 4)
    marker = struct.pack("<hh", 3, 1) + struct.pack("<hh", 2, 0)
    fileglobal = struct.pack("<hh", 4, 4) + struct.pack("<hhhhhhhh", 0, 1, 1, 2, 1, 3, 0, 4)
    return (
        b"SDNA"
        + _strings(b"NAME", names)
        + _strings(b"TYPE", types)
        + tlen
        + b"STRC"
        + struct.pack("<i", 2)
        + marker
        + fileglobal
    )


def _blend(folder: Path) -> tuple[Path, int]:
    """A file laid out as Blender writes one (FileGlobal first, SDNA last, ENDB), and where its FileGlobal's data is."""
    head = HEADER + _block(b"REND", 0, b"\0" * 8) + _block(b"TEST", 0, b"\0" * 16)
    glob_at = len(head) + 32
    data = _block(b"DATA", 0, b"not DNA1 but looks like it SDNANAME" + b"\0" * 29)
    body = head + _block(b"GLOB", FILEGLOBAL, b"5\0\0\0" + b"\0" * 1028) + data
    blend = folder / "checkpoint.blend"
    blend.write_bytes(body + _block(b"DNA1", 0, _sdna()) + _block(b"ENDB", 0, b""))
    return blend, glob_at


@pytest.mark.parametrize("tail", [blend_header.TAIL, 48], ids=["tail-holds-the-sdna", "tail-read-again-longer"])
def test_the_path_lands_in_the_fileglobal_field_the_sdna_names_even_when_the_sdna_holds_a_block_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: int
) -> None:
    monkeypatch.setattr(blend_header, "TAIL", tail)
    blend, glob_at = _blend(tmp_path)
    before = blend.read_bytes()
    blend_header.set_original_path(blend, "/home/artist/chair.blend")
    after = blend.read_bytes()
    field = slice(glob_at + PATH_AT, glob_at + PATH_AT + 1024)
    assert after[field] == b"/home/artist/chair.blend".ljust(1024, b"\0")
    assert after[: field.start] == before[: field.start] and after[field.stop :] == before[field.stop :]


@pytest.mark.parametrize("cut", [1, 40, 200], ids=["end-block-cut", "end-block-gone", "sdna-cut"])
def test_a_file_cut_short_is_an_unknown_layout_and_is_left_as_it_was(tmp_path: Path, cut: int) -> None:
    blend, _ = _blend(tmp_path)
    blend.write_bytes(blend.read_bytes()[:-cut])
    before = blend.read_bytes()
    with pytest.raises(blend_header.UnknownLayout):
        blend_header.set_original_path(blend, "/home/artist/chair.blend")
    assert blend.read_bytes() == before


def test_a_path_that_is_not_utf8_on_disk_is_written_as_its_bytes(tmp_path: Path) -> None:
    """Python names such a file with surrogates (`caf\\udce9`); Blender and the disk know it by its bytes."""
    blend, glob_at = _blend(tmp_path)
    blend_header.set_original_path(blend, "/home/artist/caf\udce9.blend")
    assert blend.read_bytes()[glob_at + PATH_AT :].startswith(b"/home/artist/caf\xe9.blend\0")


def _corrupted(blend: Path, at: int, value: bytes) -> None:
    raw = bytearray(blend.read_bytes())
    raw[at : at + len(value)] = value
    blend.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage", ["negative-block-size", "member-count", "member-name-index", "member-type-index"])
def test_a_corrupt_file_is_an_unknown_layout_at_once_and_is_left_as_it_was(tmp_path: Path, damage: str) -> None:
    blend, _ = _blend(tmp_path)
    raw = blend.read_bytes()
    fileglobal = raw.index(struct.pack("<hh", 4, 4), raw.index(b"STRC"))
    if damage == "negative-block-size":  # the walk to FileGlobal would stand still on this block for ever
        _corrupted(blend, len(HEADER) + 16, struct.pack("<q", -32))
    elif damage == "member-count":  # of the struct before FileGlobal: the skip over it leaves the SDNA
        _corrupted(blend, raw.index(b"STRC") + 10, struct.pack("<h", 30000))
    elif damage == "member-name-index":
        _corrupted(blend, fileglobal + 6, struct.pack("<h", -2))
    else:
        _corrupted(blend, fileglobal + 4, struct.pack("<h", 999))
    before = blend.read_bytes()
    with pytest.raises(blend_header.UnknownLayout):
        blend_header.set_original_path(blend, "/home/artist/chair.blend")
    assert blend.read_bytes() == before
