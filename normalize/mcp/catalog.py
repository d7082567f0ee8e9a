"""MCP tools as the command language sees them: one-line usage, arguments, results as text.

Plain data and JSON Schema only (no SDK): `RemoteTool` is what a server
listed, `arguments` turns `key=value` words or a JSON body into the call's
arguments and checks them against the tool's `inputSchema` (the schema's own
message on a mismatch), `reference` is the section of the prompt and of
`normalize help commands` that lists the exposed tools.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from normalize.errors import ToolError

__all__ = ["RemoteTool", "arguments", "one_line", "reference", "usage"]

_JSON_TYPES = frozenset({"integer", "number", "boolean", "array", "object", "null"})


@dataclass(frozen=True)
class RemoteTool:
    """One tool a server listed: its name, description, input schema and read-only hint."""

    server: str
    name: str
    description: str = ""
    schema: Mapping[str, Any] = field(default_factory=dict)
    read_only: bool = False

    @property
    def properties(self) -> dict[str, Any]:
        props = self.schema.get("properties")
        return dict(props) if isinstance(props, Mapping) else {}

    @property
    def required(self) -> list[str]:
        req = self.schema.get("required")
        return [str(r) for r in req] if isinstance(req, list) else []


def one_line(text: str, limit: int = 160) -> str:
    """The first sentence or line of a description, cut to `limit` characters."""
    first = " ".join((text or "").strip().splitlines()[:1]).strip()
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _type_name(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "VALUE"
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "VALUE")
    if kind is None and isinstance(schema.get("anyOf"), list):
        kinds = [s.get("type") for s in schema["anyOf"] if isinstance(s, Mapping)]
        kind = next((k for k in kinds if k and k != "null"), "VALUE")
    return str(kind or "VALUE").upper()


def usage(tool: RemoteTool) -> str:
    """`mcp SERVER TOOL key=TYPE [key=TYPE]`: required arguments first, optional ones bracketed."""
    words = ["mcp", tool.server, tool.name]
    props, required = tool.properties, tool.required
    for name in [*required, *[p for p in props if p not in required]]:
        word = f"{name}={_type_name(props.get(name))}"
        words.append(word if name in required else f"[{word}]")
    return " ".join(words)


def reference(tools: Iterable[RemoteTool], problems: Iterable[str] = ()) -> str:
    """The MCP section of the command reference: how to call, then one line per tool."""
    tools, problems = list(tools), list(problems)
    if not tools and not problems:
        return ""
    out = [
        "## MCP tools",
        "Configured MCP servers lend these tools. Call one as `mcp SERVER TOOL key=value …` "
        "(a value is read as JSON when the argument is not a string), or end the line with "
        "<<EOF and give the arguments as one JSON object in the body. `mcp SERVER` lists a "
        "server's tools with their full descriptions.",
    ]
    for tool in tools:
        effect = "read-only" if tool.read_only else "changes things; may need approval"
        described = one_line(tool.description)
        out.append(f"- {usage(tool)}: {described + ' ' if described else ''}({effect})")
    out += [f"- {problem}" for problem in problems]
    return "\n".join(out) + "\n"


def _value(raw: str, schema: Any) -> Any:
    """`raw` as JSON when the argument's schema wants a non-string, else the string itself."""
    kinds: set[str] = set()
    if isinstance(schema, Mapping):
        kind = schema.get("type")
        kinds = set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()
        for option in schema.get("anyOf") or []:
            if isinstance(option, Mapping) and isinstance(option.get("type"), str):
                kinds.add(option["type"])
    if "string" in kinds or not kinds & _JSON_TYPES:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # the schema check below says what was expected


def arguments(tool: RemoteTool, words: list[str], body: str | None) -> dict[str, Any]:
    """The call's arguments from `key=value` words or a JSON body, checked against the schema."""
    args: dict[str, Any] = {}
    if body and body.strip():
        try:
            loaded = json.loads(body)
        except ValueError as exc:
            raise ToolError(f"the body of `mcp {tool.server} {tool.name}` is not JSON: {exc}; "
                            f"give one JSON object") from None
        if not isinstance(loaded, dict):
            raise ToolError(f"the body of `mcp {tool.server} {tool.name}` must be a JSON object, "
                            f"not {type(loaded).__name__}")
        args.update(loaded)
    props = tool.properties
    for word in words:
        key, sep, raw = word.partition("=")
        if not sep or not key:
            raise ToolError(f"`{word}`: arguments are key=value (usage: {usage(tool)})")
        args[key] = _value(raw, props.get(key))
    _check(tool, args)
    return args


def _check(tool: RemoteTool, args: dict[str, Any]) -> None:
    """Raise `ToolError` with the schema's own message when `args` do not fit."""
    if not tool.schema:
        return
    import jsonschema
    from jsonschema.exceptions import best_match

    try:
        validator_class = jsonschema.validators.validator_for(tool.schema)
        validator = validator_class(dict(tool.schema))
        error = best_match(validator.iter_errors(args))
    except jsonschema.exceptions.SchemaError:
        return  # the server's schema is broken; let the server judge the call
    if error is None:
        return
    where = ".".join(str(p) for p in error.absolute_path)
    at = f" (at {where})" if where else ""
    raise ToolError(f"invalid arguments for {tool.server} {tool.name}: {error.message}{at}; "
                    f"usage: {usage(tool)}")
