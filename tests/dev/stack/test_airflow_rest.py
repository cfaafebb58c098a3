"""dgb_dev.stack.airflow_rest against a loopback HTTP server playing Airflow's /api/v2: the requests
it makes, and which failures let a caller fall back on the CLI (ApiUnreachable) or not (ApiError)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest

from dgb_dev.stack import airflow_rest


class FakeAirflow:
    """Records every request; answers from ``routes`` ((method, path) -> (status, body))."""

    def __init__(self):
        self.requests: list[tuple[str, str, dict, object]] = []
        self.routes: dict[tuple[str, str], object] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                query = parse_qs(url.query)
                fake.requests.append((self.command, url.path, query, body))
                route = fake.routes.get((self.command, url.path), (404, {"detail": "not found"}))
                status, answer = route(query, body) if callable(route) else route
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.settings = SimpleNamespace(airflow_port=self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def airflow():
    fake = FakeAirflow()
    yield fake
    fake.close()


def test_a_dag_run_is_triggered_now_with_its_conf(airflow):
    airflow.routes[("POST", "/api/v2/dags/scrape_mec/dagRuns")] = (200, {"dag_run_id": "manual__x"})
    run_id = airflow_rest.trigger_dag_run(airflow.settings, "scrape_mec", {"start_date": "2026-01-01"})
    assert run_id == "manual__x"
    method, path, _query, body = airflow.requests[-1]
    assert (method, path) == ("POST", "/api/v2/dags/scrape_mec/dagRuns")
    assert body == {"logical_date": None, "conf": {"start_date": "2026-01-01"}}  # as the CLI: no logical date


def test_a_refused_request_is_an_api_error_and_an_unserved_one_unreachable(airflow):
    with pytest.raises(airflow_rest.ApiError) as err:
        airflow_rest.trigger_dag_run(airflow.settings, "no_such_dag")
    assert err.value.status == 404
    for status in (401, 403, 500, 503):
        airflow.routes[("POST", "/api/v2/dags/d/dagRuns")] = (status, {"detail": "no"})
        with pytest.raises(airflow_rest.ApiUnreachable):
            airflow_rest.trigger_dag_run(airflow.settings, "d")


def test_nothing_listening_is_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: connection refused
    with pytest.raises(airflow_rest.ApiUnreachable):
        airflow_rest.dag_ids(SimpleNamespace(airflow_port=port), timeout=2.0)


def test_dag_ids_read_every_page(airflow):
    ids = [f"dag_{i:03d}" for i in range(airflow_rest.PAGE + 5)]

    def page(query, _body):
        offset, limit = int(query["offset"][0]), int(query["limit"][0])
        return 200, {"dags": [{"dag_id": d} for d in ids[offset : offset + limit]], "total_entries": len(ids)}

    airflow.routes[("GET", "/api/v2/dags")] = page
    assert airflow_rest.dag_ids(airflow.settings) == set(ids)
    assert [q["offset"] for _m, _p, q, _b in airflow.requests] == [["0"], [str(airflow_rest.PAGE)]]


def test_pools_are_created_or_overwritten_in_one_request(airflow):
    airflow.routes[("PATCH", "/api/v2/pools")] = (200, {"create": {"success": ["scrape_http"], "errors": []}})
    airflow_rest.set_pools(airflow.settings, {"scrape_http": (4, "scrapes")})
    (_m, _p, _q, body), *_ = airflow.requests
    assert body == {
        "actions": [
            {
                "action": "create",
                "entities": [{"name": "scrape_http", "slots": 4, "description": "scrapes"}],
                "action_on_existence": "overwrite",
            }
        ]
    }
    airflow.routes[("PATCH", "/api/v2/pools")] = (200, {"create": {"errors": [{"error": "bad"}]}})
    with pytest.raises(airflow_rest.ApiError):
        airflow_rest.set_pools(airflow.settings, {"scrape_http": (4, "scrapes")})


def test_unpause_patches_is_paused_of_each_dag(airflow):
    for d in ("a", "b"):
        airflow.routes[("PATCH", f"/api/v2/dags/{d}")] = (200, {"dag_id": d, "is_paused": False})
    airflow_rest.unpause(airflow.settings, ["a", "b"])
    assert [(p, q, b) for _m, p, q, b in airflow.requests] == [
        ("/api/v2/dags/a", {"update_mask": ["is_paused"]}, {"is_paused": False}),
        ("/api/v2/dags/b", {"update_mask": ["is_paused"]}, {"is_paused": False}),
    ]
