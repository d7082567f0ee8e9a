"""OpenAI's Responses API (`POST /v1/responses`, SSE) for the fake model server.

Modelled on the real stream: `response.created`, then for each output item
`response.output_item.added`, its deltas (`response.output_text.delta` for a
message, `response.function_call_arguments.delta` for a tool call,
`response.custom_tool_call_input.delta` for a call of a freeform tool — Codex's
`apply_patch` — whose input is text, not JSON) and `response.output_item.done`,
then `response.completed` with the usage (`input_tokens_details.cached_tokens`).
Codex CLI speaks it.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["as_chat", "stream_response"]

Send = Callable[[str, Mapping[str, Any]], None]


def as_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses request's input as chat messages (for the server's token estimates)."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions:
        messages.append({"role": "system", "content": str(instructions)})
    for item in body.get("input") or []:
        if isinstance(item, Mapping):
            content = item.get("content") if "content" in item else item.get("output", "")
            messages.append({"role": str(item.get("role") or item.get("type")),
                             "content": json.dumps(content) if not isinstance(content, str)
                             else content})
    return {**body, "messages": messages}


KINDS = {"message": "output_text", "function_call": "function_call_arguments",
         "custom_tool_call": "custom_tool_call_input"}
"""An output item's type: the name of its delta events."""


def _item_events(send: Send, index: int, item: dict[str, Any], pieces: list[str],
                 field: str) -> dict[str, Any]:
    """Stream one output item: added, its deltas, done; returns the finished item."""
    kind = KINDS[item["type"]]
    send("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": index, "item": item})
    for piece in pieces:
        send(f"response.{kind}.delta", {"type": f"response.{kind}.delta",
                                        "item_id": item["id"], "output_index": index,
                                        "content_index": 0, "delta": piece})
    whole = "".join(pieces)
    done = dict(item, status="completed")
    if item["type"] == "message":
        done["content"] = [{"type": "output_text", "text": whole, "annotations": []}]
    else:
        done[field] = whole
        send(f"response.{kind}.done", {"type": f"response.{kind}.done", "item_id": item["id"],
                                       "output_index": index, field: whole})
    send("response.output_item.done", {"type": "response.output_item.done",
                                       "output_index": index, "item": done})
    return done


def stream_response(send: Send, pieces: Callable[[str], list[str]], model: str, text: str,
                    calls: list[tuple[str, str, Mapping[str, Any] | str]],
                    usage: Mapping[str, int]) -> None:
    """The whole stream of one reply: its text, then each (id, name, arguments) call (text
    arguments: a freeform tool's input)."""
    ident = "resp_fake_" + secrets.token_hex(8)
    head = {"id": ident, "object": "response", "created_at": int(time.time()),
            "status": "in_progress", "model": model, "output": []}
    send("response.created", {"type": "response.created", "response": head})
    output: list[dict[str, Any]] = []
    if text or not calls:
        item = {"id": "msg_fake_" + secrets.token_hex(8), "type": "message",
                "status": "in_progress", "role": "assistant", "content": []}
        output.append(_item_events(send, len(output), item, pieces(text), "content"))
    for call_id, name, arguments in calls:
        if isinstance(arguments, str):
            item = {"id": "ctc_fake_" + secrets.token_hex(8), "type": "custom_tool_call",
                    "status": "in_progress", "call_id": call_id, "name": name, "input": ""}
            output.append(_item_events(send, len(output), item, pieces(arguments), "input"))
            continue
        item = {"id": "fc_fake_" + secrets.token_hex(8), "type": "function_call",
                "status": "in_progress", "call_id": call_id, "name": name, "arguments": ""}
        output.append(_item_events(send, len(output), item, pieces(json.dumps(dict(arguments))),
                                   "arguments"))
    cached = usage.get("cache_read_input_tokens", 0)
    prompt = usage.get("input_tokens", 0) + cached
    send("response.completed", {"type": "response.completed", "response": {
        **head, "status": "completed", "output": output,
        "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
                  "output_tokens": usage.get("output_tokens", 0),
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": prompt + usage.get("output_tokens", 0)}}})
