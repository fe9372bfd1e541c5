"""Every detector, in one list: the policy's detector names and the flags' loop kinds derive
from it.

A new detector is one module (a class with ``name``, ``kinds``, ``rungs`` and its hooks, the
``base.Detector`` protocol), one line here, its row in the README's table and its tests.
"""

from __future__ import annotations

from typing import Final

from .breaker import BREAKERS
from .cursor_stuck import CursorStuck
from .edit_revert import EditRevert
from .exact_repeat import ExactRepeat
from .fuzzy_repeat import FuzzyRepeat
from .monologue import Monologue
from .oscillation import Oscillation
from .output_stagnation import OutputStagnation
from .poll_timeout import PollTimeout
from .repeat_same_error import RepeatSameError
from .state_cycle import StateCycle
from .write_duplicate import WriteDuplicate

DEFAULT_DETECTORS: Final = (
    PollTimeout,
    RepeatSameError,
    ExactRepeat,
    Oscillation,
    StateCycle,
    EditRevert,
    FuzzyRepeat,
    OutputStagnation,
    CursorStuck,
    WriteDuplicate,
    Monologue,
)
"""Every detector, in the order they are consulted. The README's table is checked against it."""

DETECTOR_NAMES: Final = (*(d.name for d in DEFAULT_DETECTORS), *BREAKERS)
"""Every name ``Policy.actions``, ``ladders`` and ``task_ladders`` may use: the detectors and
the two breakers."""

LOOP_KINDS: Final = (*dict.fromkeys(k for d in DEFAULT_DETECTORS for k in d.kinds), *BREAKERS)
"""The ``kind`` a flag names: the label kinds of docs/episode-format.md (what the detectors
declare) plus the two breakers."""
