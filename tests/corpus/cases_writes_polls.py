"""Corpus cases: unknown writes, duplicates after success, polls by state, transient retries (issue 16, points 4-6 and 8).

Each builder writes one labelled episode with ``writer.Ep``; ``build_corpus.py`` collects
``CASES`` from this module.
"""

from __future__ import annotations

from writer import registry

CASES, case = registry()
