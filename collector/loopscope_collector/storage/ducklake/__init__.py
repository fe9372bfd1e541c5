"""A DuckLake store: the collector's tables in a lake that N collectors write and any reader
reads — the catalog in PostgreSQL (or any catalog DuckLake takes), the data as Parquet files
in a shared directory or S3-compatible storage (docs/deploy.md).

DuckDB runs in memory and ATTACHes the lake as its default database, so the writers' and the
reads' SQL is the one over a file. DuckLake has no primary keys, no indexes and only literal
defaults: the schema's DDL is read in the lake's dialect and the writers insert what is not
stored yet instead of relying on a key (``dialect``: all the SQL that differs in a lake). Several
collectors commit to one lake concurrently: each commit is a DuckLake transaction, retried by
DuckLake on conflict; a 200 means it committed.

The extensions (ducklake, postgres_scanner, httpfs) come from the PyPI packages
``duckdb-ext-*``, built for DuckDB ``LAKE_DUCKDB`` only: the ``lake`` extra installs them with
that DuckDB, and DuckDB is told to load them from there and never to install or download one.
Without them, or on another DuckDB, opening a lake raises ``LakeError`` saying what to
install; an embedded store needs none of this and runs on any DuckDB the collector extra takes.

S3: ``--lake-data s3://bucket/prefix/`` takes its credentials and endpoint from the standard
variables ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` and
``AWS_ENDPOINT_URL`` (an S3-compatible server such as MinIO: path-style URLs).
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import duckdb

EXTENSIONS: Final = ("ducklake", "postgres_scanner", "httpfs")
"""Loaded into every lake connection, from the ``duckdb-ext-*`` packages."""
LAKE_DUCKDB: Final = "1.4.4"
"""The one DuckDB the ``duckdb-ext-*`` packages are built for, so the one a lake runs on
(pyproject's ``lake`` extra pins it; docs/deploy.md says why)."""
INSTALL: Final = "pip install 'loopscope[lake]'"
ALIAS: Final = "loopscope_lake"
"""The name the lake is attached under (and made the default database)."""
PREFIX: Final = "ducklake:"


class LakeError(RuntimeError):
    """A lake that cannot be used as given (a malformed --lake, a missing extension)."""


@dataclass(frozen=True, slots=True)
class Lake:
    """Where a lake is: ``catalog`` as DuckLake takes it (``ducklake:postgres:dbname=…``),
    and ``data_path``, the directory or ``s3://`` URL of its Parquet files."""

    catalog: str
    data_path: str

    @classmethod
    def parse(cls, catalog: str, data_path: str | None) -> Lake:
        """Check ``--lake`` and ``--lake-data``; a local data directory is made absolute
        (every collector and reader must name the same one).

        Raises:
            LakeError: naming what is wrong.
        """
        if not catalog.startswith(PREFIX) or len(catalog) == len(PREFIX):
            raise LakeError(f"--lake must be a DuckLake catalog such as "
                            f"'ducklake:postgres:dbname=loopscope host=db.internal', not "
                            f"{catalog!r}")
        if not data_path:
            raise LakeError("--lake needs --lake-data: the directory or s3:// URL where the "
                            "lake's Parquet files go")
        if "://" not in data_path:
            folder = Path(data_path).expanduser().resolve()
            if folder.exists() and not folder.is_dir():
                raise LakeError(f"--lake-data {data_path} is a file, not a directory")
            data_path = str(folder) + "/"
        elif not data_path.endswith("/"):
            data_path += "/"
        return cls(catalog, data_path)

    def __str__(self) -> str:
        return f"{_without_password(self.catalog)} (data {self.data_path})"


def _without_password(catalog: str) -> str:
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", catalog)


def extension_directory() -> str:
    """The folder DuckDB loads the packaged extensions from (``duckdb_ext/extensions``),
    checked to hold them for the DuckDB that runs (``v{version}/{platform}/*.duckdb_extension``).

    Raises:
        LakeError: the ``duckdb-ext-*`` packages are not installed, or are built for another
            DuckDB than this one; the message says what to install.
    """
    spec = importlib.util.find_spec("duckdb_ext")
    locations = list(spec.submodule_search_locations or ()) if spec else []
    built_for: set[str] = set()
    for location in locations:
        folder = Path(location) / "extensions"
        if any((folder / f"v{duckdb.__version__}").glob("*/*.duckdb_extension")):
            return str(folder)
        built_for |= {found.parent.parent.name.removeprefix("v")
                      for found in folder.glob("v*/*/*.duckdb_extension")}
    if built_for:
        raise LakeError(f"the lake's extensions installed here (the duckdb-ext-* packages) are "
                        f"built for DuckDB {', '.join(sorted(built_for))}, and this is DuckDB "
                        f"{duckdb.__version__}: a lake needs DuckDB {LAKE_DUCKDB}, which "
                        f"{INSTALL} installs with them (docs/deploy.md)")
    raise LakeError(f"a lake needs DuckDB's ducklake, postgres and httpfs extensions, which are "
                    f"not installed: {INSTALL} installs them with the DuckDB they are built for "
                    f"({LAKE_DUCKDB}; docs/deploy.md)")


def connect(lake: Lake, *, memory_limit: str | None = None,
            read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with ``lake`` attached as its default database (``read_only``:
    for a reader, which commits nothing).

    Raises:
        LakeError: an extension cannot be loaded.
        duckdb.Error: the catalog or the data path cannot be reached.
    """
    config: dict[str, str | bool | int | float | list[str]] = {
        "extension_directory": extension_directory(),
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    if memory_limit:
        config["memory_limit"] = memory_limit
    con = duckdb.connect(":memory:", config=config)
    try:
        for name in EXTENSIONS:
            try:
                con.execute(f"load {name}")
            except duckdb.Error as exc:
                raise LakeError(f"cannot load DuckDB's {name} extension from "
                                f"{config['extension_directory']}: {exc}; {INSTALL} installs "
                                f"it with DuckDB {LAKE_DUCKDB}") from exc
        if lake.data_path.startswith("s3://"):
            _s3_secret(con)
        else:
            Path(lake.data_path).mkdir(parents=True, exist_ok=True)
        mode = ", read_only" if read_only else ""
        con.execute(f"attach {_quote(lake.catalog)} as {ALIAS} "
                    f"(data_path {_quote(lake.data_path)}{mode})")
        con.execute(f"use {ALIAS}")
    except BaseException:
        con.close()
        raise
    return con


def _s3_secret(con: duckdb.DuckDBPyConnection) -> None:
    """An S3 secret from the standard AWS variables (see the module docstring)."""
    options = {"type": "s3", "url_style": "path"}
    for key, variable in (("key_id", "AWS_ACCESS_KEY_ID"), ("secret", "AWS_SECRET_ACCESS_KEY"),
                          ("region", "AWS_REGION")):
        if os.environ.get(variable):
            options[key] = os.environ[variable]
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint"] = parts.netloc
        options["use_ssl"] = "true" if parts.scheme == "https" else "false"
    body = ", ".join(f"{key} {value if key == 'use_ssl' else _quote(value)}"
                     for key, value in options.items())
    con.execute(f"create or replace secret loopscope_s3 ({body})")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
