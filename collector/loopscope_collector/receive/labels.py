"""A human label as a client sends it to ``POST /api/labels``, validated before it is queued."""

from __future__ import annotations

from ..storage.writes.labels import LABEL_VALUES, Label


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
