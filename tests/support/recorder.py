"""Recorder: a loopback site that records every request it serves (the host-budget tests and
scripts/bench_hostbudget.py)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recorder(ThreadingHTTPServer):
    """Loopback site: ``/slow...`` answers after ``delay`` s, ``/429...`` with Retry-After
    ``retry_after`` once, ``/503...`` always 503; every request recorded (path, start, end)."""

    daemon_threads = True

    def __init__(self, delay: float = 0.0, retry_after: int = 2):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.delay, self.retry_after = delay, retry_after
        self.lock = threading.Lock()
        self.hits: list[tuple[str, float, float]] = []
        self.sent_429 = False

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"

    @property
    def base(self) -> str:
        return f"http://{self.host}"

    def max_overlap(self) -> int:
        events = sorted([(s, 1) for _, s, _ in self.hits] + [(e, -1) for _, _, e in self.hits])
        depth = best = 0
        for _, d in events:
            depth += d
            best = max(best, depth)
        return best

    def max_in_window(self, window: float) -> int:
        starts = sorted(s for _, s, _ in self.hits)
        return max((sum(1 for t in starts[i:] if t < s + window) for i, s in enumerate(starts)), default=0)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        srv: Recorder = self.server
        start = time.monotonic()
        status, headers = 200, {}
        if self.path.startswith("/429"):
            with srv.lock:
                first, srv.sent_429 = not srv.sent_429, True
            if first:
                status, headers = 429, {"Retry-After": str(srv.retry_after)}
        elif self.path.startswith("/503"):
            status = 503
        if srv.delay:
            time.sleep(srv.delay)
        end = time.monotonic()
        with srv.lock:
            srv.hits.append((self.path, start, end))
        body = b"<html><body><div id='content-core'>ok</div></body></html>"
        self.send_response(status)
        for k, v in {**headers, "Content-Type": "text/html", "Content-Length": str(len(body))}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
