"""Google's Gemini API (`generateContent`, `streamGenerateContent`) for the fake model server.

A streamed reply is a series of `GenerateContentResponse`s sent as SSE `data:` lines
(`?alt=sse`): one per piece of the text, then one with the function calls (each a
`functionCall` part), the `finishReason` and the `usageMetadata`. A reply not streamed
is the same response whole. Gemini CLI speaks it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["chunks", "whole"]

Call = tuple[str, Mapping[str, Any] | str]


def _response(model: str, parts: list[dict[str, Any]], *, finish: bool = False,
              usage: Mapping[str, int] | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    response: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
    if finish:
        candidate["finishReason"] = "STOP"
    if usage is not None:
        prompt = usage.get("input_tokens", 0) + usage.get("cache_read_input_tokens", 0)
        output = usage.get("output_tokens", 0)
        response["usageMetadata"] = {"promptTokenCount": prompt,
                                     "cachedContentTokenCount":
                                         usage.get("cache_read_input_tokens", 0),
                                     "candidatesTokenCount": output,
                                     "totalTokenCount": prompt + output}
    return response


def _calls(calls: list[Call]) -> list[dict[str, Any]]:
    out = []
    for name, arguments in calls:
        if isinstance(arguments, str):
            raise ValueError(f"{name}: the Gemini API has no freeform tools")
        out.append({"functionCall": {"name": name, "args": dict(arguments)}})
    return out


def chunks(pieces: list[str], model: str, calls: list[Call],
           usage: Mapping[str, int]) -> Iterator[dict[str, Any]]:
    """The streamed reply: the text piece by piece, then the calls, the end and the usage."""
    for piece in pieces:
        yield _response(model, [{"text": piece}])
    yield _response(model, _calls(calls) or [{"text": ""}], finish=True, usage=usage)


def whole(model: str, text: str, calls: list[Call], usage: Mapping[str, int]
          ) -> dict[str, Any]:
    """The reply not streamed (`generateContent`)."""
    parts = ([{"text": text}] if text else []) + _calls(calls)
    return _response(model, parts or [{"text": ""}], finish=True, usage=usage)
