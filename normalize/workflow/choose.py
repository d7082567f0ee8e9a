"""The `llm` condition: a model picks a state machine's next state.

The model sees the state, how its action ended (status, exit code, the tail
of the output) and the candidate states, and answers with one name. An
answer naming none of them gets one corrective question; a second miss
leaves the pick to the caller (the state machine fails with a clear line).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from normalize.drivers.base import DriverServices, RunContext
from normalize.events import ModelReplied, ModelRequested, Notice
from normalize.task import ActionResult, Task, Usage

OUTPUT_TAIL = 3_000
ATTEMPTS = 2
SYSTEM = ("You route a workflow between its states. Read how the current state's action "
          "ended and answer with the name of the next state, exactly as written, and "
          "nothing else.")


def parse_pick(text: str, targets: list[str]) -> str | None:
    """The target a reply names: the whole answer, its first line, or the only one mentioned."""
    by_lower = {t.lower(): t for t in targets}
    cleaned = text.strip().strip("`'\".!* \n").lower()
    if cleaned in by_lower:
        return by_lower[cleaned]
    first = cleaned.splitlines()[0].strip("`'\".!* :") if cleaned else ""
    first = re.sub(r"^(next state|next|state|answer)\s*[:=-]?\s*", "", first).strip("`'\". ")
    if first in by_lower:
        return by_lower[first]
    named = [t for t in targets if re.search(rf"(?<![\w-]){re.escape(t.lower())}(?![\w-])",
                                             cleaned)]
    return named[0] if len(named) == 1 else None


def _question(state: str, result: ActionResult | None, targets: list[str]) -> str:
    if result is None:
        ended = "The state ran no action."
    else:
        output = (result.output or result.preview or "")[-OUTPUT_TAIL:]
        ended = (f"Its action ended with status {result.status.value}"
                 + (f", exit code {result.exit_code}" if result.exit_code is not None else "")
                 + (f", error: {result.error}" if result.error else "") + ".")
        if output.strip():
            ended += f"\nThe end of its output:\n```\n{output}\n```"
    options = ", ".join(targets)
    return (f"The workflow is in state `{state}`. {ended}\n\n"
            f"Which state comes next? Answer with exactly one of: {options}")


def choose_next(task: Task, ctx: RunContext, services: DriverServices,
                llm: Mapping[str, Any] | None, state: str, result: ActionResult | None,
                targets: list[str]) -> str | None:
    """Ask the model which of `targets` follows `state`; None when it never names one."""
    from normalize.drivers.llm import LLMSettings
    from normalize.providers.base import ModelRequest, close_client, complete
    from normalize.providers.pricing import DEFAULT_TABLE

    settings = LLMSettings.from_config(llm or {})
    if services.model_factory is not None:
        client = services.model_factory(settings.spec, base_url=settings.base_url)
    else:
        from normalize.providers.registry import create_client

        client = create_client(settings.spec, base_url=settings.base_url)
    messages: list[dict[str, Any]] = [{"role": "user",
                                       "content": _question(state, result, targets)}]
    try:
        for attempt in range(1, ATTEMPTS + 1):
            request = ModelRequest(system=SYSTEM, messages=list(messages),
                                   max_tokens=settings.max_tokens,
                                   temperature=settings.temperature)
            chars = len(SYSTEM) + sum(len(str(m["content"])) for m in messages)
            ctx.emit(ModelRequested(turn=task.turn, model=client.model, attempt=attempt,
                                    input_chars=chars))
            reply = complete(client, request, cancel=ctx.cancel)
            usage = reply.usage
            estimate = DEFAULT_TABLE.estimate(reply.spec, usage)
            task.usage.add(Usage(input_tokens=usage.input_tokens,
                                 output_tokens=usage.output_tokens,
                                 cache_read_tokens=usage.cache_read_tokens,
                                 cache_write_tokens=usage.cache_write_tokens,
                                 cost_usd=estimate.usd, requests=1))
            ctx.emit(ModelReplied(turn=task.turn, model=reply.spec, text=reply.text,
                                  thinking=reply.thinking, stop_reason=reply.stop_reason,
                                  input_tokens=usage.input_tokens,
                                  output_tokens=usage.output_tokens,
                                  cost_usd=round(estimate.usd, 8)), durable=True)
            picked = parse_pick(reply.text, targets)
            if picked is not None:
                ctx.emit(Notice(message=f"state {state!r}: the model picked {picked!r}"))
                return picked
            messages += [{"role": "assistant", "content": reply.text},
                         {"role": "user", "content": f"That names none of the states. Answer "
                                                     f"with exactly one of: {', '.join(targets)}"}]
        return None
    finally:
        close_client(client)
