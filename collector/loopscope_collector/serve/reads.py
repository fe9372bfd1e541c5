"""``GET /v1/reads`` lists the named reads; ``GET /v1/reads/{name}?param=value`` runs one.

A read answers JSON ``{"rows": [...]}``, or its rows as one Arrow IPC stream
(``application/vnd.apache.arrow.stream``) to a client whose ``Accept`` prefers it (the
dashboard: its largest reads cost several times less to send and to take in, and their
values arrive as the store holds them, as over a file). 400 names the parameter for one the
read does not take, one given twice, or a value it cannot take (``reads.params``: never a
failed read); 500 when the read fails on the collector's side, 503 while the store cannot be
read; errors are JSON whatever the client accepts. A client can only name a read, never
send SQL.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any
from urllib.parse import parse_qsl

from ..reads import READS, UnknownRead, read_table
from ..reads import read as run_named_read
from ..reads.wire import ARROW_STREAM, prefers_arrow, to_stream
from ..receive.answers import RETRYABLE, status_of
from ..receive.exchange import Exchange, on_thread
from ..receive.limits import RETRY_AFTER_S
from ..storage import Store
from ..storage.errors import kind_of

logger = logging.getLogger(__name__)

async def list_reads(ex: Exchange) -> None:
    await ex.json(200, {"reads": {n: {"params": list(r.params), "types": r.types,
                                      "required": list(r.required), "doc": r.doc}
                                  for n, r in sorted(READS.items())}})


async def named_read(ex: Exchange, name: str, db: Store, pool: Executor) -> None:
    """A named read: 404 / 400 for what the client asked wrong (a parameter the read does
    not take, one given twice, or a value it cannot take, each named), 503 while the store
    cannot be read, 500 for a read that fails on the collector's side."""
    read = READS.get(name)
    if read is None:
        await ex.json(404, {"error": f"no read named {name!r}; reads: "
                                     f"{', '.join(sorted(READS))}"})
        return
    pairs = parse_qsl(ex.scope["query_string"].decode("latin-1"), keep_blank_values=False)
    twice = sorted(key for key, n in Counter(key for key, _ in pairs).items() if n > 1)
    try:
        if twice:
            raise UnknownRead(f"read {name!r}: parameter {', '.join(twice)} given more "
                              "than once")
        params = read.convert(dict(pairs))
    except (UnknownRead, ValueError) as exc:
        await ex.json(400, {"error": str(exc)})
        return
    arrow = prefers_arrow(ex.header(b"accept"))
    work: Callable[[], Any] = (
        functools.partial(_arrow_read, db, name, params) if arrow
        else functools.partial(run_named_read, db, name, params))
    try:
        answer = await on_thread(pool, work)
    except Exception as exc:  # the store cannot be read now (``receive.answers``): 503
        if status_of(exc) in RETRYABLE:
            await ex.json(503, {"error": f"read {name!r}: the store cannot be read now: "
                                         f"{exc}"}, {"Retry-After": RETRY_AFTER_S})
            return
        logger.warning("loopscope collector: read %r failed: %s: %s", name, kind_of(exc), exc)
        await ex.json(500, {"error": f"read {name!r} failed on the collector's side: "
                                     f"{kind_of(exc)}: {exc}"})
        return
    if arrow:
        await ex.answer(200, answer, ARROW_STREAM.encode())
    else:
        await ex.json(200, {"rows": answer})


def _arrow_read(db: Store, name: str, params: dict[str, Any]) -> bytes:
    return to_stream(read_table(db, name, params))
