"""Normalize: decoded spans (``spans.SpanRecord``) read into loopscope's rows (``rows``) by the
reader of each instrumentation's spans (``loopscope_spans``, ``genai``, ``frameworks``, sharing
``common``; ``dispatch.normalize_span`` picks one), and rows assembled into episodes
(``assembly``). Pure: no store, no wire, no thread."""
