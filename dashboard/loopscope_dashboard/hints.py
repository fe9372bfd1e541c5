"""The hints empty pages give, naming the collector this dashboard really talks to.

A hint that says "point an agent at http://127.0.0.1:4318" is wrong when the collector runs on
another port (``loopscope up --http-port``, ``loopscope dashboard --collector URL``); every
hint takes the address from ``queries.collector_url()`` instead. Reading a snapshot file, the
address is the default one a collector would take.
"""

from __future__ import annotations

from . import queries


def endpoint() -> str:
    """The OTLP/HTTP endpoint agents send to (the collector's reads share its port)."""
    return queries.collector_url()


def demo_command() -> str:
    """The command that sends the scripted demo agents' runs to this collector."""
    return f"`loopscope demo --endpoint {endpoint()}`"


def empty_store() -> str:
    """What to do when the store holds no run yet."""
    return (f"No episodes yet — point an agent at {endpoint()} (`loopscope.instrument()`), "
            f"run {demo_command()} to see scripted agents loop, or load a file on the "
            "**Import** page.")
