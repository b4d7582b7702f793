"""One field of a .blend file written in place: the path a recovered file returns to (`FileGlobal.filepath`).

Blender writes that field only in its autosave and quit files, so that "recover" reopens the user's file where it
was rather than where the copy lies. A checkpoint is a copy the bridge wrote (`save_as_mainfile(copy=True)`,
uncompressed); giving it the same field lets a restore load it with Blender's recover operator and leave the user's
file path as it was, so a later save goes where theirs went, and nothing is written over their file. The field's
offset is read from the file's own SDNA (the struct layout Blender wrote with it), never assumed.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import BinaryIO


class UnknownLayout(Exception):
    """The file is not one this reader knows how to walk (compressed, another header, no FileGlobal.filepath)."""


def set_original_path(blend: Path, path: str) -> None:
    """Write `path` into the uncompressed `blend` file's FileGlobal.filepath."""
    encoded = path.encode("utf-8")
    with blend.open("r+b") as file:
        layout = _Layout.read(file)
        blocks = dict(layout.blocks(file, (b"GLOB", b"DNA1")))
        if b"GLOB" not in blocks or b"DNA1" not in blocks:
            raise UnknownLayout("no FileGlobal or SDNA block")
        glob_at, glob_size, glob_sdna = blocks[b"GLOB"]
        dna_at, dna_size, _ = blocks[b"DNA1"]
        file.seek(dna_at)
        offset, size = _field(file.read(dna_size), glob_sdna, ("filepath", "filename"), layout.pointer)
        if offset + size > glob_size or len(encoded) >= size:
            raise UnknownLayout("the path does not fit FileGlobal.filepath")
        file.seek(glob_at + offset)
        file.write(encoded.ljust(size, b"\0"))


class _Layout:
    """A .blend header: how wide pointers are and how block headers are laid out."""

    def __init__(self, header_size: int, pointer: int, bhead: str) -> None:
        self.header_size = header_size
        self.pointer = pointer
        self.bhead = bhead
        self.bhead_size = struct.calcsize(bhead)

    @classmethod
    def read(cls, file: BinaryIO) -> _Layout:
        head = file.read(17)
        if head.startswith(b"BLENDER17-01v"):  # Blender 5: 64-bit block headers, little-endian
            return cls(17, 8, "<4siQqq")
        if head[:7] == b"BLENDER" and head[8:9] == b"v":  # Blender 4: little-endian
            pointer = 8 if head[7:8] == b"-" else 4
            return cls(12, pointer, "<4siQii" if pointer == 8 else "<4siIii")
        raise UnknownLayout("not an uncompressed little-endian .blend")

    def blocks(self, file: BinaryIO, codes: tuple[bytes, ...]) -> list[tuple[bytes, tuple[int, int, int]]]:
        """(code, (data offset, data size, SDNA index)) of the first block of each code asked for."""
        found: list[tuple[bytes, tuple[int, int, int]]] = []
        position = self.header_size
        while len(found) < len(codes):
            file.seek(position)
            raw = file.read(self.bhead_size)
            if len(raw) < self.bhead_size:
                break
            fields = struct.unpack(self.bhead, raw)
            code = fields[0]
            size, sdna = (fields[3], fields[1]) if self.header_size == 17 else (fields[1], fields[3])
            if code == b"ENDB":
                break
            if code in codes and all(code != seen for seen, _ in found):
                found.append((code, (position + self.bhead_size, size, sdna)))
            position += self.bhead_size + size
        return found


def _field(dna: bytes, struct_index: int, wanted: tuple[str, ...], pointer: int) -> tuple[int, int]:
    """Offset and size of the field named one of `wanted` in struct `struct_index`, from an SDNA block (the file
    keeps a field's old name: `filepath` is `filename` in SDNA)."""
    if dna[:8] != b"SDNANAME":
        raise UnknownLayout("no SDNA")
    at = 8
    names, at = _strings(dna, at)
    if dna[at : at + 4] != b"TYPE":
        raise UnknownLayout("SDNA without TYPE")
    types, at = _strings(dna, at + 4)
    if dna[at : at + 4] != b"TLEN":
        raise UnknownLayout("SDNA without TLEN")
    at += 4
    lengths = struct.unpack_from(f"<{len(types)}H", dna, at)
    at = _aligned(at + 2 * len(types))
    if dna[at : at + 4] != b"STRC":
        raise UnknownLayout("SDNA without STRC")
    (count,) = struct.unpack_from("<i", dna, at + 4)
    at += 8
    for index in range(count):
        _type, members = struct.unpack_from("<hh", dna, at)
        at += 4
        offset = 0
        for _ in range(members):
            member_type, member_name = struct.unpack_from("<hh", dna, at)
            at += 4
            name = names[member_name]
            size = _member_size(name, lengths[member_type], pointer)
            if index == struct_index and _bare(name) in wanted:
                return offset, size
            offset += size
        if index == struct_index:
            break
    raise UnknownLayout(f"no field {wanted[0]!r}")


def _strings(dna: bytes, at: int) -> tuple[list[str], int]:
    (count,) = struct.unpack_from("<i", dna, at)
    at += 4
    strings = []
    for _ in range(count):
        end = dna.index(b"\0", at)
        strings.append(dna[at:end].decode("latin-1"))
        at = end + 1
    return strings, _aligned(at)


def _aligned(at: int) -> int:
    return (at + 3) & ~3


def _bare(name: str) -> str:
    return re.sub(r"[\[*(].*|\W", "", name.lstrip("*("))


def _member_size(name: str, length: int, pointer: int) -> int:
    items = 1
    for dimension in re.findall(r"\[(\d+)\]", name):
        items *= int(dimension)
    return (pointer if name.startswith(("*", "(*")) else length) * items
