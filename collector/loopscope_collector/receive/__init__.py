"""Receive: OTLP over HTTP (``http_server``, which also serves the named reads, labels and
/metrics) and gRPC (``grpc_server``), the decoders of their bodies (``decode``, ``decode_json``)
and the errors they name (``errors``), the limits on what one process takes in (``limits``),
and a client's label checked before it is queued (``labels``)."""
