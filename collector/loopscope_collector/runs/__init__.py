"""Runs: stored and read rows grouped into an agent's runs, and the views of a run the rest
of the collector and the dashboard take: the core's typed steps (through the one adapter,
``normalize.steps``), the agent's numbering of its calls, and the Episode JSONL export.
A library stage (no command, no store): ``offline`` and the dashboard build on it.
"""
