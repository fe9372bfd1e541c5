"""The episode builder every scenario module writes through.

A scenario is a short script: a user message, tool calls, assistant turns, a label. The builder
owns everything a script should not have to think about: the clock (``t`` strictly increasing,
0.5-3 s per call, 30 s for a timeout), unique ``tool_call_id`` values, growing token counts,
the cost in ``meta`` and the exact Episode JSONL field names (docs/episode-format.md).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

SOURCE = "authored: loopscope.offline.scenarios"
PRICE_IN_USD = 2.5e-6
PRICE_OUT_USD = 1e-5
CALL_TIMEOUT_S = 30.0
_THOUGHTS = (
    "That narrows it down. Checking the next piece.",
    "Good, that is new information. Next I need the related record.",
    "This does not answer the question yet; looking one level deeper.",
    "Noted. I'll cross-check it against another source before answering.",
    "That fills one gap. One more lookup should settle it.",
)


@dataclass(frozen=True)
class Scenario:
    """One loop shape or legitimate look-alike, and the script that builds its episodes.

    Attributes:
        name: Shape name, also used in ``episode_id`` and ``meta.scenario``.
        kind: The ``label.kind`` every episode of this shape carries.
        loop: The ``label.loop`` every episode of this shape carries.
        task_type: The usual ``task_type``; variants in other domains may differ.
        description: One line for humans.
        build: ``build(rng, variant) -> episode``; deterministic for a given rng state.
    """

    name: str
    kind: str
    loop: bool
    task_type: str
    description: str
    build: Callable[[random.Random, int], dict[str, Any]]


def dumps(value: Any) -> str:
    """The model-visible text of a tool output: strings as-is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def cost_usd(steps: list[dict[str, Any]]) -> float:
    """Price of an episode's tool steps with the fixed scripted-fake price table."""
    total: float = sum(
        s["tokens_in"] * PRICE_IN_USD + s["tokens_out"] * PRICE_OUT_USD
        for s in steps
        if s["type"] == "tool"
    )
    return round(total, 6)


class EpisodeBuilder:
    """Append steps to one episode in the order they happen.

    Args:
        rng: Source of every random choice (timings, token counts).
        shape: Scenario name.
        variant: Variant index.
        task: The user's request; becomes ``task`` and the first user message.
        task_type: One of the Episode format's task types (docs/episode-format.md).
    """

    def __init__(
        self, rng: random.Random, shape: str, variant: int, task: str, task_type: str
    ) -> None:
        self.rng = rng
        self.shape = shape
        self.variant = variant
        self.task = task
        self.task_type = task_type
        self.steps: list[dict[str, Any]] = []
        self.clock = rng.uniform(0.8, 2.5)
        self._context = rng.randint(700, 1500)
        self._calls = 0
        self.user(task)

    def user(self, content: str) -> int:
        """Append a user message and return its index."""
        return self._message("user", content)

    def say(self, content: str) -> int:
        """Append an assistant message (a thought, a plan or the answer); return its index."""
        self.clock += self.rng.uniform(0.8, 3.0)
        return self._message("assistant", content)

    def think(self, p: float = 0.5, texts: Sequence[str] = _THOUGHTS) -> None:
        """With probability ``p``, add a thought from ``texts``; never two turns in a row."""
        if self.steps[-1]["type"] == "tool" and self.rng.random() < p:
            self.say(self.rng.choice(texts))

    def call(
        self,
        tool: str,
        args: dict[str, Any],
        output: Any,
        *,
        kind: str | None = "read",
        status: str = "ok",
        latency: float | None = None,
        **extra: Any,
    ) -> int:
        """Append a tool step and return its index.

        Args:
            tool: Tool name.
            args: Arguments; copied, key order kept.
            output: What the model saw; non-strings are JSON-encoded.
            kind: ``read``, ``write``, ``poll`` or None.
            status: ``ok``, ``error`` or ``timeout``.
            latency: Seconds until the next step may start; default 0.6-3 s, or
                ``CALL_TIMEOUT_S`` plus a little for a timeout. Polls pass their interval.
            **extra: Extra step fields the detector understands (``intent``,
                ``reconciles``, ``found``, ``deadline_s``).
        """
        self._calls += 1
        text = dumps(output)
        tokens_out = self.rng.randint(18, 70) + len(json.dumps(args, ensure_ascii=False)) // 4
        step = {
            "type": "tool",
            "tool": tool,
            "tool_call_id": f"call_{self._calls}",
            "kind": kind,
            "args": copy.deepcopy(args),
            "output": text,
            "status": status,
            "t": round(self.clock, 2),
            "tokens_in": self._context,
            "tokens_out": tokens_out,
            **extra,
        }
        self.steps.append(step)
        self._context += tokens_out + len(text) // 4 + 12
        if latency is None:
            latency = self.rng.uniform(0.6, 3.0)
            if status == "timeout":
                latency += CALL_TIMEOUT_S
        self.clock += latency
        return len(self.steps) - 1

    def finish(
        self, *, outcome: str, loop: bool, kind: str, first_loop_step: int | None, why: str
    ) -> dict[str, Any]:
        """Return the finished episode dict (``episode_id`` without the seed suffix)."""
        return {
            "episode_id": f"scn-{self.shape}-{self.variant}",
            "source": SOURCE,
            "task": self.task,
            "task_type": self.task_type,
            "outcome": outcome,
            "label": {
                "loop": loop,
                "kind": kind,
                "first_loop_step": first_loop_step,
                "why": why,
            },
            "steps": self.steps,
            "meta": {
                "scenario": self.shape,
                "variant": self.variant,
                "model": "scripted-fake",
                "cost_usd": cost_usd(self.steps),
            },
        }

    def _message(self, role: str, content: str) -> int:
        self.steps.append({"type": "message", "role": role, "content": content})
        self._context += len(content) // 4 + 4
        return len(self.steps) - 1
