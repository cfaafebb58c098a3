"""The Celery broker of ``DGB_EXECUTOR=celery``: Debian's redis-server on loopback, and the
settings that point Airflow's CeleryExecutor at it."""

from __future__ import annotations

import shutil
import socket
import urllib.parse
from pathlib import Path

from dgb.config import Settings
from dgb.config import dev as dev_settings
from dgb_dev.stack.component import ManagedProcess
from dgb_dev.stack.process import StackError


def celery_env(settings: Settings) -> dict[str, str]:
    """Airflow settings for CeleryExecutor: the local Redis broker, results in the Airflow
    metadata database, the workers' concurrency."""
    s = settings
    password = urllib.parse.quote(dev_settings.redis_password(s.state_dir), safe="")
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": f"redis://:{password}@127.0.0.1:{dev_settings.redis_port()}/0",
        "AIRFLOW__CELERY__RESULT_BACKEND": (
            f"db+postgresql://{s.pg_user}:{s.pg_password}@{s.pg_host}:{s.pg_port}/{s.pg_airflow_db}"
        ),
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": dev_settings.celery_concurrency(),
    }


class Redis(ManagedProcess):
    """The Celery broker: Debian's redis-server on loopback, password from the local secrets,
    no persistence (queued task messages are re-sent by the scheduler after a restart)."""

    name = "redis"
    start_timeout = 30.0

    @property
    def port(self) -> int:
        return dev_settings.redis_port()

    @property
    def data_dir(self) -> Path:
        return self.s.state_dir / "redis"

    def _binary(self) -> str:
        found = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin:/usr/sbin")
        if not found:
            raise StackError(
                "redis: redis-server is not installed (EXECUTOR=celery needs it): "
                "apt-get install redis-server"
            )
        return found

    def prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "redis.conf"  # the password stays out of the process list
        password = dev_settings.redis_password(self.s.state_dir)
        conf.write_text(
            f"bind 127.0.0.1\nport {self.port}\nprotected-mode yes\ndaemonize no\n"
            f'save ""\nappendonly no\ndir {self.data_dir}\nrequirepass {password}\n',
            encoding="utf-8",
        )
        conf.chmod(0o600)

    def argv(self) -> list[str]:
        return [self._binary(), str(self.data_dir / "redis.conf")]

    def healthy(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as sock:
                sock.sendall(f"AUTH {dev_settings.redis_password(self.s.state_dir)}\r\nPING\r\n".encode())
                reply = b""
                while b"PONG" not in reply and len(reply) < 512:
                    chunk = sock.recv(256)
                    if not chunk:
                        break
                    reply += chunk
        except OSError:
            return False
        return b"+PONG" in reply

    def describe(self) -> str:
        return f"redis (Celery broker) 127.0.0.1:{self.port}"
