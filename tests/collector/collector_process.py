"""A real collector process on free loopback ports, for the collector tests."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class CollectorProcess:
    """A running ``loopscope collector``."""

    proc: subprocess.Popen[str]
    db: Path
    http_port: int
    grpc_port: int
    token: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def get(self, path: str) -> Any:
        request = urllib.request.Request(self.url + path)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body[:1] in (b"{", b"[") else body.decode()

    def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return self.get(f"/v1/reads/{name}" + (f"?{query}" if query else ""))["rows"]

    def post(self, body: bytes, *, content_type: str = "application/x-protobuf",
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(self.url + "/v1/traces", data=body, method="POST")
        request.add_header("Content-Type", content_type)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def taken(self, body: bytes, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
        """``post`` until the request is not throttled, as an exporter does: a 503 (the queue
        would keep it waiting too long; a 200 comes before the batch is stored, so a client
        sending one request after another can outrun the store) is sent again after a pause.
        Returns the first other answer."""
        while True:
            answer = self.post(body, **kwargs)
            if answer[0] != 503:
                return answer
            time.sleep(0.2)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.stderr.read() if self.proc.stderr else ""


def start_collector(db: Path, *, token: str | None = None, extra: list[str] | None = None,
                    grpc: bool = True, http_port: int | None = None) -> CollectorProcess:
    """Start ``python -m loopscope collector`` and wait until it answers /healthz
    (``http_port``: the port of one stopped before, to restart it).

    A free port is only free until someone binds it: under pytest-xdist another worker's
    process (or an outgoing connection's ephemeral port) may take it between ``free_port()``
    and the collector's bind. A collector that exits because its port is taken is started
    again on new ports, up to five times (a port the caller chose is kept: a restarted
    collector may find its old port still held for a moment)."""
    for attempt in range(5):
        try:
            return _start_once(db, token=token, extra=extra, grpc=grpc, http_port=http_port)
        except _PortTaken:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


class _PortTaken(RuntimeError):
    """The collector exited because a port it was given is taken."""


def _start_once(db: Path, *, token: str | None, extra: list[str] | None, grpc: bool,
                http_port: int | None) -> CollectorProcess:
    http_port, grpc_port = http_port or free_port(), free_port() if grpc else 0
    args = [sys.executable, "-m", "loopscope", "collector", "--db", str(db),
            "--http-port", str(http_port), "--grpc-port", str(grpc_port), *(extra or [])]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("LOOPSCOPE_AUTH_TOKEN", None)
    if token:
        args += ["--auth-token", token]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    collector = CollectorProcess(proc, db, http_port, grpc_port, token)
    deadline = time.monotonic() + 90  # (a lake collector loaded to 20 took over 30 s)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stderr = proc.stderr.read() if proc.stderr else ""
            taken = "port is taken" in stderr or "address already in use" in stderr.lower()
            raise (_PortTaken if taken else RuntimeError)(f"collector exited: {stderr}")
        try:
            collector.get("/healthz")
            return collector
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("collector did not start within 90 s")


def metric_value(text: str, name: str) -> float:
    """The value of the unlabelled sample ``name`` in a /metrics text."""
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert found, f"{name} is not on /metrics"
    return float(found.group(1))


def eventually(check: Callable[[], Any], *, timeout: float = 15.0) -> Any:
    """Poll ``check`` until it returns a truthy value (the store is eventually consistent
    with the network, not with the test's clock); fail with its last value."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout} s; last value: {value!r}")
