"""Receive: OTLP over HTTP and gRPC, and the routes the HTTP port serves.

HTTP/1.1 is uvicorn's, with h11 (``http_server`` runs it); the collector's routes are an ASGI
application (``http_app``: OTLP, the named reads, labels, /metrics, /healthz), and the thin
layer of its own on top is admission: the memory requests hold (``limits``) and the
connection cap and deadlines (``connections``). gRPC is grpcio (``grpc_server``). The decoders
of both (``decode``, ``decode_json``) turn any failure into the errors they name
(``errors``); ``labels`` checks a client's label before it is queued.
"""
