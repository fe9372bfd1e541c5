"""Offline: the commands that read after the fact, as plug-ins of the SDK's ``loopscope``:
``loopscope analyze`` over OTLP JSON files and into a store (``analyze``), and ``loopscope
calibrate --db/--lake`` over a store's labelled runs (``labelled``). What they run is the
library stage ``runs``."""
