"""The lake's data in S3-compatible storage (issue 17): moto's server on loopback, DuckDB's
httpfs from its PyPI package, the catalog in the session's PostgreSQL."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from collector_process import start_collector
from lake_place import Postgres
from otlp_requests import episode_request

from loopscope_collector.reads import read
from loopscope_collector.storage import open_lake
from loopscope_collector.storage.ducklake import Lake

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "loopscope", "AWS_SECRET_ACCESS_KEY": "loopscope-secret",
               "AWS_REGION": "us-east-1"}


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3-compatible server on a free loopback port, with a bucket; its endpoint and
    credentials are in the environment (the collector reads the standard AWS variables)."""
    server = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    if not Path(server).exists():
        pytest.skip("moto_server is not installed (pip install 'moto[server]')")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(name, value)
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        deadline = time.monotonic() + 60
        while True:
            try:
                client.create_bucket(Bucket="traces")
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_lake_on_s3_stores_and_reads(postgres: Postgres, s3: str, tmp_path: Path) -> None:
    catalog = postgres.catalog(postgres.new_database())
    args = ["--lake", catalog, "--lake-data", "s3://traces/lake/"]
    node = start_collector(tmp_path / "c.duckdb", grpc=False, extra=args)
    acked: list[str] = []
    try:
        for repeat in (True, False):
            body, ids = episode_request(6, repeat=repeat)
            assert node.post(body.SerializeToString())[0] == 200
            acked += ids
        served = node.read("summary")[0]
    finally:
        node.stop()
    db = open_lake(Lake.parse(catalog, "s3://traces/lake/"), read_only=True)
    try:
        stored = {row[0] for row in db.cursor().execute("select span_id from spans").fetchall()}
        summary = read(db, "summary")[0]
    finally:
        db.close()
    assert stored == set(acked)
    assert summary == served and summary["tool_calls"] == 12
    import boto3

    keys = [o["Key"] for o in boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
            .list_objects_v2(Bucket="traces", Prefix="lake/")["Contents"]]
    assert any(k.endswith(".parquet") and "/spans/" in k for k in keys)
    assert os.environ["AWS_ENDPOINT_URL"] == s3
