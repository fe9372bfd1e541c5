"""Labelled agent episodes for every loop shape and its legitimate look-alikes.

Standard library only. Each shape in ``SHAPES`` builds Episode JSONL dicts
(docs/episode-format.md) with a ground-truth label, so a detector can be scored on loop
detection and false kills::

    from loopscope.offline.scenarios import generate, write_jsonl

    write_jsonl("scenarios.jsonl", generate(seed=0, per_shape=3))
"""

from ._episode import Scenario
from .faults import FAULTS, inject_fault
from .registry import SHAPES, generate, write_jsonl

__all__ = ["FAULTS", "SHAPES", "Scenario", "generate", "inject_fault", "write_jsonl"]
