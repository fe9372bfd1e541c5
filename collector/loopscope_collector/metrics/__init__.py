"""Metrics: the four metrics of a store (``compute``, as docs/metrics.md defines them), the
``loopscope metrics`` and ``loopscope export`` commands (``cli``), and the collector's own
counters in the Prometheus text format (``prometheus``)."""
