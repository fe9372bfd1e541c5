"""Serve: the collector's HTTP port, and what it serves beside OTLP ingest.

``http_server`` runs uvicorn (h11) on a thread of its own; ``app`` is its ASGI application,
which checks every request's head and bearer token and routes it: ``POST /v1/traces`` to the
OTLP/HTTP receiver (``receive.otlp_http``), the named reads (``reads``), human labels
(``labels``), ``/metrics`` and ``/healthz`` to this stage.
"""
