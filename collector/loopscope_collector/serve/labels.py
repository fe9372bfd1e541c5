"""``POST /v1/labels``: a human verdict, validated, then written by the pipeline (the
store's only writer); labels feed the metrics.

The body is ``{"episode_id", "span_id" ('' = the episode), "label": "true_loop" |
"false_kill" | "no_loop", "note"}``; a label that is not one is 400 naming the field.
"""

from __future__ import annotations

import json
from typing import Final

from ..pipeline.thread import Pipeline
from ..receive import export
from ..receive.answers import RETRYABLE, status_of
from ..receive.decode import PayloadTooLarge
from ..receive.exchange import UNFRAMED, Exchange
from ..receive.limits import RETRY_AFTER_S
from ..storage.writes.labels import LABEL_VALUES, Label

MAX_LABEL_BYTES: Final = 65536


async def label(ex: Exchange, pipeline: Pipeline, *, drain_limit: int) -> None:
    """Answer ``POST /v1/labels`` once the label is stored (or why it is not)."""
    if not ex.framed:
        await ex.json(411, {"error": UNFRAMED}, close=True)
        return
    try:
        body = await ex.small_body(MAX_LABEL_BYTES)
    except PayloadTooLarge:
        close = not await ex.drain(drain_limit)
        await ex.json(400, {"error": "a label is a JSON object of at most 64 KiB"},
                      close=close)
        return
    try:
        checked = check_label(json.loads(body or b"null"))
    except ValueError as exc:  # json.JSONDecodeError is a ValueError too
        await ex.json(400, {"error": str(exc)})
        return
    except RecursionError:
        await ex.json(400, {"error": "a label is a flat JSON object; this one is nested "
                                     "too deeply to read"})
        return
    try:
        job = pipeline.submit_labels([checked])
        if not await export.stored(job):
            raise TimeoutError(f"spans not stored within {export.ACK_TIMEOUT_S:.0f} s")
        job.wait(0)
    except Exception as exc:  # answered by the one table (``receive.answers``); else 503
        status = status_of(exc) or 503
        if status in RETRYABLE:
            await ex.json(status, {"error": f"not stored, retry later: {exc}"},
                          {"Retry-After": RETRY_AFTER_S})
        else:
            await ex.json(status, {"error": str(exc)})
        return
    await ex.json(200, {"stored": checked})


def check_label(data: object) -> Label:
    """A human label from a client, validated: raises ``ValueError`` naming the bad field.
    ``"label": null`` removes the episode's (or span's) label: the dashboard's undo."""
    if not isinstance(data, dict):
        raise ValueError("a label must be a JSON object")
    episode_id = data.get("episode_id")
    if not isinstance(episode_id, str) or not episode_id:
        raise ValueError("episode_id: required, a non-empty string")
    span_id = data.get("span_id") or ""
    if not isinstance(span_id, str):
        raise ValueError("span_id: must be a string ('' labels the whole episode)")
    if "label" not in data:
        raise ValueError(f"label: required, one of {', '.join(LABEL_VALUES)} (null removes "
                         "the label)")
    label = data["label"]
    if label is not None and label not in LABEL_VALUES:
        raise ValueError(f"label: must be one of {', '.join(LABEL_VALUES)}, or null to remove "
                         f"the label, not {label!r}")
    note = data.get("note")
    if note is not None and not isinstance(note, str):
        raise ValueError("note: must be a string")
    unknown = set(data) - {"episode_id", "span_id", "label", "note"}
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(sorted(unknown))}")
    for name, value in (("episode_id", episode_id), ("span_id", span_id), ("note", note)):
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(f"{name}: a lone surrogate at character {exc.start}, which is "
                                 "not valid Unicode") from None
    return {"episode_id": episode_id, "span_id": span_id, "label": label,
            "note": (note or "")[:2000] or None}
