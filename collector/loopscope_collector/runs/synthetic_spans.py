"""Episodes as spans shaped like loopscope's own, so Episode JSONL can be stored or sent.

``loopscope analyze --db`` stores an Episode JSONL run through the collector's pipeline as
synthetic spans: one ``invoke_agent`` root, one ``execute_tool`` span per tool step and one
``message`` span per message, with the attributes the collector reads. The dashboard's Import page posts the same spans to a live
collector. Kept apart from ``analyze`` (the command's plug-in) and ``store`` (the store
they are written to) because turning an episode into spans is a concept of its own. Trace and
span ids are derived from the episode id and step index, so re-running stores nothing twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

from loopscope import conventions as c
from loopscope.detect.episode_records import EpisodeRecord
from loopscope.detect.events import Decision
from loopscope.detect.fingerprint import canonical_json, output_hash, output_text
from loopscope.detect.policy import Policy
from loopscope.detect.replay import replay

from ..normalize.spans import SpanRecord

__all__ = ["episode_spans"]

SCOPE: Final = "loopscope.offline"


def _hex(*parts: object, size: int) -> str:
    text = "\x00".join(str(p) for p in (SCOPE, *parts))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[: 2 * size]
    return digest if digest.strip("0") else "1".rjust(2 * size, "0")


def episode_spans(
    episode: EpisodeRecord, *, service: str, policy: Policy | None = None, base_ns: int = 0
) -> list[SpanRecord]:
    """An Episode as spans shaped like loopscope's own: one ``invoke_agent`` root, one
    ``execute_tool`` span per tool step and one ``message`` span per message, with the
    attributes the collector reads.

    Trace and span ids are derived from the episode id and the step index, so storing the
    same episode again stores nothing new. Step ``t`` (seconds) is added to ``base_ns``, or
    used as it is when it already looks like a Unix time; start times strictly increase, so
    the collector orders the calls as the episode lists them.
    """
    policy = policy or Policy()
    guard = replay(episode, policy).calls  # what an agent's guard would have put on each span
    trace_id = _hex(episode.episode_id, size=16)
    root_id = _hex(episode.episode_id, "root", size=8)
    resource = {"service.name": service, "telemetry.sdk.name": SCOPE}
    spans: list[SpanRecord] = []
    clock: int | None = None
    tokens_in = tokens_out = turns = calls = 0
    for index, step in enumerate(episode.steps):
        t = step.get("t")
        at = base_ns if clock is None else clock + 1
        if isinstance(t, int | float) and not isinstance(t, bool):
            at = int(t * 1e9) if t > 1e9 else base_ns + int(t * 1e9)
        clock = at if clock is None else max(clock + 1, at)
        tokens_in += _int(step.get("tokens_in"))
        tokens_out += _int(step.get("tokens_out"))
        if step.get("type") != "tool":
            turns += step.get("role") == "assistant"
            spans.append(_message_span(episode, step, index, trace_id, root_id, clock,
                                       resource))
            continue
        calls += 1
        spans.append(_tool_span(episode, step, index, calls, policy, trace_id, root_id, clock,
                                resource, guard.get(index)))
    attributes: dict[str, Any] = {
        c.GEN_AI_OPERATION_NAME: c.OP_INVOKE_AGENT,
        c.EPISODE_ID: episode.episode_id,
        c.OUTCOME: episode.outcome or "unknown",
        c.TOOL_CALLS: calls,
        c.MODEL_TURNS: turns,
        c.GEN_AI_USAGE_INPUT_TOKENS: tokens_in,
        c.GEN_AI_USAGE_OUTPUT_TOKENS: tokens_out,
    }
    attributes.update(c.label_attributes(episode.label))
    if episode.task_type:
        attributes[c.TASK_TYPE] = episode.task_type
    if episode.task:
        attributes[c.TASK] = episode.task[:4000]
    if episode.cost_usd is not None:
        attributes[c.COST_USD] = episode.cost_usd
    model = episode.meta.get("model")
    if isinstance(model, str) and model:
        attributes[c.GEN_AI_REQUEST_MODEL] = model
    start = min(s.start_ns for s in spans) if spans else base_ns
    end = (clock if clock is not None else base_ns) + 1
    spans.insert(0, SpanRecord(trace_id, root_id, "", c.OP_INVOKE_AGENT, start, end,
                               kind=1, attributes=attributes, resource=resource,
                               scope_name=SCOPE))
    return spans


def _message_span(
    episode: EpisodeRecord, step: Mapping[str, Any], index: int, trace_id: str, root_id: str,
    start_ns: int, resource: dict[str, Any],
) -> SpanRecord:
    role = str(step.get("role") or "")
    content = str(step.get("content") or "")
    attributes: dict[str, Any] = {
        c.EPISODE_ID: episode.episode_id,
        c.MESSAGE_ROLE: role,
        c.MESSAGE_CONTENT: content,
        c.MESSAGE_HASH: output_hash(content),
        c.STEP: index,
    }
    for key, name in (("tokens_in", c.GEN_AI_USAGE_INPUT_TOKENS),
                      ("tokens_out", c.GEN_AI_USAGE_OUTPUT_TOKENS)):
        if _int(step.get(key)):
            attributes[name] = _int(step.get(key))
    return SpanRecord(trace_id, _hex(episode.episode_id, index, size=8), root_id,
                      f"{c.OP_MESSAGE} {role}", start_ns, start_ns, kind=1,
                      attributes=attributes, resource=resource, scope_name=SCOPE)


def _tool_span(
    episode: EpisodeRecord, step: Mapping[str, Any], index: int, call: int, policy: Policy,
    trace_id: str, root_id: str, start_ns: int, resource: dict[str, Any],
    guard: tuple[Decision, Decision] | None,
) -> SpanRecord:
    tool = str(step["tool"])
    args = step.get("args")
    args_text = canonical_json({} if args is None else args, exclude=policy.volatile_for(tool))
    before = guard[0] if guard is not None else None
    output = step.get("output")
    shown = None if output is None else output_text(output)
    recorded = step.get("output_hash") if isinstance(step.get("output_hash"), str) else ""
    status = step.get("status") or "ok"
    intent = (before.intent if before else None) or step.get("intent")
    deadline = (before.deadline_s if before else None) or step.get("deadline_s")
    reconciles = step.get("reconciles")
    key = step.get("idempotency_key")
    attributes: dict[str, Any] = {
        **c.tool_span_attributes(
            tool=tool, episode_id=episode.episode_id, step=index, call=call,
            signature=before.signature if before is not None else "", args_text=args_text,
            arguments=args_text, call_id=str(step.get("tool_call_id") or "") or None,
            kind=step.get("kind") or None,
            turn=before.turn if before is not None else None,
            deadline_s=float(deadline) if isinstance(deadline, int | float) else None,
            deadline_stated=before.deadline_stated if before is not None and before.deadline_s
            else step.get("deadline_stated") is not False,
            intent=intent if isinstance(intent, str) else None,
            reconciles=reconciles if isinstance(reconciles, str) else None,
            found=step.get("found") if isinstance(step.get("found"), bool) else None,
            idempotency_key=key if isinstance(key, str) else None),
        **c.tool_result_attributes(status=status, output_hash=recorded or output_hash(
            shown or ""), output=shown, result=shown),
    }
    for key, name in (("tokens_in", c.GEN_AI_USAGE_INPUT_TOKENS),
                      ("tokens_out", c.GEN_AI_USAGE_OUTPUT_TOKENS)):
        if _int(step.get(key)):
            attributes[name] = _int(step.get(key))
    failed = status in ("error", "timeout")
    return SpanRecord(
        trace_id, _hex(episode.episode_id, index, size=8), root_id,
        f"{c.OP_EXECUTE_TOOL} {tool}", start_ns, start_ns, kind=1,
        status_code=2 if failed else 0,
        status_message=(shown or status)[:200] if failed else "",
        attributes=attributes, resource=resource, scope_name=SCOPE,
    )


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
