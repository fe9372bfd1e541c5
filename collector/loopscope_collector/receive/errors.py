"""The errors an OTLP trace export can fail to decode with, each with its HTTP status.

Both halves of the decoder raise them: ``decode`` (the entry points, decompression and the
protobuf path) and ``decode_json`` (the OTLP JSON path). They live in this small module of
their own so that ``decode`` can import ``decode_json`` without a cycle; import them from
``decode``, which is their public home.
"""

from __future__ import annotations

__all__ = [
    "AdmissionError",
    "DecodeError",
    "PayloadTooLarge",
    "UnsupportedEncoding",
    "UnsupportedMediaType",
]


class AdmissionError(RuntimeError):
    """Admission refused a request while it was being decoded (``limits.Busy``): the
    collector's state, not the body's fault, so it passes through ``decode.decoding``."""


class DecodeError(ValueError):
    """The body is not a valid OTLP trace export; the message says what and where (HTTP 400)."""

    http_status = 400

    def __init__(self, message: str, *, spans: int = 0) -> None:
        super().__init__(message)
        self.spans = spans
        """How many spans the refused request held, when its body was read far enough to
        count them (a span the store cannot hold, a bad id); 0 when it was not (a body that
        does not parse, is too large or has an unsupported type). Given here, not set on an
        error held in a local before raising it: a local that holds the exception its own
        frame raises is a reference cycle (frame, exception, traceback, frame) that keeps
        every frame's locals (the body, the parsed message) until a full garbage
        collection."""


class UnsupportedMediaType(DecodeError):
    """The Content-Type is missing or not one we read (HTTP 415)."""

    http_status = 415


class UnsupportedEncoding(DecodeError):
    """The Content-Encoding is not gzip, deflate or identity (HTTP 415)."""

    http_status = 415


class PayloadTooLarge(DecodeError):
    """The body, after decompression, is larger than the limit (HTTP 413)."""

    http_status = 413
