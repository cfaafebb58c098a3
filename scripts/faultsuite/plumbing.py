"""The fault suite's plumbing: the progress log, bounded waits, a PostgreSQL connection that
survives PostgreSQL's restart, and JSON over loopback HTTP (the local site's control API)."""

from __future__ import annotations

import json
import sys
import time
import urllib.request


def log(msg: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Timeout(RuntimeError):
    pass


def wait_for(check, timeout: float, what: str, every: float = 1.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except Exception as exc:
            value = None
            last = exc
        else:
            last = None
        if value:
            return value
        if time.monotonic() >= deadline:
            raise Timeout(
                f"{what}: not reached within {timeout:.0f}s" + (f" (last error: {last})" if last else "")
            )
        time.sleep(every)


class Db:
    """A PostgreSQL connection that reconnects (PostgreSQL is restarted during the run)."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.conn = None

    def get(self):
        from dgb import db

        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = db.connect(self.dsn, connect_timeout=5)
        return self.conn

    def query(self, sql: str, params=None) -> list[tuple]:
        for attempt in range(3):
            conn = self.get()
            try:
                with conn.cursor() as cur:
                    cur.execute(sql, params)
                    rows = cur.fetchall() if cur.description else []
                conn.commit()
                return rows
            except Exception:
                try:
                    conn.close()
                except Exception:
                    pass
                self.conn = None
                if attempt == 2:
                    raise
                time.sleep(1.0)
        return []

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass


def http_json(url: str, body: dict | None = None, timeout: float = 10.0) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url,
        data=data,
        method="POST" if body is not None else "GET",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())
