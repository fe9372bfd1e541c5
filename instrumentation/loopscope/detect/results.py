"""What a call's result says, read into its step before the detectors judge it.

``read_result`` reads the output once (its hash, word sketch and facts, through the monitor's
``readings.Readings``); once the call's kind is known (``call_kinds.judge_by_answer``),
``read_shapes`` reads what the detectors of that kind compare: a write's answer with figures
masked, a failure's shape and where its source is, a poll's progress figures and whatever it
says waiting will not change.
"""

from __future__ import annotations

from .answers import error_shape, figures, progress_figures, quantities, retry_after_s, stuck_state
from .events import StepView, ToolResult
from .fingerprint import output_hash
from .readings import Readings
from .texts import masked, unpositioned


def read_result(step: StepView, result: ToolResult, readings: Readings) -> bool:
    """Read ``result`` into its call's ``step``: its status, time, output (none when blocked:
    the model is shown the earlier result again), hash, word sketch and information. Returns
    whether the output says that nothing was found."""
    text = result.output
    blocked = result.status == "blocked"
    words: frozenset[str] | None = None
    negative = False
    if text is not None and not blocked:
        digest, words, negative = readings.reading_of(text)
        digest = result.output_hash or digest
    else:
        digest = result.output_hash or (output_hash(text) if text is not None else "")
        if blocked:  # the model is shown the earlier result again
            digest, text = step.output_hash or digest, None
    step.output_hash = digest
    step.status = result.status
    if result.t is not None:
        step.t = result.t
    step.words = words
    step.output = text
    if text is not None:
        step.facts = readings.facts_of(text, step.args_text, step.args)
        step.info = hash(step.facts)
    elif not (blocked and step.info):  # (a blocked step says what it said last time)
        step.info = hash(digest)
    return negative


def read_shapes(step: StepView, negative: bool) -> None:
    """Read the shapes of a completed step's output that its kind is judged by; ``negative``:
    the output says that nothing was found (``read_result``)."""
    text = step.output
    kind = step.kind
    if kind == "write" and text is not None and step.status == "ok":
        step.shape = output_hash(masked(text))  # (its answer, figures aside: a redo's)
    if step.status in ("error", "timeout"):
        step.shape = error_shape(text, step.args) if text is not None else step.output_hash
        step.retry_after = retry_after_s(text)
        step.failure = output_hash(unpositioned(text)) if text is not None else step.output_hash
    elif step.status == "ok":
        step.negative = negative
    if kind == "poll" and text is not None and step.status != "blocked":
        step.figures = figures(text)
        step.quantities = quantities(text)
        step.stuck = stuck_state(text, step.words)
        if step.stuck == "stalled" and not step.shape:
            step.shape = progress_figures(text)  # (its lag or log position may move)
        elif step.stuck and not step.shape:
            step.shape = output_hash(masked(text))
