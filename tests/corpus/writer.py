"""The corpus writer: ``Ep`` writes one labelled episode, ``registry`` collects builders.

``build_corpus.py`` and the ``cases_*.py`` modules beside it write their episodes with these;
standard library only, deterministic (an episode's random details come from a
``random.Random`` seeded by its id).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from typing import Any

SOURCE = "authored: tests/corpus"

# The classes of the corpus (meta.corpus_class), each with loops and look-alikes.
CLASSES: dict[str, str] = {
    "read_spin": "the same read with the same result vs. a few re-reads, then an answer",
    "housekeeping": "a housekeeping call between real progress vs. housekeeping + a stale read",
    "write_identity": "writes judged by identity (user turn, task, key, reconcile), not args",
    "poll": "polls judged by evidence and the task's stated time",
    "error_variation": "the same failure in varying words vs. a fix or a transient failure",
    "jitter_stagnation": "tiny argument edits with the same output vs. a real sweep",
    "monologue": "an agent chanting to itself vs. long or multi-turn text that says new things",
    "edit_revert": "an edit flipped back and forth vs. one revert after a failed test",
    "design_seed": "the six examples of DESIGN.md section 1, a loop and a look-alike each",
    "cursor_pagination": "a cursor that does not advance vs. a long real pagination",
    "read_oscillation": "two reads alternating with the same outputs vs. changing outputs",
    # detection v3 (issue 16): situations from public reports nobody tuned for
    "normalised_output": "no new fact once outputs are normalised (reordered, volatile fields, "
                         "echoed arguments) vs. outputs that really add facts",
    "state_cycle": "a 2-4 call cycle whose outputs recur though no two calls are byte-equal "
                   "vs. a cycle whose state moves on",
    "inferred_kind": "undeclared tools whose kind comes from annotations, HTTP method, name "
                     "or shell command vs. the same shapes doing legitimate work",
    "unknown_write": "a write with an unknown outcome retried before a look-up vs. retries "
                     "that are safe (same key, looked up and absent, clear refusal)",
    "duplicate_after_success": "an identical write after a success vs. the repeats the user "
                               "or the task asks for",
    "poll_state": "polls of a state waiting cannot fix or a stalled progress value vs. "
                  "schedules and progress the task states",
    "cursor_bounds": "a page token, offset or time bound that does not advance vs. one that "
                     "does over many pages",
    "transient_retry": "hammering a transient error or ignoring Retry-After vs. paced "
                       "retries that end in success",
    "message_loop": "repeated replies, restated plans and answers to automatic nudges vs. "
                    "messages that move the work on",
    "long_run": "a loop starting after many healthy steps vs. hundreds of repetitive but "
                "progressing steps",
}
TASK_TYPES = ("lookup", "polling", "coding", "research", "transaction", "other")
LOOP_KINDS = (
    "exact_repeat", "repeat_same_error", "oscillation", "param_jitter", "output_stagnation",
    "monologue", "cursor_stuck", "poll_timeout", "write_duplicate",
)
LEGIT_KINDS = ("poll_legit", "write_retry_legit", "none")

_ID_CHARS = string.ascii_letters + string.digits


def j(obj: Any) -> str:
    """A tool's JSON output as the model sees it."""
    return json.dumps(obj, ensure_ascii=False)


class Ep:
    """One episode being written: steps, a clock and a running context size."""

    def __init__(self, eid: str, cls: str, task: str, task_type: str, *, domain: str,
                 id_style: str | None = None, design_seed: str | None = None) -> None:
        assert eid.startswith("corpus-") and cls in CLASSES and task_type in TASK_TYPES
        assert (cls == "design_seed") == (design_seed is not None)
        self.eid, self.cls, self.task, self.task_type = eid, cls, task, task_type
        self.domain, self.design_seed = domain, design_seed
        self.rng = random.Random(eid)
        self.steps: list[dict[str, Any]] = []
        self.t = 0.0
        self.ctx = self.rng.randint(1400, 4200)  # system prompt + tool schemas
        self.style = id_style or self.rng.choice(("openai", "anthropic", "short"))
        self.calls = 0
        self.user(task)

    # -- clock and ids -------------------------------------------------------------------
    def _tick(self, dt: float | None, lo: float, hi: float) -> float:
        if not self.steps:
            return 0.0
        step = self.rng.uniform(lo, hi) if dt is None else dt
        self.t = round(self.t + max(step, 0.002), 3)  # (calls in one turn: ms apart)
        return self.t

    def _call_id(self) -> str:
        self.calls += 1
        if self.style == "openai":
            return "call_" + "".join(self.rng.choices(_ID_CHARS, k=24))
        if self.style == "anthropic":
            return "toolu_01" + "".join(self.rng.choices(_ID_CHARS, k=22))
        return f"tc_{self.calls:03d}"

    # -- steps -----------------------------------------------------------------------------
    def user(self, text: str, dt: float | None = None) -> int:
        """A user turn; returns its step index."""
        t = self._tick(dt, 9.0, 45.0)
        self.steps.append({"type": "message", "role": "user", "content": text, "t": t})
        self.ctx += len(text) // 4 + 4
        return len(self.steps) - 1

    def say(self, text: str, dt: float | None = None) -> int:
        """An assistant turn; returns its step index."""
        t = self._tick(dt, 1.5, 6.0)
        out = len(text) // 4 + 6
        self.steps.append({"type": "message", "role": "assistant", "content": text, "t": t,
                           "tokens_in": self.ctx, "tokens_out": out})
        self.ctx += out
        return len(self.steps) - 1

    def call(self, tool: str, args: dict[str, Any], output: Any, *, kind: str | None = None,
             status: str = "ok", dt: float | None = None, took: float = 0.0,
             **extra: Any) -> int:
        """A tool call and its result; returns its step index.

        ``t`` is when the call started. ``dt`` is the time since the previous step (a poll
        passes the wait it took); ``took`` is how long the call itself ran (a timeout, a test
        run), added before the next step;
        ``extra`` carries the optional fields a real integration would set
        (``idempotency_key``, ``intent``, ``deadline_s``; ``annotations``, the MCP tool
        annotations such as ``{"readOnlyHint": true}``; ``agent``, which of several agents
        made the call).
        """
        assert kind in (None, "read", "write", "poll") and status in ("ok", "error", "timeout")
        assert set(extra) <= {"idempotency_key", "intent", "deadline_s", "annotations",
                              "agent"}, extra
        text = output if isinstance(output, str) else j(output)
        t = self._tick(dt, 0.7, 3.8)
        out = 14 + len(json.dumps(args, ensure_ascii=False)) // 3 + self.rng.randint(0, 30)
        step = {"type": "tool", "tool": tool, "tool_call_id": self._call_id(), "kind": kind,
                "args": args, "output": text, "status": status, "t": t,
                "tokens_in": self.ctx, "tokens_out": out}
        step.update(extra)
        self.steps.append(step)
        self.ctx += out + max(6, len(text) // 4)
        self.t = round(self.t + took, 3)
        return len(self.steps) - 1

    def parallel(self, calls: list[tuple[str, dict[str, Any], Any]], *,
                 dt: float | None = None, **extra: Any) -> list[int]:
        """Several tool calls the model issued in one turn, (tool, args, output) each: they
        start within a few milliseconds of each other and are recorded in the order their
        results came back. ``extra`` applies to every call. Returns their step indexes."""
        first = self.call(*calls[0], dt=dt, **extra)
        rest = [self.call(tool, args, output, dt=self.rng.uniform(0.002, 0.02), **extra)
                for tool, args, output in calls[1:]]
        return [first, *rest]

    def wait(self, seconds: float) -> None:
        """Time passes with nothing recorded (the agent slept, or a human was away)."""
        self.t = round(self.t + seconds, 3)

    # -- the label ----------------------------------------------------------------------------
    def loop(self, kind: str, first: int, why: str, outcome: str = "failure") -> dict[str, Any]:
        assert kind in LOOP_KINDS and outcome in ("failure", "unknown")
        return self._done(True, kind, first, why, outcome)

    def legit(self, kind: str, why: str, outcome: str = "success") -> dict[str, Any]:
        assert kind in LEGIT_KINDS
        return self._done(False, kind, None, why, outcome)

    def _done(self, loop: bool, kind: str, first: int | None, why: str,
              outcome: str) -> dict[str, Any]:
        assert "\n" not in why and why.strip() == why and len(why) < 220, why
        meta = {"corpus_class": self.cls, "domain": self.domain}
        if self.design_seed:
            meta["design_seed"] = self.design_seed
        return {
            "episode_id": self.eid,
            "source": SOURCE,
            "task": self.task,
            "task_type": self.task_type,
            "outcome": outcome,
            "label": {"loop": loop, "kind": kind, "first_loop_step": first, "why": why},
            "meta": meta,
            "steps": self.steps,
        }


Builder = Callable[[], dict[str, Any]]


def registry() -> tuple[list[Builder], Callable[[Builder], Builder]]:
    """A module's own list of episode builders and the decorator that fills it (file order).

    Each module keeps its own list, so loading ``build_corpus.py`` twice (the format test
    does) never registers a case twice."""
    cases: list[Builder] = []

    def case(fn: Builder) -> Builder:
        cases.append(fn)
        return fn

    return cases, case
