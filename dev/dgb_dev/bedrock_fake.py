"""The one Bedrock fake: Converse replies for tests, in process or over loopback HTTP.

Bedrock itself is never reachable from tests or the local stack (paid, remote), so everything that
exercises :class:`dgb.enrich.bedrock.BedrockClassifier` talks to this instead:

* :func:`converse_response` - a Converse response with the shape of a recorded Claude 3 Haiku reply;
* :class:`FakeClient` - a ``bedrock-runtime`` client stand-in for unit tests: scripted replies (or
  exceptions) in order, every request recorded;
* :class:`AnsweringClient` - a client stand-in that answers every call as the HTTP fake does;
* :class:`FakeBedrockServer` - the same API over HTTP on 127.0.0.1 (``POST /model/<id>/converse``,
  what boto3 sends), for processes a test cannot inject a client into: Airflow task processes reach
  it through an AWS connection whose ``endpoint_url`` points here (:meth:`FakeBedrockServer.aws_conn`).
  It answers every article with a valid taxonomy code (chosen from a hash of the article text, so
  repeated calls agree), a one-sentence summary and a sentiment, every NER call (the entity
  extraction of dgb.features) with entities, and can **throttle**: while
  :meth:`FakeBedrockServer.throttle` is on, every call gets HTTP 429 ``ThrottlingException``, the
  error Bedrock returns when a quota is exceeded (the fault suite keeps it on for minutes).

    python -m dgb_dev.bedrock_fake --port 0        # serve until Ctrl-C; prints the URL
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

LOOPBACK = "127.0.0.1"


def converse_response(
    text: str,
    *,
    input_tokens: int = 9184,
    output_tokens: int = 87,
    stop: str = "end_turn",
    latency: int = 1342,
) -> dict:
    """A Converse response as Bedrock returns it (the shape of a recorded Claude 3 Haiku reply)."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop,
        "usage": {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + output_tokens,
        },
        "metrics": {"latencyMs": latency},
    }


class FakeClient:
    """A ``bedrock-runtime`` client stand-in: returns (or raises) scripted replies in order and
    records every request."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.requests: list[dict] = []

    def converse(self, **kwargs):
        self.requests.append(kwargs)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


_DATA = re.compile(r"<<<NOTICIA>>>(.*?)<<<FIM_DA_NOTICIA>>>", re.S)
_NER_MARK = "entidades nomeadas"  # in the NER call's system text (dgb.features.bedrock_ner.SYSTEM)


def _taxonomy_codes(taxonomy=None) -> list[tuple[str, str, str]]:
    if taxonomy is None:
        from dgb.taxonomy import load_taxonomy

        taxonomy = load_taxonomy()
    return [(t.code[:2], t.code[:5], t.code) for t in taxonomy.level(3)]


def answer_request(request: dict, codes: list[tuple[str, str, str]]) -> dict:
    """A valid answer to a Converse request body, deterministic for the same article: for the
    classification call a taxonomy code (from a hash of the article), a one-sentence summary and
    a sentiment (the offline lexicon's); for the NER call (its system text asks for named
    entities) the offline extractor's entities in the answer's shape."""
    text = ""
    for message in request.get("messages") or []:
        for block in message.get("content") or []:
            text += block.get("text") or ""
    system = " ".join(b.get("text") or "" for b in request.get("system") or [])
    m = _DATA.search(text)
    article = (m.group(1) if m else text).strip()
    if _NER_MARK in system:
        from dgb.features.rules_ner import extract

        entities = [
            {k: e[k] for k in ("text", "type", "forma_canonica", "salience", "count")}
            for e in extract("", article)
        ]
        reply = json.dumps({"entities": entities}, ensure_ascii=False)
        return converse_response(reply, input_tokens=len(text) // 4 + 1, output_tokens=80, latency=5)
    from dgb.features.sentiment import sentiment

    digest = int(hashlib.sha256(article.encode()).hexdigest(), 16)
    l1, l2, l3 = codes[digest % len(codes)]
    first = next((line.strip() for line in article.splitlines() if line.strip()), "Notícia.")
    summary = re.sub(r"^[A-Za-zçã]+:\s*", "", first)[:280]
    reply = json.dumps(
        {
            "theme_l1": l1,
            "theme_l2": l2,
            "theme_l3": l3,
            "summary": summary,
            "sentiment": sentiment("", article),
        },
        ensure_ascii=False,
    )
    return converse_response(reply, input_tokens=len(text) // 4 + 1, output_tokens=60, latency=5)


class AnsweringClient:
    """A ``bedrock-runtime`` client stand-in that answers every call as the HTTP fake does
    (:func:`answer_request`), in process; every request recorded."""

    def __init__(self, taxonomy=None):
        self.codes = _taxonomy_codes(taxonomy)
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    def converse(self, **kwargs):
        with self.lock:
            self.requests.append(kwargs)
        return answer_request(kwargs, self.codes)


class FakeBedrockServer:
    """Bedrock Converse over loopback HTTP, with a throttle switch. Thread-safe counters
    (``calls``, ``throttled``) say what it served."""

    def __init__(self, port: int = 0, taxonomy=None, host: str = LOOPBACK):
        if host not in (LOOPBACK, "localhost", "::1"):
            raise ValueError(f"the Bedrock fake serves loopback only, not {host!r}")
        self.codes = _taxonomy_codes(taxonomy)
        self.lock = threading.Lock()
        self.calls = 0
        self.throttled = 0
        self._throttle_until = 0.0
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeBedrockServer:
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="bedrock-fake", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def throttle(self, seconds: float | None) -> None:
        """Answer every call with 429 ThrottlingException for ``seconds`` (None: stop throttling)."""
        with self.lock:
            self._throttle_until = time.monotonic() + seconds if seconds else 0.0

    @property
    def throttling(self) -> bool:
        return time.monotonic() < self._throttle_until

    def aws_conn(self) -> dict:
        """An Airflow AWS connection (``AIRFLOW_CONN_<ID>`` JSON) that sends Bedrock calls here."""
        return {
            "conn_type": "aws",
            "login": "fake-bedrock",
            "password": "fake-bedrock",
            "extra": {"region_name": "us-east-1", "endpoint_url": self.url},
        }

    def answer(self, request: dict) -> dict:
        """A valid answer to a Converse request body (:func:`answer_request`)."""
        return answer_request(request, self.codes)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):
                pass

            def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = unquote(self.path.split("?", 1)[0])
                if not (path.startswith("/model/") and path.endswith("/converse")):
                    return self._send(
                        404,
                        {"message": f"unknown operation {path}"},
                        {"x-amzn-ErrorType": "UnknownOperation"},
                    )
                with server.lock:
                    server.calls += 1
                    throttled = server.throttling
                    if throttled:
                        server.throttled += 1
                if throttled:
                    return self._send(
                        429,
                        {"message": "Too many requests, please wait before trying again."},
                        {"x-amzn-ErrorType": "ThrottlingException"},
                    )
                try:
                    request = json.loads(raw or b"{}")
                except ValueError:
                    return self._send(
                        400, {"message": "malformed JSON body"}, {"x-amzn-ErrorType": "ValidationException"}
                    )
                return self._send(200, server.answer(request))

        return Handler


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Serve the Bedrock Converse fake on loopback.")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--throttle-s", type=float, default=0.0, help="throttle every call for this long first")
    args = p.parse_args(argv)
    fake = FakeBedrockServer(args.port).start()
    fake.throttle(args.throttle_s or None)
    print(f"bedrock fake on {fake.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
