"""The Lab answer's quick encoding gives the same bytes as the general splice (jsontext.encode)."""

from __future__ import annotations

import json

import pytest

from blender_addon.jsontext import RawJson
from blender_addon.jsontext import encode as general
from blender_addon.net.lab_protocol import encode

ENVELOPES = [
    {"status": "ok", "result": RawJson("{}")},
    {"status": "ok", "result": RawJson('{"a":"\\"result\\":null"}'), "stdout": '"result":null\n', "stderr": "é"},
    {"status": "ok", "result": RawJson('{"k":null}'), "stdout": "\ud800 lone surrogate"},
    {"status": "error", "message": 'the "result":null text'},
    {"status": "ok", "result": {"nested": RawJson("[1]")}},
]


@pytest.mark.parametrize("envelope", ENVELOPES)
def test_same_bytes_as_the_general_splice(envelope: dict) -> None:
    assert encode(envelope) == general(envelope) + b"\0"
    json.loads(encode(envelope)[:-1])  # and it is JSON
