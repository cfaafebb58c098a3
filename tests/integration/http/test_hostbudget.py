"""The per-host request budget (dgb.hostbudget) in real PostgreSQL, across OS processes.

A small loopback server records each request's arrival and end (the end taken before the answer
is written, so a server-side interval always lies inside the client's slot); rates are checked by
counting requests per window with a generous tolerance, and spacing from the database's own grant
timestamps, never by how long a test took."""

from __future__ import annotations

import bisect
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dgb.fetch import Fetcher, FetchPolicy
from dgb.hostbudget import BudgetConfig, BudgetTimeout, HostBudget, snapshot
from dgb.urlpolicy import UrlPolicy
from tests.support.recorder import Recorder

pytestmark = pytest.mark.stack

WORKER = Path(__file__).with_name("budget_worker.py")


@pytest.fixture
def site():
    servers = []

    def start(**kw) -> Recorder:
        srv = Recorder(**kw)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _guard(srv):
    """The URL guard for the test's own loopback server (the one host it allows)."""
    return UrlPolicy([srv.host], allow_loopback=True).guard


def _worker(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )


def _result(proc: subprocess.Popen, timeout: float = 120) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def _budget(pg_server, host: str, rps: float, in_flight: int, **kw) -> HostBudget:
    return HostBudget(pg_server.pg_dsn(), BudgetConfig(overrides={host: (rps, in_flight)}, **kw))


def _grant_times(pg, host: str) -> list[float]:
    with pg.cursor() as cur:
        cur.execute(
            "SELECT extract(epoch FROM at)::float8 FROM host_grants WHERE host = %s ORDER BY at", (host,)
        )
        rows = [r[0] for r in cur.fetchall()]
    pg.commit()
    return rows


def test_two_processes_share_one_rate_and_in_flight_cap(pg, pg_server, site):
    rps, cap, n, threads = 4.0, 2, 8, 2
    srv = site(delay=0.3)  # slow answers: 4 streams would overlap 4 deep without the cap
    args = ["--base", f"{srv.base}/slow", "--n", str(n), "--threads", str(threads), "--rps", str(rps)]
    procs = [_worker(*args, "--in-flight", str(cap), "--tag", tag) for tag in ("a", "b")]
    results = [_result(p) for p in procs]
    total = 2 * threads * n
    assert sum(len(r["statuses"]) for r in results) == total and all(
        s == 200 for r in results for s in r["statuses"]
    )
    assert len(srv.hits) == total
    assert {p.split("/")[2][0] for p, _, _ in srv.hits} == {"a", "b"}  # both processes got through
    assert srv.max_overlap() <= cap  # never more than the cap in flight, across processes
    # at most rps * window (+1 for the window's edge, +1 for network jitter) in any 2 s window
    assert srv.max_in_window(2.0) <= rps * 2 + 2, sorted(s for _, s, _ in srv.hits)
    # the database's own grant times: spaced by 1/rps (no burst), for both processes together
    grants = _grant_times(pg, srv.host)
    assert len(grants) == total
    gaps = [b - a for a, b in itertools.pairwise(grants)]
    assert min(gaps) >= 0.99 / rps, gaps
    print(
        f"\nbudget {rps}/s, cap {cap}: {total} requests from 2 processes x {threads} threads; "
        f"max in 2 s window {srv.max_in_window(2.0)}, max overlap {srv.max_overlap()}, "
        f"min grant gap {min(gaps):.3f}s, mean rate {(total - 1) / (grants[-1] - grants[0]):.2f}/s"
    )


def _max_in_window(times: list[float], window: float) -> int:
    return max((bisect.bisect_right(times, t + window - 1e-6) - i for i, t in enumerate(times)), default=0)


@pytest.mark.parametrize("window_s", [10.0, 0.0])
def test_no_ten_seconds_get_more_than_the_window_cap(pg, pg_server, window_s):
    """2/s: the spacing alone lets 21 grants into 10 s. One grant now and other workers' 18 of the
    last 9 s (written straight into host_grants) fill the window: the next token waits until the
    oldest leaves (19 in any 10 s); with the cap off (DGB_HOST_WINDOW=0) it comes on the spacing
    alone and makes 20."""
    host = f"window-{window_s:.0f}.test"
    budget = _budget(pg_server, host, 2.0, 2, window_s=window_s)
    budget.release(budget.take(host, "scrape", timeout=30))
    with pg.cursor() as cur:
        cur.execute(
            "INSERT INTO host_grants (host, at, priority) SELECT %s,"
            " clock_timestamp() - make_interval(secs => 9.0 - 0.4 * i), 0 FROM generate_series(0, 17) i",
            (host,),
        )
    pg.commit()
    budget.release(budget.take(host, "scrape", timeout=30))
    budget.close()
    grants = _grant_times(pg, host)
    assert len(grants) == 20
    assert _max_in_window(grants, 10.0) == (19 if window_s else 20), grants


def test_retry_after_from_one_process_slows_the_other(pg, pg_server, site):
    srv = site(retry_after=5)
    common = ["--rps", "50", "--in-flight", "2"]
    first = _result(_worker("--base", f"{srv.base}/429", "--tag", "a", *common))
    assert first["statuses"] == [429]  # retries=0: the 429 is the answer
    (row,) = snapshot(pg, [srv.host])
    assert row["backoff_s"] > 0.5 and row["backoff_reason"] == "HTTP 429 Retry-After 5s", row
    second = _result(_worker("--base", f"{srv.base}/ok", "--tag", "b", *common))
    assert second["statuses"] == [200]
    (_, t429, _), (_, t_ok, _) = srv.hits
    assert t_ok - t429 >= 4.0  # the other process waited for the host-wide backoff
    assert second["polite_wait_s"][0] >= 0.5


def test_error_streak_sets_a_host_wide_backoff_and_a_normal_answer_resets_it(pg, pg_server, site):
    srv = site()
    budget = _budget(pg_server, srv.host, 100, 2, error_streak=3, backoff_base_s=5)
    for _ in range(2):
        with budget.acquire(srv.host) as slot:
            slot.report(503)
    (row,) = budget.snapshot([srv.host])
    assert row["error_streak"] == 2 and row["backoff_s"] == 0
    with budget.acquire(srv.host) as slot:
        slot.report(error=True)  # network error counts too
    (row,) = budget.snapshot([srv.host])
    assert row["error_streak"] == 3 and 3 < row["backoff_s"] <= 5
    assert row["backoff_reason"] == "3 errors in a row (last: network error)"
    with pytest.raises(BudgetTimeout):
        budget.take(srv.host, timeout=0.3)  # nobody gets a token during the backoff
    with budget._connection().cursor() as cur:
        cur.execute("UPDATE host_budgets SET backoff_until = NULL WHERE host = %s", (srv.host,))
    with budget.acquire(srv.host) as slot:
        slot.report(200)
    (row,) = budget.snapshot([srv.host])
    assert row["error_streak"] == 0 and row["backoff_s"] == 0
    budget.close()


def test_listing_requests_go_before_integrity(pg, pg_server, site):
    srv = site()
    holder = _budget(pg_server, srv.host, 1000, 1)
    scrape = _budget(pg_server, srv.host, 1000, 1)
    integrity = _budget(pg_server, srv.host, 1000, 1)
    held = holder.take(srv.host, "integrity")  # the only slot is busy
    order: list[str] = []

    def take(budget, prio):
        with budget.acquire(srv.host, prio, timeout=20):
            order.append(prio)
            time.sleep(0.05)

    t_scrape = threading.Thread(target=take, args=(scrape, "scrape"))
    t_scrape.start()
    deadline = time.monotonic() + 10
    while holder.snapshot([srv.host])[0]["waiting_by_priority"].get("scrape") != 1:
        assert time.monotonic() < deadline, "the scrape request never registered as waiting"
        time.sleep(0.02)
    t_int = threading.Thread(target=take, args=(integrity, "integrity"))
    t_int.start()
    time.sleep(0.3)  # both wait; the integrity request sees the scrape one waiting
    holder.release(held)
    t_scrape.join(20)
    t_int.join(20)
    assert order == ["scrape", "integrity"]
    for b in (holder, scrape, integrity):
        b.close()


def test_integrity_leaves_the_reserved_slot_to_scrapes(pg, pg_server, site):
    srv = site()
    budget = _budget(pg_server, srv.host, 1000, 2, reserved=1)
    other = _budget(pg_server, srv.host, 1000, 2, reserved=1)
    with budget.acquire(srv.host, "integrity"):
        with pytest.raises(BudgetTimeout):
            other.take(srv.host, "integrity", timeout=0.3)  # integrity may hold 2 - 1 slots
        with other.acquire(srv.host, "scrape", timeout=2) as slot:  # the reserved one
            assert slot.waited_s < 2
            (row,) = budget.snapshot([srv.host])
            assert row["in_flight"] == 2 and row["in_flight_by_priority"] == {"scrape": 1, "integrity": 1}
    budget.close()
    other.close()


def test_a_killed_process_slot_is_free_after_its_lease(pg, pg_server, site):
    srv = site()
    proc = _worker("--base", srv.base, "--hold", "--rps", "100", "--in-flight", "1", "--lease", "4")
    line = proc.stdout.readline()
    slot_id = json.loads(line)["slot"]
    with pg.cursor() as cur:
        cur.execute("SELECT lease_until FROM host_slots WHERE id = %s", (slot_id,))
        (lease_until,) = cur.fetchone()
    pg.commit()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    budget = _budget(pg_server, srv.host, 100, 1, lease_s=4)
    with pytest.raises(BudgetTimeout):
        budget.take(srv.host, timeout=0.2)  # the dead process still "holds" it until the lease ends
    with budget.acquire(srv.host, timeout=15) as slot:
        with pg.cursor() as cur:
            cur.execute("SELECT acquired_at FROM host_slots WHERE id = %s", (slot.id,))
            (acquired_at,) = cur.fetchone()
            cur.execute("SELECT count(*) FROM host_slots WHERE id = %s", (slot_id,))
            assert cur.fetchone()[0] == 0  # the dead slot was swept
        pg.commit()
    assert acquired_at >= lease_until
    budget.close()


def test_fetcher_sends_robots_and_retries_through_the_budget(pg, pg_server, site):
    srv = site()
    budget = _budget(pg_server, srv.host, 100, 2)
    policy = FetchPolicy(min_interval=0.0, retries=2, backoff_base=0.01, backoff_max=0.02)
    with Fetcher(policy, budget=budget, priority="integrity", url_guard=_guard(srv)) as f:
        resp = f.get(f"{srv.base}/503/x", raise_for_status=False)
    assert resp.status == 503
    # robots.txt (404: allow all) + 3 attempts, each a token of the host at integrity priority
    with pg.cursor() as cur:
        cur.execute("SELECT priority, count(*) FROM host_grants WHERE host = %s GROUP BY 1", (srv.host,))
        assert cur.fetchall() == [(1, 4)]
        cur.execute("SELECT count(*) FROM host_slots")
        assert cur.fetchone()[0] == 0  # every slot released
        cur.execute("SELECT error_streak FROM host_budgets WHERE host = %s", (srv.host,))
        assert cur.fetchone()[0] == 3
    pg.commit()
    assert budget._conn is None  # closed with the fetcher


def test_dgb_status_shows_each_hosts_budget(pg, pg_server, site, capsys):
    from dgb.cli import main

    srv = site(retry_after=30)
    budget = _budget(pg_server, srv.host, 2, 2)
    with budget.acquire(srv.host, "scrape") as slot:
        slot.report(429, 30)
    held = budget.take("www.gov.br", "integrity")  # the configured default for gov.br: 2/s, 2 in flight
    assert main(["status"]) == 0
    lines = [
        line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("host ")
    ]
    assert lines[0].startswith(
        f"host {srv.host}  rate 2/s (measured 0.02/s over 60s)  in_flight 0/2  waiting 0"
    )
    assert "backoff 30s until" in lines[0] or "backoff 29s until" in lines[0]
    assert lines[0].endswith("(HTTP 429 Retry-After 30s)")
    assert (
        lines[1]
        == "host www.gov.br  rate 2/s (measured 0.02/s over 60s)  in_flight 1/2  waiting 0  backoff -"
    )
    assert main(["status", "--json"]) == 0
    hosts = {h["host"]: h for h in json.loads(capsys.readouterr().out)["hosts"]}
    assert hosts["www.gov.br"]["in_flight_by_priority"] == {"integrity": 1}
    budget.release(held)
    budget.close()


def test_a_budget_timeout_is_a_network_error_and_leaves_the_fetcher_usable(pg, pg_server, site):
    srv = site()
    holder = _budget(pg_server, srv.host, 100, 1)
    held = holder.take(srv.host)
    budget = _budget(pg_server, srv.host, 100, 1, wait_timeout_s=0.3)
    with Fetcher(FetchPolicy(min_interval=0.0, retries=0), budget=budget, url_guard=_guard(srv)) as f:
        with pytest.raises(BudgetTimeout) as err:
            f.get(f"{srv.base}/x", check_robots=False)
        assert err.value.category == "network_error"
        holder.release(held)
        assert f.get(f"{srv.base}/x", check_robots=False).status == 200  # not stuck on its host lock
    holder.close()


def test_robots_txt_is_fetched_once_for_every_task_and_only_definite_answers_are_shared(pg, pg_server):
    """Each Airflow task is a new process with its own fetcher: the first one's robots.txt serves
    the next ones (through the budget's database); a 5xx is never shared (RFC 9309: disallow
    for now, ask again), and an old entry is fetched again."""
    import httpx

    hits: list[str] = []
    answers = {
        "http://a.example/robots.txt": httpx.Response(200, text="User-agent: *\nDisallow: /privado/\n"),
        "http://b.example/robots.txt": httpx.Response(503, text="indisponível"),
    }

    def handler(request: httpx.Request) -> httpx.Response:
        hits.append(str(request.url))
        return answers.get(str(request.url), httpx.Response(200, text="<html>ok</html>"))

    def task() -> Fetcher:  # what task_fetcher builds, on a mock site the guard lets through
        cfg = BudgetConfig(overrides={"a.example": (50.0, 2), "b.example": (50.0, 2)})
        return Fetcher(
            FetchPolicy(min_interval=0.0, retries=0),
            transport=httpx.MockTransport(handler),
            url_guard=lambda url: None,
            budget=HostBudget(pg_server.pg_dsn(), cfg),
        )

    with task() as first:
        assert first.allowed_by_robots("http://a.example/noticias/x")
        assert not first.allowed_by_robots("http://a.example/privado/y")
        assert not first.allowed_by_robots("http://b.example/noticias/x")  # 503: disallow all
    assert hits.count("http://a.example/robots.txt") == 1 and hits.count("http://b.example/robots.txt") == 1
    for _ in range(2):  # two more tasks
        with task() as later:
            assert later.allowed_by_robots("http://a.example/noticias/z")
            assert not later.allowed_by_robots("http://a.example/privado/y")  # the shared rules
            later.allowed_by_robots("http://b.example/noticias/x")
    assert hits.count("http://a.example/robots.txt") == 1  # fetched once for all three tasks
    assert hits.count("http://b.example/robots.txt") == 3  # the 503 was asked again each time
    with pg.cursor() as cur:
        cur.execute("SELECT robots_url, status FROM robots_cache ORDER BY 1")
        assert cur.fetchall() == [("http://a.example/robots.txt", 200)]
        cur.execute("UPDATE robots_cache SET fetched_at = now() - interval '2 days'")  # past the TTL
    pg.commit()
    with task() as next_day:
        assert next_day.allowed_by_robots("http://a.example/noticias/x")
    assert hits.count("http://a.example/robots.txt") == 2
