"""The fixed numbers of the detection core: every number a verdict depends on that is not a
``Policy`` threshold, in one place.

``Policy`` holds what a user may tune: how much evidence a loop needs before each action
(thresholds, windows, deadlines, ladders). The numbers here are not that kind. Each one
bounds work or memory per step (how much of a text is read, how much is remembered), or says
what a piece of text is (a status, an echo, a name), or what a recorded time means. Tuning one
would not make the guard stricter or laxer, it would change what the core reads; each is held
by the corpus's loops and look-alikes (tests/corpus), so a change is a change of the detector,
reviewed as code, not a setting. Each docstring says what the number bounds and why it stays
fixed.
"""

from __future__ import annotations

from typing import Final

# Signatures and hashes

HASH_CHARS: Final = 16
"""Hex characters kept from SHA-256 (64 bits, plenty for one episode's calls); fixed because
stored signatures and output hashes must compare across versions."""
JSON_DEPTH: Final = 32
"""How deep a value is canonicalised (deeper parts are ``<too deep>``); fixed because it is
part of a call's signature and bounds the work per call."""
REPR_CHARS: Final = 500
"""A value JSON does not know is described by at most this much of its ``repr``: part of a
call's signature, bounded."""

# Work per step: how much of a text is read

SKETCH_CHARS: Final = 2000
"""Only this much of an output feeds the near-duplicate sketch and its figures: bounded work
per step, the same for every run so outputs compare."""
FACT_CHARS: Final = 4_000
"""Only this much of an output is read for facts (twice what the word sketch reads): bounded
work per step."""
MAX_FACTS: Final = 400
"""Facts kept per output (records of a very long list beyond this are not read): bounded
work and memory per step."""
MAX_ECHOES: Final = 12
"""Argument values masked as echoes in an output, longest first: bounded work per step."""
MAX_QUANTITIES: Final = 16
"""Numbers of a poll's answer compared to tell a count moving toward its end: bounded work
per step (a table of numbers is not a progress figure)."""
CONFIRM_CHARS: Final = 600
"""Only the head of an answer is read for a confirmation (a page that lists "Sent" items
further down confirms nothing): what a confirmation is, not a threshold."""
MESSAGE_CHARS: Final = 20_000
"""Only this much of an assistant message is read for chanting: bounded work per message."""
NUDGE_CHARS: Final = 2_000
"""An automatic nudge is short: a longer user message is always a new intent (and is not
normalised to be compared with the last few); bounded work per message."""
MAX_TEXT: Final = 8_000
"""Longer command lines are not parsed (opaque): the parser is Python, and a 64 KB line (a
``python -c`` script) took 100 ms, inside the guard."""
SHELL_NESTING: Final = 4
"""How deep ``bash -c``, ``ssh``, ``sudo`` … may nest before the command is opaque: bounded
work per command."""
ANSWER_HEAD_CHARS: Final = 500
"""The head of an answer read for "nothing found" or a refusal (a page that says so says it
first; one that lists such words further down is a listing): what those answers are."""
STATUS_CHARS: Final = 2000
"""The head of an answer read for a status, its progress figures, the wait it asks for or an
outcome left unknown: bounded work per step."""
SHOWN_CHARS: Final = 4000
"""The head of a look-up's answer searched for a write's own values: bounded work per step."""
CURSOR_JSON_CHARS: Final = 65536
"""A JSON answer longer than this is not parsed for a next-page cursor: bounded work per
step."""
ARG_DEPTH: Final = 3
"""How deep arguments are walked for the values that name something or that an answer may
echo: bounded work per call (names sit near the top)."""
VALUES_PER_LIST: Final = 20
"""Items of one list in the arguments walked for those values: bounded work per call."""
ARG_CHARS: Final = 200
"""The head of an argument value (or a write's target) that is read and kept: bounded work
and memory per call."""
URL_CHARS: Final = 500
"""The head of an argument value read for a URL's page or offset: bounded work per call."""
COMMAND_CHARS: Final = 300
"""The head of a command line read for a write's program, subcommand and files: bounded work
per call."""
COMMAND_WORDS: Final = 12
"""The words of an argument text read for specific tokens an answer may echo ("Collecting
numpy<2"): bounded work per call."""

# Memory: how much is remembered

READINGS_KEPT: Final = 2048
"""Outputs whose reading (word sketch, facts), arguments' echoes and calls' inferred kinds a
monitor remembers (``readings.Readings``, ``call_kinds.CallKinds``): bounded memory; a
reading forgotten is read again, to the same result."""
MAX_OUTPUTS_PER_SIGNATURE: Final = 8
"""Distinct outputs remembered per signature: enough to tell 'changing' from 'fixed', in
bounded memory."""
MAX_FAILS: Final = 16
"""Failures of one signature remembered (their steps and pace): bounded memory; more than
any error threshold or retry budget needs."""
MAX_SEEN_FACTS: Final = 200_000
"""Facts an episode remembers having seen before it forgets them all: bounded memory for a
very long run."""
MAX_TARGETS: Final = 64
"""Edit targets (and re-run checks) whose edits ``edit_revert`` follows: bounded memory; the
oldest is dropped first."""
ECHO_MESSAGES: Final = 8
"""Assistant messages before the current one an echo is looked for in: bounded memory."""
SAID_KEPT: Final = 16
"""User messages remembered to tell an automatic nudge sent again: bounded memory."""
SENT_KEPT: Final = 8
"""Texts of the last calls remembered to tell a user message that hands one back: bounded
memory."""

# What a piece of text is

ECHO_CHARS: Final = 8
"""Shorter arguments ("main", "prod") are words an error may say for its own reasons, not
echoes of the call: what an echo is."""
ECHO_LINE_CHARS: Final = 16
"""A line of a failure this long, found in an argument, quotes it (``LINE 1: SELECT …``):
what a quoted line is."""
ECHO_LABEL_CHARS: Final = 12
"""The label before a quoted line (``LINE 12``, ``line 3``) is at most this long: what a
label is."""
STATUS_MAX_WORDS: Final = 16
"""A status is short; a longer output that mentions "running" is a table or a document: what
a status is."""
MIN_VALUE_CHARS: Final = 3
"""Argument strings shorter than this (loosened) name nothing ("a", "id"): what a name is."""
MIN_NAMING_NUMBER: Final = 100
"""Numbers in the arguments from this on name something (order ids, store ids); smaller ones
are offsets and limits: what a name is."""
ECHO_TOKEN_CHARS: Final = 5
"""A token of an argument text (not a plain word) this long, found in an answer, echoes the
call: what an echo is."""
COUNTED_VALUE_CHARS: Final = 40
"""Argument values shorter than this give the words a count the task states may count
("receive thirty cartons"): longer ones are prose, not names of things."""
NAMING_CHARS: Final = 6
"""An argument value this long (loosened) names a record (a title, a reference, an email):
what a record's name is."""
FOUND_VALUES: Final = 2
"""A look-up shows the write's record when it shows this many of the write's own values (the
reference and the amount; one may be the customer's card, on any profile): what showing a
record is."""
SUBSTANTIVE_FACTS: Final = 3
"""An answer with at least this many facts is a result set, not a verdict: different
questions that get the same result set back are jitter, not a sweep (issue 16, point 1)."""
COUNT_ADVANCES: Final = 2
"""A poll whose answers moved one way this many times in a row is a count on its way (rows
copied: 0, 6.1M, 12.4M): when it stops moving, it has stalled as a progress figure has."""
SENT_MIN_CHARS: Final = 40
"""A text a call sends is its own words handed back, when a user message repeats it, from this
long (shorter ones, "yes", "continue", are what anyone may say)."""
IDLE_MESSAGES: Final = 7
"""Idle messages in a row (both sides, no tool call) that make a conversation idle talk: a
closing exchange ("Thanks!" / "You're welcome, have a great day!") ends in far fewer."""
IDLE_MAX_WORDS: Final = 40
"""More words than this, a message says more than idle talk does: what idle talk is."""
IDLE_MAX_CHARS: Final = 400
"""Longer than this, a message says more than idle talk does, however few its words (a
message is measured before it is read)."""
CHANT_MIN_CHARS: Final = 60
"""Shorter than this, a message cannot hold three sentences worth chanting: not read."""
CHANT_SHARE: Final = 0.5
"""A message is chanting when at least this share of its sentences are repeats: what a
chant is."""
BLOCK_LINES: Final = 2
"""A message says again what an earlier one said when at least this many of its lines, and at
least half of them, are lines of the earlier one (a plan restated word for word under another
opening sentence)."""

# What a recorded time, or a task's words about time, mean

PARALLEL_S: Final = 0.25
"""Calls that start this close together (but not at the very same recorded time, which means
no timing was recorded) were issued in one model turn: how frameworks record a turn."""
SAME_TIME_S: Final = 1e-6
"""Closer than this is the same recorded time (a recorder that spaces untimed steps a
nanosecond apart, to keep their order, recorded no timing either)."""
UNTIL_GRACE_S: Final = 60.0
"""A check at the stated end ("until noon": the noon check; "for the next hour": the check at
the hour) is still on schedule."""
UNTIL_UNKNOWN_S: Final = 12 * 3600.0
"""How long "check every 15 minutes until noon" may go on when the task does not say what time
it is now."""
MARGIN: Final = 0.5
"""An estimate the task states ("usually takes 10 minutes") gets this share of its upper bound
on top (the user tunes ``Policy.poll_deadline_s`` for polls whose task says nothing)."""
MIN_MARGIN_S: Final = 30.0
"""The least margin an estimate the task states gets on top (see ``MARGIN``)."""
