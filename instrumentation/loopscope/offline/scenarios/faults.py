"""Fault injection: the tool-side failures to rehearse before production does.

Each fault takes a finished episode and returns a changed copy whose label is still true:
a timed-out read followed by one successful retry, two different calls that happen to return
the same text, an error message that explains nothing. None of them turns a legitimate run into
a loop; when steps are inserted before ``first_loop_step`` the index moves with them.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from ._episode import CALL_TIMEOUT_S, cost_usd
from .errors import VAGUE_ERROR

FAULTS = ("timeout", "duplicate_return", "vague_error")
FAULT_TIMEOUT_OUTPUT = "Timeout: no response within 30s"


def inject_fault(episode: dict[str, Any], fault: str, rng: random.Random) -> dict[str, Any]:
    """Return a copy of ``episode`` with ``fault`` injected; ``episode`` is not modified.

    Args:
        episode: An Episode JSONL dict, e.g. from ``generate``.
        fault: One of ``FAULTS``.
            ``timeout``: an ok read times out ("Timeout: no response within 30s") and is
            retried once right after with its original output; later steps move 30 s on.
            ``duplicate_return``: a read returns the output of an earlier, different read
            (loop-free episodes only).
            ``vague_error``: one error message becomes "error: something went wrong" at every
            step that showed it; with no error in the episode, an ok read fails that way and
            is retried once.
        rng: Chooses the step to change.

    Returns:
        The new episode; ``episode_id`` gets ``-<fault>`` appended, ``meta`` gets ``fault`` and
        ``fault_step`` (index of the changed step) and a recomputed ``cost_usd``.

    Raises:
        ValueError: Unknown fault, or the episode has no step the fault can apply to.
    """
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; valid faults: {', '.join(FAULTS)}")
    new = copy.deepcopy(episode)
    if fault == "timeout":
        index = _fail_and_retry(new, rng, "timeout", FAULT_TIMEOUT_OUTPUT, CALL_TIMEOUT_S)
    elif fault == "duplicate_return":
        index = _duplicate_return(new, rng)
    else:
        index = _vague_error(new, rng)
    new["episode_id"] = f"{new['episode_id']}-{fault}"
    new.setdefault("meta", {}).update(
        fault=fault, fault_step=index, cost_usd=cost_usd(new["steps"])
    )
    return new


def _reads(episode: dict[str, Any]) -> list[int]:
    """Ok read steps a fault may touch: before the loop, not paging, not between two polls."""
    steps = episode["steps"]
    end = episode["label"]["first_loop_step"] if episode["label"]["loop"] else len(steps)
    polls = [i for i, s in enumerate(steps) if s["type"] == "tool" and s["kind"] == "poll"]
    return [
        i
        for i, s in enumerate(steps[:end])
        if s["type"] == "tool"
        and s["kind"] == "read"
        and s["status"] == "ok"
        and "cursor" not in s["args"]
        and '"next_cursor"' not in s["output"]
        and not (polls and polls[0] < i < polls[-1])
    ]


def _fail_and_retry(
    episode: dict[str, Any], rng: random.Random, status: str, output: str, wait_s: float
) -> int:
    candidates = _reads(episode)
    if not candidates:
        raise ValueError(f"{episode['episode_id']}: no ok read step before the loop to fail")
    index = rng.choice(candidates)
    steps = episode["steps"]
    original = steps[index]
    shift = round(wait_s + rng.uniform(0.5, 2.0), 2)
    retry = {
        **copy.deepcopy(original),
        "tool_call_id": f"{original['tool_call_id']}_retry",
        "t": round(original["t"] + shift, 2),
        "tokens_in": original["tokens_in"] + 24,
    }
    steps[index] = {**original, "status": status, "output": output}
    for step in steps[index + 1 :]:
        if "t" in step:
            step["t"] = round(step["t"] + shift, 2)
    steps.insert(index + 1, retry)
    label = episode["label"]
    if label["loop"] and label["first_loop_step"] > index:
        label["first_loop_step"] += 1
    return index


def _signature(step: dict[str, Any]) -> str:
    return str(step["tool"]) + json.dumps(step["args"], sort_keys=True, ensure_ascii=False)


def _duplicate_return(episode: dict[str, Any], rng: random.Random) -> int:
    if episode["label"]["loop"]:
        raise ValueError(
            f"{episode['episode_id']}: duplicate_return applies to loop-free "
            "episodes only; on a loop it would move where the loop shows"
        )
    steps = episode["steps"]
    reads = _reads(episode)
    pairs = [
        (i, j)
        for i in reads
        for j in reads
        if i < j
        and _signature(steps[i]) != _signature(steps[j])
        and steps[i]["output"] != steps[j]["output"]
    ]
    same_tool = [(i, j) for i, j in pairs if steps[i]["tool"] == steps[j]["tool"]]
    if not pairs:
        raise ValueError(f"{episode['episode_id']}: needs two different ok reads")
    source, target = rng.choice(same_tool or pairs)
    steps[target]["output"] = steps[source]["output"]
    return target


def _vague_error(episode: dict[str, Any], rng: random.Random) -> int:
    steps = episode["steps"]
    messages = sorted(
        {
            s["output"]
            for s in steps
            if s["type"] == "tool" and s["status"] == "error" and s["output"] != VAGUE_ERROR
        }
    )
    if not messages:
        return _fail_and_retry(episode, rng, "error", VAGUE_ERROR, 0.0)
    message = rng.choice(messages)
    hits = [i for i, s in enumerate(steps) if s["type"] == "tool" and s["output"] == message]
    for i in hits:
        steps[i]["output"] = VAGUE_ERROR
    return hits[0]
