"""Runs: the runs an agent left in files and stores, and the views of a run the collector's
commands and the dashboard take.

A library stage (no command line here; ``offline`` holds the commands): rows grouped into
runs (``episodes``, ``otlp_files``), fed to the core as typed steps through the one adapter
(``normalize.steps``) with the agent's numbering of its calls (``stored``: a store's runs to
replay), files read and judged as live (``inputs``), written into a store through the
collector's pipeline (``store``), and Episode records written as spans (``synthetic_spans``).
Episode JSONL records are built only to export a run (a report names a run by its record
without steps and carries its typed steps).
"""
