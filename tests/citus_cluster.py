"""A local Citus cluster for tests: a coordinator and two workers, three PostgreSQL instances.

`start_cluster` initialises three data directories under a temporary directory, starts
them on loopback ports with Citus preloaded, creates the test database with the `citus`
extension on each, registers the workers with the coordinator, and returns the
coordinator's URL; `Cluster.stop` stops all three. PostgreSQL refuses to run as root, so
as root the server programs run as the `postgres` user. Citus itself is built and
installed by `shared/citus/build.sh` (beside the checkout), which `.ci/run` calls.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CITUS_ENV", "Cluster", "citus_installed", "free_ports", "start_cluster"]

CITUS_ENV = "SESSIONSTORE_TEST_CITUS"
"""Set to 1 to run the PostgreSQL store suite on a local Citus cluster."""


def free_ports(count: int) -> tuple[int, ...]:
    """`count` loopback ports that nothing listens on now (the kernel picks them).

    Fixed ports fail the whole run when anything else holds one of them, such as an
    instance a killed run left behind; asking the kernel avoids that.
    """
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return tuple(sock.getsockname()[1] for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


DATABASE = "sessionstore_test"


def _bin_dir() -> Path:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        raise RuntimeError("pg_config is not on PATH: PostgreSQL's server is not installed")
    out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def citus_installed() -> bool:
    """Whether the Citus extension is installed for the PostgreSQL on PATH."""
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return False
    out = subprocess.run(
        [pg_config, "--sharedir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return (Path(out) / "extension" / "citus.control").is_file()


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@dataclass
class Cluster:
    """Three running instances; `url` is the coordinator's test database."""

    base: Path
    ports: tuple[int, ...]
    data_dirs: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.ports[0]}/{DATABASE}"

    def psql(self, port: int, sql: str, database: str = DATABASE) -> str:
        """Run SQL on one instance and return its output (tuples only, unaligned)."""
        command = [
            str(_bin_dir() / "psql"),
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "postgres",
            "-d",
            database,
            "-c",
            sql,
        ]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout

    def stop(self) -> None:
        """Stop every instance (fast shutdown); leave the data directories to the caller."""
        for data in self.data_dirs:
            subprocess.run(
                _as_server_user(
                    [str(_bin_dir() / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]
                ),
                capture_output=True,
                check=False,
            )


def _start(bin_dir: Path, data: Path) -> None:
    log = data / "server.log"
    started = subprocess.run(
        _as_server_user(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "120", "start"]
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log.is_file() else "(no server log)"
        raise RuntimeError(
            f"PostgreSQL with Citus did not start in {data}: {started.stderr.strip()}\n{tail}"
        )


def start_cluster(
    base: Path, ports: tuple[int, ...] | None = None, *, registered: int | None = None
) -> Cluster:
    """Start a coordinator (the first port) and workers, with Citus, under `base`.

    Without `ports`, three free loopback ports (a coordinator and two workers). The first
    `registered` workers (all by default) are added to the coordinator; the others run,
    ready for `citus_add_node` (a rebalance). When an instance does not start, the error
    carries the end of its server log.
    """
    ports = free_ports(3) if ports is None else ports
    bin_dir = _bin_dir()
    base.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(base, user.pw_uid, user.pw_gid)
    cluster = Cluster(base=base, ports=ports)
    try:
        for port in ports:
            data = base / f"node-{port}"
            cluster.data_dirs.append(data)
            subprocess.run(
                _as_server_user(
                    [
                        str(bin_dir / "initdb"),
                        "-D",
                        str(data),
                        "-U",
                        "postgres",
                        "--auth=trust",
                        "--no-sync",
                        "-E",
                        "UTF8",
                    ]
                ),
                capture_output=True,
                check=True,
            )
            settings = (
                "shared_preload_libraries = 'citus'\n"
                f"port = {port}\n"
                "listen_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{data}'\n"
                "fsync = off\n"
                "synchronous_commit = off\n"
                "full_page_writes = off\n"
                "max_connections = 100\n"
                "shared_buffers = 32MB\n"
                "citus.shard_replication_factor = 1\n"
                # Shards move by logical replication while writes go on (a rebalance).
                "wal_level = logical\n"
                "max_replication_slots = 20\n"
                "max_wal_senders = 20\n"
            )
            with (data / "postgresql.conf").open("a") as conf:
                conf.write(settings)
            _start(bin_dir, data)
        for port in ports:
            cluster.psql(port, f"CREATE DATABASE {DATABASE}", database="postgres")
            cluster.psql(port, "CREATE EXTENSION citus")
        coordinator = ports[0]
        cluster.psql(coordinator, f"SELECT citus_set_coordinator_host('127.0.0.1', {coordinator})")
        workers = ports[1:] if registered is None else ports[1 : 1 + registered]
        for port in workers:
            cluster.psql(coordinator, f"SELECT citus_add_node('127.0.0.1', {port})")
    except BaseException:
        cluster.stop()
        raise
    return cluster
