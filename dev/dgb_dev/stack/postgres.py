"""PostgreSQL in the local stack: the machine's Debian cluster, our role and our databases."""

from __future__ import annotations

import os
import shutil
import subprocess

from dgb.config import dev as dev_settings
from dgb_dev.stack.component import Component
from dgb_dev.stack.process import StackError, port_open, wait_until


class Postgres(Component):
    """The machine's PostgreSQL 15 cluster (Debian's pg_ctlcluster), plus our role and databases."""

    name = "postgres"
    marker = "postgres.started-by-us"

    def healthy(self) -> bool:
        return port_open(self.s.pg_host, self.s.pg_port)

    def _cluster(self) -> tuple[str, str]:
        return dev_settings.pg_cluster()

    def up(self) -> str:
        status = "already running"
        if not self.healthy():
            if not self.s.pg_manage_cluster:
                raise StackError(
                    f"postgres: nothing listens on {self.s.pg_host}:{self.s.pg_port} and "
                    "DGB_PG_MANAGE_CLUSTER=0; start your server or unset it."
                )
            if not shutil.which("pg_ctlcluster"):
                raise StackError(
                    "postgres: pg_ctlcluster not found; install Debian's postgresql-15 (see README)."
                )
            ver, name = self._cluster()
            argv = ["pg_ctlcluster", ver, name, "start"]
            options = dev_settings.pg_server_options()  # DGB_PG_SHARED_BUFFERS
            if options:
                argv += ["--", *options]
            res = subprocess.run(argv, capture_output=True, text=True)
            if res.returncode != 0 and "already running" not in (res.stderr + res.stdout):
                raise StackError(f"postgres: pg_ctlcluster {ver} {name} start failed: {res.stderr.strip()}")
            (self.s.state_dir / "run").mkdir(parents=True, exist_ok=True)
            (self.s.state_dir / "run" / self.marker).write_text(f"{ver} {name}\n")
            wait_until(self.healthy, 30, "postgres")
            status = f"started cluster {ver}/{name}" + (f" ({options[-1][3:]})" if options else "")
        self.ensure_roles()
        return status

    def _psql_admin(self, sql: str, db: str = "postgres") -> str:
        argv = ["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        elif os.environ.get("USER") != "postgres":
            argv = ["sudo", "-n", "-u", "postgres", *argv]
        if self.s.pg_port != 5432:
            argv[argv.index("-d") : argv.index("-d")] = ["-p", str(self.s.pg_port)]
        res = subprocess.run(argv, capture_output=True, text=True)
        if res.returncode != 0:
            raise StackError(f"postgres: admin command failed: {res.stderr.strip()}")
        return res.stdout.strip()

    def ensure_roles(self) -> None:
        """Create our role and databases idempotently; keep the role's password in sync."""
        if not self.s.pg_manage_cluster:
            return
        user, pw = self.s.pg_user, self.s.pg_password.replace("'", "''")
        self._psql_admin(
            f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{user}') THEN "
            f"CREATE ROLE \"{user}\" LOGIN PASSWORD '{pw}'; "
            f"ELSE ALTER ROLE \"{user}\" LOGIN PASSWORD '{pw}'; "
            f"END IF; END$$;"
        )
        for db in (self.s.pg_db, self.s.pg_airflow_db):
            ensure_database(self, db)

    def down(self) -> bool:
        marker = self.s.state_dir / "run" / self.marker
        if not marker.exists():
            return False
        ver, name = marker.read_text().split()
        subprocess.run(["pg_ctlcluster", ver, name, "stop"], capture_output=True, text=True)
        marker.unlink(missing_ok=True)
        return True

    def describe(self) -> str:
        return (
            f"postgres {self.s.pg_host}:{self.s.pg_port} db={self.s.pg_db} airflow_db={self.s.pg_airflow_db}"
        )


def ensure_database(pg: Postgres, db: str) -> None:
    exists = pg._psql_admin(f"SELECT 1 FROM pg_database WHERE datname = '{db}'")
    if exists != "1":
        pg._psql_admin(f'CREATE DATABASE "{db}" OWNER "{pg.s.pg_user}"')
