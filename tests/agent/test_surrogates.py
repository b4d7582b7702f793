"""What the toolkit hands an MCP client holds no lone surrogate, which the official SDK can neither write nor read."""

from __future__ import annotations

import json

import pytest

from hermes_blender.surrogates import loads

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    "body",
    [b'{"path": "/home/caf\\udce9"}', b'{"path": "/home/caf\\uDCE9"}', b'{"path": "/home/caf\xed\xb3\xa9"}'],
    ids=["escaped", "escaped-upper-case", "utf8-form-of-a-surrogate"],
)
def test_a_lone_surrogate_in_a_body_is_u_fffd_however_it_was_written(body: bytes) -> None:
    value = loads(body)
    assert value["path"].startswith("/home/caf\ufffd")
    json.dumps(value, ensure_ascii=False).encode("utf-8")


def test_a_surrogate_pair_and_everything_else_parse_as_json_parses_them() -> None:
    body = json.dumps({"smile \U0001f600": ["\U0001f600", 1, None, {"é": 2.5}]}).encode()
    assert b"\\ud83d" in body and loads(body) == json.loads(body)
