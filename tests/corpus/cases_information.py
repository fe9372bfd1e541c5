"""Corpus cases: progress as new information, cycles by state, kinds without a declaration (issue 16, points 1-3).

Each builder writes one labelled episode with ``writer.Ep``; ``build_corpus.py`` collects
``CASES`` from this module.
"""

from __future__ import annotations

from writer import registry

CASES, case = registry()
