"""JSON text shared by both layers: compact encoding, and splicing text encoded once.

A tool's data is serialised on Blender's main thread (a snapshot no later job can change)
and sent verbatim: the reply around it is encoded without encoding that data again.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any


class RawJson(str):
    """JSON text already serialised once, spliced into a reply instead of being encoded again."""


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""One encoder for every call (it holds only these settings): `json.dumps` with arguments builds one per call."""


def dumps(value: Any) -> str:
    return _ENCODER.encode(value)


SPLICE_DEPTH = 2
"""RawJson is looked for only in dict values this deep (a reply's result, or an envelope's): the
payload around it is small, the data inside it never walked."""


def encode(payload: Any) -> bytes:
    """`payload` as UTF-8 JSON, with RawJson dict values (up to SPLICE_DEPTH deep) spliced in verbatim."""
    raws: list[RawJson] = []
    nonce = os.urandom(16).hex()  # per call: a client cannot guess it, so no value it sends can collide
    shell = _swap(payload, raws, SPLICE_DEPTH, nonce)
    text = dumps(shell)
    for index, raw in enumerate(raws):
        text = text.replace(dumps(_marker(nonce, index)), raw, 1)
    return _utf8(text)


def _utf8(text: str) -> bytes:
    """JSON text as UTF-8, even when a string in it holds a lone surrogate (an undecodable file name Python read
    with surrogateescape, a client's id): each becomes U+FFFD, as Blender shows an undecodable name. Written as a
    \\uXXXX escape it is still JSON to Python's and JavaScript's readers, but the official Python SDK's (pydantic)
    refuses the whole message, so the answer would be lost to Hermes, the relay and every Python client."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _marker(nonce: str, index: int) -> str:
    return f"\u0000raw-json-{nonce}-{index}\u0000"


def _swap(value: Any, raws: list[RawJson], depth: int, nonce: str) -> Any:
    if isinstance(value, RawJson):
        raws.append(value)
        return _marker(nonce, len(raws) - 1)
    if isinstance(value, dict) and depth > 0:
        return {key: _swap(item, raws, depth - 1, nonce) for key, item in value.items()}
    return value
