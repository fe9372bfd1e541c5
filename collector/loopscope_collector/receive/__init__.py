"""Receive: OTLP trace exports in, over HTTP and gRPC, by one export path.

``export`` is the path both transports take (decode, admit, submit to the pipeline, settle)
and the one table of refusals (HTTP status and gRPC code); ``otlp_http`` is ``POST
/v1/traces`` (uvicorn's HTTP/1.1, served by ``serve``), ``grpc_server`` the ``TraceService``
(grpcio). Admission is thin and the collector's own: the memory requests hold (``limits``)
and the HTTP connection cap and deadlines (``connections``); ``exchange`` is one HTTP request
and its answer. The decoders (``decode``, ``decode_json``) turn any failure into the errors
they name (``errors``).
"""
