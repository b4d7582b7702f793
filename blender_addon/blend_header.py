"""One field of a .blend file written in place: the path a recovered file returns to (`FileGlobal.filepath`).

Blender writes that field only in its autosave and quit files, so that "recover" reopens the user's file where it
was rather than where the copy lies. A checkpoint is a copy the bridge wrote (`save_as_mainfile(copy=True)`,
uncompressed); giving it the same field lets a restore load it with Blender's recover operator and leave the user's
file path as it was, so a later save goes where theirs went, and nothing is written over their file. The field's
offset is read from the file's own SDNA (the struct layout Blender wrote with it), never assumed.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import BinaryIO

TAIL = 256 * 1024
"""Bytes of a file's end read first to find its SDNA block (about 130 KB in Blender 5.x's files)."""


class UnknownLayout(Exception):
    """The file is not one this reader knows how to walk (compressed, another header, no FileGlobal.filepath)."""


def set_original_path(blend: Path, path: str) -> None:
    """Write `path` into the uncompressed `blend` file's FileGlobal.filepath."""
    encoded = os.fsencode(path)  # as Blender wrote it: a path that is not UTF-8 on disk keeps its bytes
    with blend.open("r+b") as file:
        layout = _Layout.read(file)
        glob_at, glob_size, glob_sdna = layout.first(file, b"GLOB")
        try:
            offset, size = _field(layout.sdna(file), glob_sdna, ("filepath", "filename"), layout.pointer)
        except (struct.error, IndexError) as exc:  # an SDNA whose counts or indexes point outside it
            raise UnknownLayout(f"a corrupt SDNA ({exc})") from None
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

    def first(self, file: BinaryIO, code: bytes) -> tuple[int, int, int]:
        """(data offset, data size, SDNA index) of the first block of `code`, walking from the start: for the
        FileGlobal, which Blender writes among the first blocks."""
        position = self.header_size
        while True:
            file.seek(position)
            raw = file.read(self.bhead_size)
            if len(raw) < self.bhead_size:
                raise UnknownLayout(f"no {code.decode()} block")
            found, size, sdna = self._head(raw, 0)
            if size < 0:
                raise UnknownLayout(f"a block of negative size ({size}) before the {code.decode()} block")
            if found == code:
                return position + self.bhead_size, size, sdna
            if found == b"ENDB":
                raise UnknownLayout(f"no {code.decode()} block")
            position += self.bhead_size + size

    def sdna(self, file: BinaryIO) -> bytes:
        """The SDNA block's data, found from the end: Blender writes it last, just before the empty ENDB block that
        ends the file (a walk from the start reads every block's header, thousands for a thousand objects). The
        file's tail is read, more of it while the block is not in it: plain reads work on any file system."""
        size = file.seek(0, os.SEEK_END)
        end = size - self.bhead_size
        tail = TAIL
        while True:
            start = max(self.header_size, end - tail)
            if end < start:
                raise UnknownLayout("the file is too short for an ENDB block")
            file.seek(start)
            data = file.read(size - start)
            if self._head(data, end - start)[:2] != (b"ENDB", 0):
                raise UnknownLayout("the file does not end with an ENDB block")
            at = data.rfind(b"DNA1", 0, end - start)
            while at >= 0:  # the last "DNA1" whose block header ends exactly at ENDB and holds an SDNA
                body = at + self.bhead_size
                if start + body + self._head(data, at)[1] == end and data[body : body + 8] == b"SDNANAME":
                    return data[body : end - start]
                at = data.rfind(b"DNA1", 0, at)
            if start == self.header_size:
                raise UnknownLayout("no SDNA block")
            tail *= 4

    def _head(self, raw: bytes, at: int) -> tuple[bytes, int, int]:
        """(code, data size, SDNA index) of the block header at `at`."""
        fields = struct.unpack_from(self.bhead, raw, at)
        return (fields[0], fields[3], fields[1]) if self.header_size == 17 else (fields[0], fields[1], fields[3])


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
    if not 0 <= struct_index < count:
        raise UnknownLayout(f"no struct {struct_index} in SDNA")
    for _ in range(struct_index):  # the structs before ours: skipped (each member is two shorts)
        (members,) = struct.unpack_from("<H", dna, at + 2)
        at += 4 + 4 * members
    (members,) = struct.unpack_from("<H", dna, at + 2)
    offset = 0
    for member in range(members):  # read unsigned: an index out of the lists is an error, never another entry
        member_type, member_name = struct.unpack_from("<HH", dna, at + 4 + 4 * member)
        name = names[member_name].decode("latin-1")
        size = _member_size(name, lengths[member_type], pointer)
        if _bare(name) in wanted:
            return offset, size
        offset += size
    raise UnknownLayout(f"no field {wanted[0]!r}")


def _strings(dna: bytes, at: int) -> tuple[list[bytes], int]:
    """An SDNA string list (names or types) undecoded: a field's name is decoded when its struct is read."""
    (count,) = struct.unpack_from("<i", dna, at)
    strings = dna[at + 4 :].split(b"\0", count)[:count]
    if len(strings) < count:
        raise UnknownLayout("SDNA strings cut short")
    return strings, _aligned(at + 4 + sum(map(len, strings)) + count)


def _aligned(at: int) -> int:
    return (at + 3) & ~3


def _bare(name: str) -> str:
    return re.sub(r"[\[*(].*|\W", "", name.lstrip("*("))


def _member_size(name: str, length: int, pointer: int) -> int:
    items = 1
    for dimension in re.findall(r"\[(\d+)\]", name):
        items *= int(dimension)
    return (pointer if name.startswith(("*", "(*")) else length) * items
