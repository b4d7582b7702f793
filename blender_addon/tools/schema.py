"""Checks arguments against the small JSON Schema subset our tools declare.

Arguments are checked on the network thread before a job is queued, so a malformed call
never costs main-thread time and the agent gets a message it can correct.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArguments

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def validate(schema: dict[str, Any], value: Any, where: str = "arguments") -> None:
    expected = schema.get("type")
    if expected is not None:
        kinds = _TYPES[expected]
        if not isinstance(value, kinds) or (isinstance(value, bool) and expected in ("integer", "number")):
            raise InvalidArguments(f"{where} must be {_article(expected)}")
    if "enum" in schema and value not in schema["enum"]:
        raise InvalidArguments(f"{where} must be one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise InvalidArguments(f"{where} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise InvalidArguments(f"{where} must be at most {schema['maximum']}")
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        raise InvalidArguments(f"{where} must be at most {schema['maxLength']} characters")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        raise InvalidArguments(f"{where} must not be empty" if schema["minLength"] == 1 else f"{where} is too short")
    if isinstance(value, list) and "items" in schema:
        if len(value) > schema.get("maxItems", len(value)):
            raise InvalidArguments(f"{where} must have at most {schema['maxItems']} items")
        for position, item in enumerate(value):
            validate(schema["items"], item, f"{where}[{position}]")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                raise InvalidArguments(f"{where} is missing the required '{name}'")
        for name, item in value.items():
            if name in properties:
                validate(properties[name], item, f"'{name}'")
            elif schema.get("additionalProperties", True) is False:
                allowed = ", ".join(sorted(properties)) or "none"
                raise InvalidArguments(f"unknown argument '{name}' (allowed: {allowed})")


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"
