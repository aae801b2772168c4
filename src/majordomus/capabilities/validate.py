"""Checks arguments against a capability's input schema: the small JSON Schema subset we declare.

Hand-written (no jsonschema at run time): `type`, `properties`, `required`, `additionalProperties`,
`items`, `minLength`, `maxLength`, `maxItems`, `enum`, `minimum`, `maximum`. The first problem comes back as a sentence
naming the argument, never its value.
"""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "null": (type(None),),
}


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False  # JSON true is not a number, whatever Python thinks
    return isinstance(value, _TYPES.get(name, ()))


def check(schema: dict[str, Any], value: Any, where: str = "arguments") -> str | None:
    """None when `value` satisfies `schema`, else one sentence saying what is wrong."""
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, n) for n in names):
            return f"{where} must be {' or '.join(_article(n) for n in names)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of {', '.join(map(str, schema['enum']))}"
    if _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} must be at most {schema['maximum']}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            if "x-majordomus-invalid" in schema:  # the handler's own sentence for a value it refuses
                return str(schema["x-majordomus-invalid"])
            why = schema.get("x-majordomus-why")
            return f"{where} is required and must not be blank: {why}" if why else f"{where} must not be empty"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where} is too long (at most {schema['maxLength']} characters)"
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where} has too many items (at most {schema['maxItems']})"
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                problem = check(items, item, f"{where}[{index}]")
                if problem:
                    return problem
    if isinstance(value, dict):
        properties: dict[str, Any] = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                why = properties.get(name, {}).get("x-majordomus-why")
                return f"argument '{name}' is required and must not be blank: {why}" if why else \
                    f"argument '{name}' is required"
        if schema.get("additionalProperties") is False:
            for name in value:
                if name not in properties:
                    known = ", ".join(properties) or "no arguments"
                    return f"unknown argument '{_printable(name)}': this takes {known}"
        for name, sub in properties.items():
            if name in value:
                problem = check(sub, value[name], f"argument '{name}'")
                if problem:
                    return problem
    return None


def from_query(schema: dict[str, Any], params: dict[str, str]) -> dict[str, Any]:
    """The arguments of a GET: query parameters are strings, so an integer or boolean parameter of the schema is
    read as one when it is spelled as one (`5`, `true`); anything else stays a string, which `check` refuses."""
    properties: dict[str, Any] = schema.get("properties", {})
    out: dict[str, Any] = {}
    for name, raw in params.items():
        kind = properties.get(name, {}).get("type") if isinstance(properties.get(name), dict) else None
        if kind == "integer" and raw.isascii() and raw.lstrip("-").isdigit() and len(raw) <= 40:
            out[name] = int(raw)
        elif kind == "boolean" and raw in ("true", "false"):
            out[name] = raw == "true"
        else:
            out[name] = raw
    return out


def _article(type_name: str) -> str:
    return {"object": "an object", "array": "an array", "integer": "an integer"}.get(type_name, f"a {type_name}")


def _printable(name: str) -> str:
    """An unknown key goes into a sentence: keep it short and on one line."""
    cleaned = "".join(ch if ch.isprintable() else "?" for ch in name)
    return cleaned if len(cleaned) <= 40 else cleaned[:40] + "…"
