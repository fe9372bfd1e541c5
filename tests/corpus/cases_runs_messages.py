"""Corpus cases: cursors, message loops and long runs (issue 16, points 7, 9 and 10).

Each builder writes one labelled episode with ``writer.Ep``; ``build_corpus.py`` collects
``CASES`` from this module.
"""

from __future__ import annotations

from writer import registry

CASES, case = registry()
