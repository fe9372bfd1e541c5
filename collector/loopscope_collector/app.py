"""``Collector``: the store, the pipeline and both receivers, started and stopped together."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from loopscope.detect import Policy
from loopscope.environment_variables import DEFAULT_GRPC_PORT, DEFAULT_HTTP_PORT

from .alerts.manager import AlertManager
from .alerts.settings import AlertSettings
from .alerts.sinks import build_sink
from .metrics import prometheus
from .metrics.compute import compute_metrics
from .pipeline.thread import Pipeline
from .receive.connections import ConnectionWatch
from .receive.grpc_server import serve_grpc
from .receive.limits import MAX_BODY_BYTES, MAX_INFLIGHT_BYTES, InFlight
from .receive.spool import Spool, replay
from .serve.http_server import CollectorHTTPServer
from .storage import Lake, open_database, open_lake
from .storage.ducklake.housekeeping import DEFAULT_EVERY_S, DEFAULT_KEEP, LakeHousekeeping
from .store_settings import CHECKPOINT_BYTES

if TYPE_CHECKING:
    import grpc

logger = logging.getLogger(__name__)


class Collector:
    """One collector process's parts (its store a DuckDB file at ``db_path``, or ``lake``).
    ``start()`` replays the spool (what a crash left acknowledged and not stored), then
    serves; ``stop()`` drains and closes: receivers first, then the queued spans are stored,
    then the store and the spool are closed.

    ``spool``: the spool's folder (``receive.spool``: requests are acknowledged once written
    there, before their batch is stored); by default ``<db_path>.spool`` for a DuckDB file,
    none for ``:memory:`` or a lake; "" for none (acknowledged at the commit)."""

    def __init__(
        self,
        *,
        db_path: str,
        host: str = "127.0.0.1",
        http_port: int = DEFAULT_HTTP_PORT,
        grpc_port: int = DEFAULT_GRPC_PORT,
        auth_token: str | None = None,
        policy: Policy | None = None,
        max_request_bytes: int = MAX_BODY_BYTES,
        alert_settings: AlertSettings | None = None,
        webhooks: Sequence[str] = (),
        max_inflight_bytes: int = MAX_INFLIGHT_BYTES,
        watch: ConnectionWatch | None = None,
        store_memory: str | None = None,
        lake: Lake | None = None,
        instance: str = "",
        lake_maintain_every_s: float = DEFAULT_EVERY_S,
        lake_keep: str = DEFAULT_KEEP,
        spool: str | None = None,
        checkpoint_bytes: int = CHECKPOINT_BYTES,
    ) -> None:
        if spool is None and lake is None and db_path != ":memory:":
            spool = f"{db_path}.spool"
        self.spool = Spool(spool) if spool else None
        self.replayed = (0, 0)
        """The (requests, spans) the start replayed from the spool."""
        self.alerts = AlertManager(alert_settings, build_sink(webhooks))  # bad URL: ValueError
        self.db = (open_lake(lake, memory_limit=store_memory) if lake is not None
                   else open_database(db_path, memory_limit=store_memory))
        # Collectors on a lake leave spikes to one `loopscope alerts` over the union
        # (alerts.lake): each sees only its share of every service's calls.
        self.judges_alerts = lake is None
        self.pipeline = Pipeline(self.db, policy=policy,
                                 on_batch=self.alerts if self.judges_alerts else None,
                                 instance=instance, checkpoint_bytes=checkpoint_bytes,
                                 housekeeping=LakeHousekeeping(self.db, lake_maintain_every_s,
                                                               lake_keep)
                                 if lake is not None else None)
        self.inflight = InFlight(max(max_inflight_bytes, max_request_bytes))
        try:
            self.http = CollectorHTTPServer(
                (host, http_port), pipeline=self.pipeline, db=self.db, auth_token=auth_token,
                prometheus=lambda: prometheus.render(
                    self.pipeline, alerts=self.alerts.counts(),
                    firing=self.alerts.firing_now(),
                    alert_failures=self.alerts.sink_failures(),
                    alert_steps=self.alerts.steps(), inflight=self.inflight,
                    watch=self.http.watch, quality=lambda: compute_metrics(self.db),
                    spool=self.spool),
                max_body_bytes=max_request_bytes, inflight=self.inflight, watch=watch,
                spool=self.spool,
            )
        except OSError:
            self.db.close()  # the port is taken: release the store for whoever retries
            raise
        self.host = host
        self.grpc_port = grpc_port
        self.auth_token = auth_token
        self.max_request_bytes = max_request_bytes
        self._grpc: grpc.Server | None = None
        self._http_thread: threading.Thread | None = None

    @property
    def http_url(self) -> str:
        """Base URL of the HTTP server (with the port actually bound)."""
        host, port = self.http.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Collector:
        """Start the pipeline and both receivers.

        gRPC starts before HTTP serves, so once ``/healthz`` answers both receivers listen
        (a client or a test that waits on ``/healthz`` never meets a refused gRPC port).
        """
        self.pipeline.start()
        if self.spool is not None:
            self.replayed = replay(self.spool, self.pipeline)
        if self.judges_alerts:
            self.alerts.start_ticker(self.pipeline)
        if self.grpc_port:
            self._grpc = serve_grpc(self.pipeline, self.host, self.grpc_port,
                                    auth_token=self.auth_token, inflight=self.inflight,
                                    max_request_bytes=self.max_request_bytes,
                                    spool=self.spool)
        self._http_thread = self.http.serve_in_thread()
        return self

    def stop(self) -> None:
        """Stop receiving, store what is queued, close the store."""
        if self._grpc is not None:
            self._grpc.stop(grace=2).wait(5)
        if self._http_thread is not None:  # shutdown() waits for a serve loop that never ran
            self.http.shutdown()
        self.http.server_close()
        self.pipeline.stop()
        self.alerts.close()  # after the last batch: its alerts are posted too
        self.db.close()
        if self.spool is not None:
            self.spool.close()
            if self.pipeline.recovered is not None:
                self.spool.follow(self.pipeline.recovered)
            elif left := self.spool.requests():
                logger.warning("loopscope collector: %d acknowledged request(s) not stored "
                               "yet are in the spool %s: a collector started on %s stores "
                               "them", left, self.spool.path, self.db.path)
