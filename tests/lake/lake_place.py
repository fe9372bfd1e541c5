"""A real PostgreSQL for the lake tests (Debian's server, started by ``conftest.postgres``),
and a lake's place: its catalog and data directory. A module of its own, not the conftest:
test folders each have a conftest, and ``from conftest import`` finds whichever came first."""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bin_dir() -> Path | None:
    """Debian's server binaries (``/usr/lib/postgresql/VERSION/bin``), or a folder on PATH
    that holds every program the fixture runs."""
    found = shutil.which("pg_ctl")
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    candidates += [str(Path(found).parent)] if found else []
    for folder in candidates:
        if all((Path(folder) / name).exists() for name in PROGRAMS):
            return Path(folder)
    return None


PROGRAMS = ("initdb", "postgres", "createdb", "pg_isready")


def _install() -> Path | None:
    if not shutil.which("apt-get"):
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql"],
                   check=True, env=env, timeout=900)
    return _bin_dir()


@dataclass
class Postgres:
    """A server: its port, its superuser, its folder, and the binaries that made it;
    ``stop`` and ``start`` it again (the catalog database down, then back)."""

    bin: Path
    port: int
    user: str
    run_as: str | None
    root: Path
    proc: subprocess.Popen[bytes] | None = None
    _names = itertools.count()

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin / args[0]), *args[1:]], check=True, text=True,
                              capture_output=True, user=self.run_as, timeout=60)

    def new_database(self) -> str:
        """A database of its own for one test (DuckLake's catalog tables go in it)."""
        name = f"lake{os.getpid()}_{next(self._names)}"
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, name)
        return name

    def catalog(self, database: str) -> str:
        return (f"ducklake:postgres:dbname={database} host=127.0.0.1 port={self.port} "
                f"user={self.user}")

    def start(self) -> None:
        """Start the server on its folder and port; returns once it accepts connections."""
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.root / "data"), "-p", str(self.port),
             "-k", str(self.root), "-c", "listen_addresses=127.0.0.1",
             "-c", "max_connections=200"],
            stdout=subprocess.DEVNULL, stderr=open(self.root / "log", "a"),  # noqa: SIM115
            user=self.run_as)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited: {(self.root / 'log').read_text()}")
            try:
                self.run("pg_isready", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user)
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    self.proc.kill()
                    raise RuntimeError("PostgreSQL did not start within 60 s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server (a fast shutdown: open connections are closed)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@dataclass(frozen=True)
class LakePlace:
    """A fresh lake: its catalog (a new PostgreSQL database) and its data directory."""

    catalog: str
    data: Path

    @property
    def args(self) -> list[str]:
        return ["--lake", self.catalog, "--lake-data", str(self.data)]


@contextlib.contextmanager
def running_postgres() -> Iterator[Postgres]:
    """One PostgreSQL for the session, in a folder of its own under the system's temp
    folder (pytest's are private to root). PostgreSQL refuses to run as root: as root, it
    runs as Debian's ``postgres`` user (else ``nobody``)."""
    folder = _bin_dir() or _install()
    if folder is None:
        pytest.skip("PostgreSQL (initdb, postgres) is not installed and there is no apt-get "
                    "to install Debian's 'postgresql' package")
    root = Path(tempfile.mkdtemp(prefix="loopscope-postgres-"))
    run_as = None
    if os.geteuid() == 0:
        run_as = "postgres" if _has_user("postgres") else "nobody"
        account = pwd.getpwnam(run_as)
        os.chown(root, account.pw_uid, account.pw_gid)
        root.chmod(0o700)
    server = Postgres(folder, _free_port(), "loopscope", run_as, root)
    server.run("initdb", "-D", str(root / "data"), "-U", server.user, "--auth=trust",
               "-E", "UTF8", "--no-sync")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
