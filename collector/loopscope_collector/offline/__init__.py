"""Offline: after the fact, ``loopscope analyze`` over OTLP JSON files and stores
(``analyze``), the files read and grouped into runs (``otlp_files``), judged through the
collector's own pipeline into a store (``store``), and Episode records written as spans
(``synthetic_spans``)."""
