"""HTTP server of the mirror: routing to :class:`~dgb_dev.mirror.site.Site`, caching headers,
injected faults and the loopback-only control API.

Caching: every 200 text/image answer carries ``ETag`` (sha1 of the body); article pages also
``Last-Modified`` (the article's modified time). ``If-None-Match`` (or, without it,
``If-Modified-Since``) that matches gives 304. HEAD works everywhere (same headers, no body).

Faults (``POST /_control/fault`` or ``--faults FILE.json``, a list or ``{"faults": [...]}``)::

    {"path_prefix": "/www.gov.br/mec/", "fault": "429", "count": 2, "retry_after": 5}

The longest matching ``path_prefix`` among faults that apply to the request wins; ``count``
requests then the fault clears (null/absent = until reset). Kinds and params:

==================  ==============================================================================
``404``/``410``     that status, small HTML page
``429``             + ``Retry-After: retry_after`` (default 30)
``503``             + ``Retry-After`` when ``retry_after`` is given
``anti_bot``        Cloudflare "Just a moment..." challenge page, ``status`` 403 (default) or 503
``redirect_loop``   302 bouncing between the URL and the URL with ``_loop=1``
``slow``            body trickled in ``chunks`` (default 10) pieces over ``delay`` s (default 5);
                    the first pause comes before the headers
``oversized``       200 HTML of ``mb`` MB (default 12) streamed in 64 KiB chunks; ``content_length``
                    false = no Content-Length (connection closes at the end)
``broken_encoding`` the page encoded cp1252 with stray 0xFF bytes, still labelled UTF-8
``malformed_jsonld`` article pages get the malformed JSON-LD variant
``head_405``        HEAD on images -> 405 (``Allow: GET``); GET works
``broken_image``    images -> 404
``no_validators``   a site that ignores caching: no ``ETag``/``Last-Modified``, conditionals ignored
==================  ==============================================================================

Control API (loopback clients only, JSON in and out):
``GET /_control/state``; ``GET /_control/requests?since=<epoch s>`` (requests served per second
and per route kind, :class:`RequestLog`; a request with the header ``X-Dgb-Probe`` is a test
harness checking an injected fault, counted apart as ``probe``);
``GET /_control/journal?since=<n>`` (the site's journal from entry ``n``:
``{"entries": [...], "next": n'}``, :mod:`dgb_dev.mirror.journal`);
``POST /_control/publish`` (article object -> 201 with ``url``);
``POST /_control/edit`` ``{"agency", "slug", "title"?, "content"?, "subtitle"?, "image_url"?}``;
``POST /_control/remove`` ``{"agency", "slug", "status"?: 404|410}``;
``POST /_control/move`` ``{"agency", "slug", "new_slug", "redirect"?: true}`` (old URL: 301, or 404);
``POST /_control/fault`` (one fault, or ``{"clear": true}``); ``POST /_control/tick`` (one
tick now); ``POST /_control/reset`` (corpus state, faults back to the startup file's).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import threading
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from dgb_dev.mirror.content import http_date, query_params
from dgb_dev.mirror.site import Response, Site

log = logging.getLogger("dgb_dev.mirror")

PROBE_HEADER = "X-Dgb-Probe"
FAULT_KINDS = frozenset(
    {
        "404",
        "410",
        "429",
        "503",
        "anti_bot",
        "redirect_loop",
        "slow",
        "oversized",
        "broken_encoding",
        "malformed_jsonld",
        "head_405",
        "broken_image",
        "no_validators",
    }
)
CHUNK = 64 * 1024


class Faults:
    """Thread-safe table of injected faults, matched by path prefix."""

    def __init__(self, initial: list[dict] | None = None) -> None:
        self._lock = threading.Lock()
        self._initial = [self._check(f) for f in (initial or [])]
        self._rules: list[dict] = [dict(f) for f in self._initial]

    @staticmethod
    def _check(spec: Any) -> dict:
        if not isinstance(spec, dict):
            raise ValueError("a fault must be a JSON object")
        rule = dict(spec)
        rule["fault"] = str(rule.get("fault", ""))
        if rule["fault"] not in FAULT_KINDS:
            raise ValueError(f"unknown fault {rule['fault']!r}; known: {sorted(FAULT_KINDS)}")
        prefix = rule.get("path_prefix") or "/"
        if not isinstance(prefix, str) or not prefix.startswith("/"):
            raise ValueError("path_prefix must be a path starting with '/'")
        rule["path_prefix"] = prefix
        count = rule.get("count")
        if count is not None and (not isinstance(count, int) or count < 1):
            raise ValueError("count must be a positive integer or null")
        return rule

    @classmethod
    def from_file(cls, path: str | Path) -> Faults:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        items = data.get("faults", []) if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise ValueError(f"{path}: expected a list of faults or {{'faults': [...]}}")
        return cls(items)

    def add(self, spec: dict) -> dict:
        rule = self._check(spec)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules = []

    def reset(self) -> None:
        with self._lock:
            self._rules = [dict(f) for f in self._initial]

    def list(self) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self._rules]

    def take(self, path: str, *, method: str, kind: str) -> dict | None:
        """The fault for this request (consuming one of its ``count``), or None."""
        image = kind == "image"

        def applies(rule: dict) -> bool:
            f = rule["fault"]
            if f == "head_405":
                return image and method == "HEAD"
            if f == "broken_image":
                return image
            if f == "malformed_jsonld":
                return kind == "article"
            if f == "broken_encoding":
                return not image
            return True

        with self._lock:
            matches = [r for r in self._rules if path.startswith(r["path_prefix"]) and applies(r)]
            if not matches:
                return None
            rule = max(matches, key=lambda r: len(r["path_prefix"]))
            if rule.get("count") is not None:
                rule["count"] -= 1
                if rule["count"] <= 0:
                    self._rules.remove(rule)
            return dict(rule)


ANTI_BOT_PAGE = """<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
<meta name="robots" content="noindex,nofollow">
<meta http-equiv="refresh" content="390">
</head><body class="no-js"><div class="main-wrapper" role="main"><div class="main-content">
<h1 class="zone-name-title h1">www.gov.br</h1>
<h2 id="challenge-running" class="h2">Checking if the site connection is secure</h2>
<div id="cf-browser-verification"><noscript>Enable JavaScript and cookies to continue</noscript></div>
<div id="challenge-body-text">www.gov.br needs to review the security of your connection \
before proceeding.</div>
</div></div>
<script>(function(){window._cf_chl_opt={cvId:'3',cZone:'www.gov.br',cType:'managed',cRay:'%(ray)s'};
var a=document.createElement('script');\
a.src='/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=%(ray)s';
document.getElementsByTagName('head')[0].appendChild(a);})();</script>
<div class="footer" role="contentinfo">Performance &amp; security by Cloudflare · Ray ID: %(ray)s</div>
</body></html>
"""


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


def _etag_matches(header: str, etag: str) -> bool:
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags


class MirrorHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes on a kept-alive connection: with Nagle's algorithm the
    # body waits for the client's delayed ACK of the headers (~40 ms a response on Linux).
    disable_nagle_algorithm = True
    server: MirrorServer
    server_header = "Apache"

    def version_string(self) -> str:
        return self.server_header

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("mirror: %s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    # -- dispatch ------------------------------------------------------------------------------
    def _serve(self, method: str) -> None:
        self.server_header = "Apache"
        parts = urlsplit(self.path)
        path, query = unquote(parts.path) or "/", parts.query
        try:
            if path.startswith("/_control/"):
                return self._send(self._control(method, path[len("/_control/") :]), method)
            if method == "POST":
                return self._send(
                    Response(405, b"Method Not Allowed", "text/plain", {"Allow": "GET, HEAD"}), method
                )
            if path == "/health":
                return self._send(Response.json({"status": "ok", "service": "dgb-mirror"}), method)
            self._content(method, path, query)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # never kill the server thread; answer 500 instead
            log.exception("mirror: error serving %s %s", method, self.path)
            try:
                self._send(Response(500, b"Internal Server Error", "text/plain"), method)
            except OSError:
                self.close_connection = True

    def _base(self) -> str:
        host = self.headers.get("Host") or "{}:{:d}".format(*self.server.server_address[:2])
        return f"http://{host}"

    def _content(self, method: str, path: str, query: str) -> None:
        site = self.server.site
        site.refresh_extra()
        route = site.route(path)
        self.server.requests.add(route.kind, probe=bool(self.headers.get(PROBE_HEADER)))
        fault = self.server.faults.take(path, method=method, kind=route.kind)
        f = fault["fault"] if fault else None
        base = self._base()
        if f in ("404", "410", "broken_image"):
            code = 410 if f == "410" else 404
            return self._send(Response(code, f"<html><body><h1>{code}</h1></body></html>".encode()), method)
        if f in ("429", "503"):
            resp = Response(int(f), b"<html><body><h1>Too many requests / unavailable</h1></body></html>")
            if f == "429" or fault.get("retry_after") is not None:
                resp.headers["Retry-After"] = str(fault.get("retry_after", 30))
            return self._send(resp, method)
        if f == "anti_bot":
            ray = hashlib.md5(path.encode()).hexdigest()[:16]
            resp = Response(
                int(fault.get("status", 403)),
                (ANTI_BOT_PAGE % {"ray": ray}).encode(),
                headers={"cf-mitigated": "challenge", "CF-RAY": f"{ray}-GRU", "Cache-Control": "no-store"},
            )
            self.server_header = "cloudflare"
            return self._send(resp, method)
        if f == "redirect_loop":
            params = query_params(query)
            target = path if params.get("_loop") == "1" else f"{path}?_loop=1"
            return self._send(Response(302, b"", headers={"Location": base + target}), method)
        if f == "head_405":
            return self._send(Response(405, b"", "text/plain", {"Allow": "GET"}), method)
        if f == "oversized":
            return self._oversized(method, fault)
        resp = site.render(route, base, query, malformed_jsonld=f == "malformed_jsonld")
        if f == "broken_encoding" and resp.body:
            text = resp.body.decode("utf-8")
            resp.body = text.encode("cp1252", errors="replace").replace(
                b"<head>", b"<head><!-- \xff\xfe -->", 1
            )
        caching = f != "no_validators"
        self._send(resp, method, conditional=caching, validators=caching, slow=fault if f == "slow" else None)

    # -- writing -------------------------------------------------------------------------------
    def _send(
        self,
        resp: Response,
        method: str,
        *,
        conditional: bool = False,
        validators: bool = True,
        slow: dict | None = None,
    ) -> None:
        headers = dict(resp.headers)
        if resp.status == 200 and resp.body and validators:
            etag = f'"{hashlib.sha1(resp.body).hexdigest()[:20]}"'
            headers["ETag"] = etag
            if resp.last_modified:
                headers["Last-Modified"] = http_date(resp.last_modified)
            if conditional and self._not_modified(etag, resp):
                resp = Response(304, b"", "")
        body = resp.body
        if slow:
            chunks = max(1, int(slow.get("chunks", 10)))
            pause = float(slow.get("delay", 5)) / chunks
            time.sleep(pause)
        self.send_response(resp.status)
        if resp.content_type and resp.status != 304:
            self.send_header("Content-Type", resp.content_type)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method == "HEAD" or not body:
            return
        if not slow:
            self.wfile.write(body)
            return
        step = max(1, -(-len(body) // chunks))
        for i in range(0, len(body), step):
            if i:
                time.sleep(pause)
            self.wfile.write(body[i : i + step])
            self.wfile.flush()

    def _not_modified(self, etag: str, resp: Response) -> bool:
        inm = self.headers.get("If-None-Match")
        if inm:
            return _etag_matches(inm, etag)
        ims = self.headers.get("If-Modified-Since")
        if ims and resp.last_modified:
            try:
                return resp.last_modified.replace(microsecond=0) <= parsedate_to_datetime(ims)
            except (TypeError, ValueError):
                return False
        return False

    def _oversized(self, method: str, fault: dict) -> None:
        size = int(float(fault.get("mb", 12)) * 1024 * 1024)
        head = (
            b'<!DOCTYPE html><html lang="pt-br"><head><meta charset="utf-8">'
            b"<title>Arquivo</title></head><body>"
        )
        tail = b"</body></html>"
        filler = b"<p>" + b"Lorem ipsum gov.br " * 200 + b"</p>\n"

        def body() -> Iterator[bytes]:
            yield head
            left = size - len(head) - len(tail)
            while left > 0:
                block = (filler * (CHUNK // len(filler) + 1))[: min(CHUNK, left)]
                left -= len(block)
                yield block
            yield tail

        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        if fault.get("content_length", True):
            self.send_header("Content-Length", str(size))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if method != "HEAD":
            for block in body():
                self.wfile.write(block)

    # -- control API ---------------------------------------------------------------------------
    def _control(self, method: str, name: str) -> Response:
        if not _is_loopback(self.client_address[0]):
            return Response.json({"error": "control API is loopback-only"}, 403)
        site, faults = self.server.site, self.server.faults
        if name == "state" and method in ("GET", "HEAD"):
            return Response.json({**site.state(), "faults": faults.list()})
        if name == "journal" and method in ("GET", "HEAD"):
            since = query_params(urlsplit(self.path).query).get("since", "0")
            if not since.isdigit():
                return Response.json({"error": f"since must be a journal position, not {since!r}"}, 400)
            entries = site.journal(int(since))
            return Response.json({"entries": entries, "next": int(since) + len(entries)})
        if name == "requests" and method in ("GET", "HEAD"):
            since = query_params(urlsplit(self.path).query).get("since", "0")
            try:
                return Response.json(self.server.requests.snapshot(float(since)))
            except ValueError:
                return Response.json({"error": f"since must be epoch seconds, not {since!r}"}, 400)
        if method != "POST":
            return Response.json({"error": f"use POST for /_control/{name}"}, 405)
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            data = json.loads(raw) if raw.strip() else {}
            base = self._base()
            if name == "publish":
                a = site.publish(data)
                return Response.json(
                    {"agency": a.agency, "slug": a.slug, "url": site.article_url(base, a)}, 201
                )
            if name == "edit":
                kw = {k: data[k] for k in ("title", "content", "subtitle", "image_url") if k in data}
                a = site.edit(data.get("agency", ""), data.get("slug") or data.get("url_slug", ""), **kw)
                return Response.json(
                    {
                        "agency": a.agency,
                        "slug": a.slug,
                        "url": site.article_url(base, a),
                        "modified_at": a.modified_at.isoformat(),
                    }
                )
            if name == "remove":
                site.remove(
                    data.get("agency", ""), data.get("slug") or data.get("url_slug", ""), data.get("status")
                )
                return Response.json(
                    {"removed": f"{data.get('agency')}/{data.get('slug') or data.get('url_slug')}"}
                )
            if name == "move":
                a = site.move(
                    data.get("agency", ""),
                    data.get("slug", ""),
                    data.get("new_slug", ""),
                    redirect=bool(data.get("redirect", True)),
                )
                return Response.json({"agency": a.agency, "slug": a.slug, "url": site.article_url(base, a)})
            if name == "fault":
                if data.get("clear"):
                    faults.clear()
                else:
                    faults.add(data)
                return Response.json({"faults": faults.list()})
            if name == "reset":
                site.reset()
                faults.reset()
                return Response.json({"status": "reset", **site.state()})
            if name == "tick":
                return Response.json(site.tick())
        except KeyError as exc:
            return Response.json({"error": str(exc.args[0] if exc.args else exc)}, 404)
        except ValueError as exc:
            return Response.json({"error": str(exc)}, 400)
        return Response.json({"error": f"unknown control endpoint {name!r}"}, 404)


class RequestLog:
    """Requests served per second and per route kind (``GET /_control/requests``): what a polite
    client really sent to the site, for benchmarks that check a request budget from the outside.
    Keeps the last ``keep_s`` seconds (default 3 h) of per-second counts."""

    def __init__(self, keep_s: int = 3 * 3600) -> None:
        self.keep_s = keep_s
        self.started = time.time()
        self.total: dict[str, int] = {}
        self._per_second: dict[int, int] = {}
        self._lock = threading.Lock()

    def add(self, kind: str, *, probe: bool = False) -> None:
        """Count one request. A ``probe`` (the chaos run confirming that a fault it injected is
        served) is no client of the site: counted under ``probe`` only, never per second, so it
        cannot spend the request budget the benchmarks check the pipeline against."""
        now = int(time.time())
        with self._lock:
            if probe:
                self.total["probe"] = self.total.get("probe", 0) + 1
                return
            self.total[kind] = self.total.get(kind, 0) + 1
            self._per_second[now] = self._per_second.get(now, 0) + 1
            if len(self._per_second) > self.keep_s:
                for sec in [t for t in self._per_second if t < now - self.keep_s]:
                    del self._per_second[sec]

    def snapshot(self, since: float = 0.0) -> dict:
        with self._lock:
            per_second = sorted((t, n) for t, n in self._per_second.items() if t >= since)
            return {"started": self.started, "total": dict(self.total), "per_second": per_second}


class MirrorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], site: Site, faults: Faults | None = None) -> None:
        super().__init__(address, MirrorHandler)
        self.site = site
        self.faults = faults or Faults()
        self.requests = RequestLog()

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


def start_in_thread(
    site: Site, port: int = 0, *, host: str = "127.0.0.1", faults: Faults | None = None
) -> tuple[MirrorServer, str]:
    """Serve ``site`` from a daemon thread; stop with ``server.shutdown(); server.server_close()``."""
    if not _is_loopback(host):
        raise ValueError(f"the mirror serves on loopback only, not {host!r}")
    server = MirrorServer((host, port), site, faults)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="dgb-mirror", daemon=True
    ).start()
    return server, server.base_url


def start_ticker(site: Site, seconds: float) -> threading.Event:
    """Call ``site.tick()`` every ``seconds`` from a daemon thread; set the event to stop."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(seconds):
            try:
                result = site.tick()
                log.info(
                    "mirror tick %s: published %s, edited %s",
                    result["tick"],
                    result["published"],
                    result["edited"],
                )
            except Exception:
                log.exception("mirror: tick failed")

    threading.Thread(target=run, name="dgb-mirror-tick", daemon=True).start()
    return stop
