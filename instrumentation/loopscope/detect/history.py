"""The per-episode memory detectors read: a bounded window of recent steps plus a few sets.

Work per step is O(window): the window is a deque of ``StepView`` and the episode-wide
aggregates are hash sets and dicts keyed by signature.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final

from .answers import TRANSITIONAL, is_transitional
from .events import Status, StepView
from .limits import (
    MAX_FAILS,
    MAX_OUTPUTS_PER_SIGNATURE,
    MAX_SEEN_FACTS,
    PARALLEL_S,
    READINGS_KEPT,
)
from .task import intended_repeats

TRANSIENT: Final = frozenset(
    ["timeout", "timeouterror", "timed", "temporarily", "unavailable", "overloaded", "throttled", "throttling", "429", "502", "503", "504", "busy", "later", "econnreset", "etimedout", "econnaborted", "gateway"]
)
"""Words of a failure that a plain retry may cure."""
BROUGHT: Final = frozenset({"new_info", "cursor_advance", "state_change"})
"""Progress markers of a call whose answer was new to the episode: it brought the answer."""


@dataclass(slots=True)
class SignatureStats:
    """What one signature has done so far in the episode."""

    calls: int = 0
    first_t: float = 0.0
    last_t: float = 0.0
    changed_t: float = 0.0
    """When its output last changed (the first call counts as a change)."""
    turn_t: float = 0.0
    """When it first answered in the current user turn (a new turn is a new request: a poll
    asked in it waits from then)."""
    last_epoch: int = 0
    """``History.epoch`` at its last call: a write or an edit since makes it a new question."""
    last_output: str = ""
    last_info: int = 0
    """What the last output said (``StepView.info``): equal for outputs with the same facts."""
    last_status: Status = "ok"
    infos: tuple[int, ...] = ()
    """What its answers said (``StepView.info``), each once (the first
    ``MAX_OUTPUTS_PER_SIGNATURE``): an answer in another order or with another request id is
    not a new one. Tuples, not sets or lists, here and in ``fails``: an episode keeps one of
    these per distinct call, and a tuple of numbers is not tracked by the garbage collector
    (full collections stay cheap)."""
    repeats: int = 0
    """Calls in the current no-progress stretch that said what the last one said (the call
    that first brought it included, if it is the stretch's start): a read spin's count,
    however far apart the calls are (a batch of queries replayed in another order)."""
    repeats_from: int = -1
    """``History.stretch_start`` when ``repeats`` was counted: a later progress restarts it."""
    last_brought: bool = False
    """Its last call brought its answer first (``BROUGHT``: the answer was new to the
    episode), rather than returning what was already known."""
    same_output_run: int = 0
    """Answers in a row that said the same as the one before (same output or information)."""
    stuck: str = ""
    """What the last answer says that waiting will not change: a terminal failure ("Failed",
    "CrashLoopBackOff", "exited with code 1") or a progress figure with a status still
    running ("stalled"); ``""`` when neither (``answers.stuck_state``)."""
    same_state_run: int = 0
    """Answers in a row with the same stuck state and the same shape (numbers masked: a
    restart count may move, the state does not; for a stalled poll, its progress figures)."""
    last_shape: str = ""
    ok_info: int = 0
    """The information of its last successful answer (``StepView.info``)."""
    answers_vary: bool = False
    """Its successful answers have told different things, ids and timings aside: each says
    something else (a hand-off's reports), not the same thing with a new id."""
    shape_t: float = 0.0
    """When the shape last changed: for a stalled poll, when its progress figures last
    moved."""
    last_figures: int = 0
    last_quantities: tuple[float, ...] = ()
    advances: int = 0
    """Changes in a row of a poll's answer that moved all its figures one way (a count
    going up: 0, 6.1M, 12.4M; a queue draining): a count on its way, which should go on
    moving. An answer unchanged keeps it; one that moved otherwise ends it."""
    advance_way: int = 0
    fails: tuple[int, ...] = ()
    """Step indexes of the current run of failures (the last ``MAX_FAILS``); an answer of
    "nothing found" counts as a soft failure of the question."""
    fail_paces: tuple[tuple[float, float], ...] = ()
    """(when, the wait it asked for: ``Retry-After``) of each failure in ``fails``."""
    fails_epoch: int = 0
    fail_output: str = ""
    """The last failure (``StepView.failure``: its output, where in the source aside): one
    that comes back after an edit shows the edit changed nothing for this call, and the
    failures keep counting."""
    fail_transient: bool = False
    """The last failure read as transient (a timeout, 503, "try again")."""
    last_index: int = -1
    last_words: int | None = None
    """The hash of the last output's word sketch (``None``: not captured), to tell a changed
    answer from a reworded one without keeping every sketch."""
    last_waiting: bool = False
    """The last output named a status on its way (RUNNING, pending, …) anywhere in it."""
    last_negative: bool = False
    transitional: bool = False
    """The last output read like a status still on its way (RUNNING, PENDING, …)."""


class History:
    """The recent tool steps of one episode, newest last."""

    __slots__ = (
        "_by_sig",
        "_counted",
        "_intended",
        "_recent",
        "asked",
        "changes",
        "default_deadline_s",
        "epoch",
        "fresh_at",
        "idle_messages",
        "seen_facts",
        "seen_loose",
        "seen_outputs",
        "spoke_t",
        "steps",
        "stretch_start",
        "task_type",
        "turn",
        "turn_start",
        "writes",
    )

    def __init__(self, size: int) -> None:
        self.steps: deque[StepView] = deque(maxlen=size)
        self.asked: tuple[str, ...] = ()
        """What the current user turn says (the task too, in the first turn): the repeats
        it asks for are read from it (``intended_repeats``)."""
        self._intended: int | None = None
        self._counted: dict[frozenset[str], int] = {}
        """``intended_repeats`` of this turn by the words counted (a write repeated in a loop
        counts the same words each time: read once)."""
        self.seen_outputs: set[str] = set()
        self.seen_facts: set[int] = set()
        """Every fact an output of the episode has told (``information.facts``)."""
        self.seen_loose: set[str] = set()
        self.fresh_at = -1
        """The last step that asked something not asked before in the episode (loosened
        arguments: ``asked_before``)."""
        self._by_sig: dict[str, SignatureStats] = {}
        self._recent: dict[int, list[StepView]] = {}  # cleared on append
        self.stretch_start = 0
        """Steps from this index on make up the current no-progress stretch."""
        self.turn = 0
        """User turns so far (1 once the task has been given)."""
        self.turn_start = 0
        """The first step of the current user turn."""
        self.spoke_t: float | None = None
        """When the agent last wrote a message (its recorded time): it was working, not
        waiting, until then (``busy_until``)."""
        self.idle_messages = 0
        """Messages in a row, of either side, since the last tool call, that asked nothing,
        told no figure and said little (``monologue.idle``)."""
        self.task_type: str | None = None
        self.default_deadline_s = 0.0
        self.epoch = 0
        self.changes = 0
        """Successful writes and edits that did something not done before in this turn (a
        write repeated with the same arguments is not one)."""
        """Successful writes and edits so far: a failure before one may not repeat after."""
        self.writes: Any = None
        """The episode's ``WriteLedger`` (set by the monitor)."""

    def intended_repeats(self, counted: frozenset[str] = frozenset()) -> int:
        """How many identical calls the current turn asks for (``task.intended_repeats``):
        a count it states ("run it 5 times", "create three identical tickets"), or a
        number of the things ``counted`` names ("6 placeholder reservations"); 1 if none."""
        if self._intended is None:
            self._intended = max((intended_repeats(text) for text in self.asked), default=1)
        if not counted:
            return self._intended
        found = self._counted.get(counted)
        if found is None:
            if len(self._counted) >= READINGS_KEPT:
                self._counted.clear()
            found = self._counted[counted] = max(
                self._intended, *(intended_repeats(text, counted) for text in self.asked))
        return found

    def said(self, asked: tuple[str, ...]) -> None:
        """The current turn now says ``asked``."""
        self.asked = asked
        self._intended = None
        self._counted.clear()

    def in_stretch(self, step: StepView) -> bool:
        """Whether ``step`` is inside the current no-progress stretch."""
        return step.index >= self.stretch_start

    def asked_before(self, step: StepView) -> bool:
        """Whether a completed step already asked this tool the same thing (loosened
        arguments: case, punctuation and spacing ignored)."""
        return step.loose in self.seen_loose

    def in_turn(self, step: StepView) -> bool:
        """Whether ``step`` belongs to the current user turn."""
        return step.index >= self.turn_start

    def __iter__(self) -> Iterator[StepView]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def recent(self, n: int) -> list[StepView]:
        """The last ``n`` steps (fewer at the start), oldest first. Do not modify the list:
        it is shared by every detector until the next ``append``."""
        cached = self._recent.get(n)
        if cached is None:
            if n >= len(self.steps):
                cached = list(self.steps)
            else:
                cached = list(islice(reversed(self.steps), n))
                cached.reverse()
            self._recent[n] = cached
        return cached

    def busy_until(self, t: float, since: float) -> float:
        """When the agent last finished other work before a call started at ``t``: the end of
        the latest step after ``since`` that was not a wait (a ``sleep`` is waiting) and not
        issued with this call (the calls of one model turn start together), or the last
        message it wrote, if later (reading and writing is work); ``since`` when there is
        none. A call asked again after its last answer is waiting only for the time nothing
        else was done."""
        spoke = self.spoke_t
        busy = spoke if spoke is not None and since < spoke <= t else since
        for step in reversed(self.steps):
            if step.t <= since:
                break
            if step.wait or step.start >= t - PARALLEL_S:
                continue
            return max(step.t, busy)
        return busy

    def waited(self, stats: SignatureStats, stated: bool, t: float) -> float:
        """How long an unchanged poll has waited at ``t``: since its first call under an
        explicit limit ("give up after 20 minutes" is the whole operation), else since its
        last change (an estimate or the default is relative to the last progress, not the
        start); in either case not before its first answer in the current user turn (each
        "[heartbeat] check again" asks anew), and nothing at all for its first call in it."""
        if stats.last_index < self.turn_start:
            return 0.0
        return t - max(stats.first_t if stated else stats.changed_t, stats.turn_t)

    def stats(self, signature: str) -> SignatureStats | None:
        """Stats of ``signature``, or ``None`` if it has not been called."""
        return self._by_sig.get(signature)

    def append(self, step: StepView) -> None:
        """Record a completed step and update the aggregates."""
        stats = self._by_sig.get(step.signature)
        if stats is None:
            stats = self._by_sig[step.signature] = SignatureStats(first_t=step.t)
        if stats.calls == 0 or stats.last_index < self.turn_start:
            stats.turn_t = step.t  # (its first answer in this user turn)
        if stats.calls and (
            step.output_hash == stats.last_output
            or (step.info == stats.last_info and step.figures == stats.last_figures)
        ):
            stats.same_output_run += 1  # the same answer, or one that says the same
        else:
            stats.same_output_run = 0
            stats.changed_t = step.t
        stats.stuck = step.stuck
        if stats.stuck and stats.calls and step.shape == stats.last_shape:
            stats.same_state_run += 1
        else:
            stats.same_state_run = 0
            stats.shape_t = step.t
        stats.last_shape = step.shape
        if step.status == "ok":
            if stats.ok_info and stats.ok_info != step.info:
                stats.answers_vary = True
            stats.ok_info = step.info
        if step.kind == "poll" and stats.calls and step.figures != stats.last_figures:
            way = _way(stats.last_quantities, step.quantities)
            stats.advances = stats.advances + 1 if way and way == stats.advance_way else int(
                way != 0)
            stats.advance_way = way
        stats.last_figures = step.figures
        stats.last_quantities = step.quantities
        stats.last_epoch = self.epoch
        if step.status not in ("ok", "blocked"):
            stats.repeats = 0
        elif stats.repeats and stats.repeats_from == self.stretch_start and (
            step.info == stats.last_info
        ):
            stats.repeats += 1
        else:  # a new stretch: the call of this turn that first brought the answer counts
            again = (  # (not a call that only returned it again: "< Prev" back to a list)
                stats.last_brought
                and step.info == stats.last_info
                and stats.last_status == "ok"
                and stats.last_index >= self.turn_start
            )
            stats.repeats, stats.repeats_from = 1 + again, self.stretch_start
        stats.calls += 1
        stats.last_brought = step.progress in BROUGHT
        stats.last_output = step.output_hash
        stats.last_info = step.info
        stats.last_status = step.status
        stats.last_t = step.t
        stats.last_index = step.index
        stats.transitional = is_transitional(step.words)
        words = step.words
        stats.last_words = None if words is None else hash(words)
        stats.last_waiting = words is not None and not TRANSITIONAL.isdisjoint(words)
        stats.last_negative = step.negative
        if step.status in ("error", "timeout") or step.negative:
            failure = step.failure or step.output_hash
            if stats.fails_epoch != self.epoch and (
                step.status != "error" or failure != stats.fail_output
            ):  # (the world changed since: earlier failures may not repeat, unless this one
                # is the same failure, where in the source aside)
                stats.fails = stats.fail_paces = ()
            stats.fails_epoch = self.epoch
            stats.fail_output = failure
            stats.fails = (*stats.fails[-(MAX_FAILS - 1) :], step.index)
            stats.fail_paces = (*stats.fail_paces[-(MAX_FAILS - 1) :], (step.t, step.retry_after))
            stats.fail_transient = step.status == "timeout" or not TRANSIENT.isdisjoint(
                step.words or ()
            )
        elif step.status == "ok":
            stats.fails = stats.fail_paces = ()
        if (
            step.status == "ok"
            and len(stats.infos) < MAX_OUTPUTS_PER_SIGNATURE
            and step.info not in stats.infos
        ):
            stats.infos = (*stats.infos, step.info)
        self.steps.append(step)
        self._recent.clear()
        self.idle_messages = 0  # (a tool call: the conversation acts)
        if step.status != "blocked":
            self.seen_outputs.add(step.output_hash)
            if step.loose not in self.seen_loose:
                self.seen_loose.add(step.loose)
                self.fresh_at = step.index
            if step.facts:
                if len(self.seen_facts) > MAX_SEEN_FACTS:
                    self.seen_facts.clear()  # (bounded memory: a very long run forgets)
                self.seen_facts |= step.facts

    def knows(self, facts: frozenset[int]) -> bool:
        """Whether the episode has seen every one of ``facts`` already (nothing new)."""
        return facts <= self.seen_facts


def _way(before: tuple[float, ...], after: tuple[float, ...]) -> int:
    """1 when every figure of ``after`` is at least the one of ``before`` in its place (the
    same number of them) and one is higher, -1 for the same downward, else 0."""
    if not before or len(before) != len(after):
        return 0
    if all(b >= a for a, b in zip(before, after, strict=True)):
        return 1 if after != before else 0
    if all(b <= a for a, b in zip(before, after, strict=True)):
        return -1
    return 0
