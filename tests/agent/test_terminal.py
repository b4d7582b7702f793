"""What the CLI prints cannot be steered by a name in a .blend or a field in the runtime file."""

from __future__ import annotations

from hermes_blender.summary import format_objects_summary
from hermes_blender.terminal import one_line, printable

HOSTILE = "Cube\nready\x1b]0;owned\x07\x1b[2J\u2028\x9b"


def test_a_hostile_object_name_stays_on_its_own_line_with_its_controls_visible() -> None:
    scene = {
        "scene_name": "Scene\r",
        "active_object": HOSTILE,
        "object_mode": "OBJECT",
        "collections": [
            {"name": "Scene Collection", "objects": [{"name": HOSTILE, "type": "MESH", "parent": None}], "children": []}
        ],
    }
    text = format_objects_summary(scene)
    assert text.count("\n") == 2  # the header, the collection, one object: nothing forged
    assert not any(ch in text for ch in "\x1b\x07\r\u2028\x9b")
    assert "Cube\\x0aready\\x1b]0;owned\\x07" in text


def test_printable_keeps_our_own_line_breaks_and_escapes_every_other_control() -> None:
    assert printable("a\tb\nc\x1b[31md\x00") == "a\tb\nc\\x1b[31md\\x00"
    assert one_line("a\nb\tc") == "a\\x0ab\\x09c"


def test_bidirectional_and_zero_width_characters_are_shown_not_obeyed() -> None:
    """U+202E would print 'ready' for a line that says something else; each such character is an escape."""
    for text in (printable, one_line):
        assert text("log\u202eydaer\u2066x\u200by\ufeff") == "log\\u202eydaer\\u2066x\\u200by\\ufeff"


def test_a_path_that_is_not_utf8_on_disk_prints_with_its_bytes_visible() -> None:
    """Python reads such a path with surrogates; a UTF-8 terminal stream cannot write one (status ended there)."""
    for text in (printable, one_line):
        shown = text("/home/caf\udce9/server.json")
        assert shown == "/home/caf\\udce9/server.json"
        shown.encode("utf-8")
