"""The local Airflow api-server's REST API (``/api/v2`` on loopback): what the stack's start-up and
the fault suite ask Airflow through it rather than through an ``airflow`` CLI call, each of which
spends seconds starting Python and importing Airflow (5-10 s on 2 busy cores) for a request the
api-server answers in milliseconds.

The local stack runs Airflow's SimpleAuthManager with every user an admin
(``SIMPLE_AUTH_MANAGER_ALL_ADMINS``, :func:`dgb_dev.stack.airflow.airflow_env`): no token is needed.
:class:`ApiUnreachable` says the API could not serve the request (not listening, auth refused, a
server error), so a caller may fall back on the CLI; :class:`ApiError` is Airflow's own answer to a
wrong request (an unknown DAG), which the CLI would refuse too.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from dgb.config import Settings

PAGE = 100  # DAGs per page of GET /dags


class ApiUnreachable(RuntimeError):
    """The REST API could not serve the request: the caller may use the CLI instead."""


class ApiError(RuntimeError):
    """The REST API refused the request (4xx other than auth): ``status`` and Airflow's detail."""

    def __init__(self, status: int, detail: str):
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


def base_url(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.airflow_port}/api/v2"


def call(
    settings: Settings,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: dict[str, Any] | None = None,
    timeout: float = 10.0,
    opener: Callable[..., Any] = urllib.request.urlopen,
) -> Any:
    """One request to ``/api/v2<path>``; returns the decoded JSON answer (None when empty)."""
    url = base_url(settings) + path
    if query:
        url += "?" + urllib.parse.urlencode(query, doseq=True)
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with opener(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500] if exc.fp is not None else ""
        if exc.code in (401, 403) or exc.code >= 500:
            raise ApiUnreachable(f"{method} {path}: HTTP {exc.code} {detail}") from exc
        raise ApiError(exc.code, detail) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ApiUnreachable(f"{method} {path}: {exc}") from exc
    return json.loads(raw) if raw.strip() else None


def trigger_dag_run(settings: Settings, dag_id: str, conf: dict | None = None, **kw) -> str:
    """A manual run of ``dag_id`` now, as ``airflow dags trigger`` makes it (no logical date);
    returns its run id."""
    body = {"logical_date": None, "conf": conf or {}}
    answer = call(settings, "POST", f"/dags/{urllib.parse.quote(dag_id, safe='')}/dagRuns", body, **kw)
    return (answer or {}).get("dag_run_id", "?")


def dag_ids(settings: Settings, **kw) -> set[str]:
    """Every DAG the api-server knows (parsed by the DAG processor)."""
    seen: set[str] = set()
    offset = 0
    while True:
        page = call(settings, "GET", "/dags", query={"limit": PAGE, "offset": offset}, **kw) or {}
        dags = page.get("dags") or []
        seen |= {d["dag_id"] for d in dags}
        offset += len(dags)
        if not dags or offset >= int(page.get("total_entries") or 0):
            return seen


def import_errors(settings: Settings, **kw) -> list[dict]:
    answer = call(settings, "GET", "/importErrors", query={"limit": PAGE}, **kw) or {}
    return answer.get("import_errors") or []


def set_pools(settings: Settings, pools: dict[str, tuple[int, str]], **kw) -> None:
    """Create or overwrite each pool (name -> (slots, description)), as ``airflow pools set`` does."""
    entities = [{"name": n, "slots": slots, "description": d} for n, (slots, d) in pools.items()]
    body = {"actions": [{"action": "create", "entities": entities, "action_on_existence": "overwrite"}]}
    answer = call(settings, "PATCH", "/pools", body, **kw) or {}
    errors = (answer.get("create") or {}).get("errors") or []
    if errors:
        raise ApiError(400, json.dumps(errors)[:500])


def unpause(settings: Settings, ids: list[str], **kw) -> None:
    """Unpause each DAG of ``ids``."""
    for dag_id in ids:
        call(
            settings,
            "PATCH",
            f"/dags/{urllib.parse.quote(dag_id, safe='')}",
            {"is_paused": False},
            query={"update_mask": "is_paused"},
            **kw,
        )
