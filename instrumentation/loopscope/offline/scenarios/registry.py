"""The ordered catalogue of shapes, episode generation and JSONL output."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterable
from typing import Any

from . import drift, errors, polling, repeats, writes
from ._episode import Scenario
from .faults import FAULTS, inject_fault

FAULT_TARGETS = ("healthy_lookup", "poll_legit", "cursor_legit")
"""Shapes that ``generate(faults=True)`` also emits once per fault (variant 0)."""


def _shape(build: Callable[[random.Random, int], dict[str, Any]], kind: str, loop: bool,
           task_type: str) -> tuple[str, Scenario]:
    doc = (build.__doc__ or "").strip().splitlines()[0]
    return build.__name__, Scenario(build.__name__, kind, loop, task_type, doc, build)


SHAPES: dict[str, Scenario] = dict(
    [
        _shape(repeats.healthy_lookup, "none", False, "lookup"),
        _shape(repeats.read_spin, "exact_repeat", True, "lookup"),
        _shape(repeats.window_repeat, "exact_repeat", True, "lookup"),
        _shape(errors.repeat_same_error, "repeat_same_error", True, "transaction"),
        _shape(drift.fuzzy_repeat, "param_jitter", True, "lookup"),
        _shape(drift.fuzzy_lookalike, "none", False, "lookup"),
        _shape(drift.oscillation, "oscillation", True, "lookup"),
        _shape(drift.param_jitter, "param_jitter", True, "coding"),
        _shape(drift.output_stagnation, "output_stagnation", True, "lookup"),
        _shape(polling.poll_legit, "poll_legit", False, "polling"),
        _shape(polling.poll_timeout, "poll_timeout", True, "polling"),
        _shape(polling.poll_exempt, "none", False, "polling"),
        _shape(polling.cursor_stuck, "cursor_stuck", True, "lookup"),
        _shape(polling.cursor_legit, "none", False, "lookup"),
        _shape(writes.write_timeout_reconciled, "write_retry_legit", False, "transaction"),
        _shape(writes.write_timeout_found, "none", False, "transaction"),
        _shape(writes.write_duplicate, "write_duplicate", True, "transaction"),
        _shape(writes.intended_duplicate, "none", False, "transaction"),
        _shape(drift.monologue, "monologue", True, "lookup"),
        _shape(repeats.budget_runaway, "none", False, "research"),
        _shape(repeats.seed000_reordered, "exact_repeat", True, "lookup"),
        _shape(repeats.seed001_long_healthy, "none", False, "coding"),
        _shape(repeats.seed001_repeated_read, "exact_repeat", True, "coding"),
        _shape(errors.vague_error_retry, "repeat_same_error", True, "other"),
    ]
)
"""Every shape, in catalogue order; ``description`` is the first line of the build docstring."""


def generate(
    *,
    seed: int = 0,
    per_shape: int = 2,
    shapes: Iterable[str] | None = None,
    faults: bool = True,
) -> list[dict[str, Any]]:
    """Build labelled episodes, deterministically for ``seed``.

    Args:
        seed: Every episode's rng is seeded from (seed, shape, variant), so an episode does not
            depend on which other shapes were asked for.
        per_shape: Variants 0..per_shape-1 of each shape.
        shapes: Shape names, default all of ``SHAPES`` in order.
        faults: Also emit variant 0 of each ``FAULT_TARGETS`` shape (when selected) once per
            fault in ``FAULTS``.

    Returns:
        Episode dicts with ids ``scn-<shape>-<variant>-s<seed>[-<fault>]``.

    Raises:
        ValueError: A shape name is not in ``SHAPES``.
    """
    names = list(SHAPES) if shapes is None else list(shapes)
    for name in names:
        if name not in SHAPES:
            raise ValueError(f"unknown shape {name!r}; valid shapes: {', '.join(SHAPES)}")
    episodes = [_build(name, variant, seed) for name in names for variant in range(per_shape)]
    if faults:
        for name in (n for n in FAULT_TARGETS if n in names):
            base = _build(name, 0, seed)
            episodes.extend(
                inject_fault(base, fault, random.Random(f"{seed}:{name}:{fault}"))
                for fault in FAULTS
            )
    return episodes


def _build(name: str, variant: int, seed: int) -> dict[str, Any]:
    episode = SHAPES[name].build(random.Random(f"{seed}:{name}:{variant}"), variant)
    episode["episode_id"] += f"-s{seed}"
    episode["meta"]["seed"] = seed
    return episode


def write_jsonl(path: str | os.PathLike[str], episodes: Iterable[dict[str, Any]]) -> int:
    """Write ``episodes`` to ``path``, one JSON object per line (UTF-8); return the count."""
    count = 0
    with open(path, "w", encoding="utf-8") as f:
        for episode in episodes:
            f.write(json.dumps(episode, ensure_ascii=False) + "\n")
            count += 1
    return count
