"""The scrape dispatcher's decision: which scrape DAGs are due now (issue 27).

The ``scrape_dispatcher`` DAG runs every minute and calls :func:`decide`; each due scrape DAG gets
an asset event (``dgb.scraper.dags.due_asset``), the asset its DAG is scheduled on. Per agency
it reads, from PostgreSQL:

* its **publication history**: its ``news`` rows published in the last ``history_days`` counted by
  hour of the week in Brasília time, and its newest ``published_at`` (one index range scan of
  ``news_agency_published_idx`` per agency);
* its **last poll**: the later of its newest ``scrape_runs`` row's ``started_at`` (manual and
  backfill runs count) and the dispatcher's own ``scrape_cadence.dispatched_at`` (a dispatched
  poll that has not started yet is not dispatched again);
* its **lag**: the median publication -> stored delay (``news.created_at - published_at``) of its
  articles stored in the last 24 hours (those published over 2 days before they were stored, a
  backfill, left out),

then :func:`dgb.scraper.cadence.schedule` (the empirical Bayes forecast, the week's listing budget
hour by hour and this hour's allocation) and :func:`dgb.scraper.cadence.plan` (this tick's share of
the hour's budget) decide, and every agency's cadence, reason and lag is written to
``scrape_cadence`` for ``dgb status`` and the pipeline view. The agencies of one scrape DAG (the
EBC sources) are one unit: their rates summed, one interval.

**The poll is the dispatcher's.** :func:`run_tick` reads the newest listing page of each due agency
itself (:func:`probe`: one request through the shared host budget at ``scrape`` priority; for Plone
6 sites the API sorted by effective date, a page of 10 summaries) and compares its items with the
stored URLs, up to the known-URL fence (3 consecutive known). Only an agency with an unknown item
(or a listing that failed: its scrape run records the error category, as before) gets its scrape DAG
started. A poll that finds nothing therefore costs one request and no DAG run: scrape DAG runs
follow the news (a few hundred a day) instead of the cadence (tens of thousands of polls a day). The
``dispatched_at`` column holds the time of the agency's last probe; the tick's probes are also
counted per agency and hour in ``listing_polls`` (:mod:`dgb.scraper.polls`), in the same
transaction, for the polls and yield ``dgb status`` shows. Probes stop after ``deadline_s``
(45 s) so a tick never overlaps the next one; the agencies left are still due and go first at the
next tick (reason ``budget``).

The poll is **conditional** (:mod:`dgb.scraper.conditional`): it sends the listing's stored ETag
(``If-None-Match``; ``If-Modified-Since`` only for a listing without an ETag), kept only from a
listing whose items were all known; a 304 is "no news" without a parse (a hit, counted in
``Decision.conditional`` and ``dgb status``). Validators are dropped after
``DGB_SCRAPE_VALIDATOR_MAX_HITS`` 304s in a row or ``DGB_SCRAPE_VALIDATOR_MAX_AGE`` seconds, so the
listing is read whole at least that often. A 304 still takes a token of the host budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from dgb.hostbudget import GOV_BR, BudgetConfig
from dgb.scrape_errors import as_scrape_error
from dgb.scraper import conditional, polls, store
from dgb.scraper.cadence import DAY, Cadence, CadencePolicy, History, Plan, plan, schedule
from dgb.scraper.run import _parse_listing, listing_url, own_sites

LAG_WINDOW_S = DAY
PROBE_PAGE_SIZE = 10  # Plone 6 polls: summaries of the 10 newest items
BACKFILL_AGE_S = 2 * DAY


@dataclass
class AgencyCadence:
    key: str
    dag_id: str
    cadence: Cadence
    last_poll: float | None
    lag_p50_s: float | None = None
    lag_articles: int = 0
    reason: str = ""  # the cadence's, or "budget" when due and left for the next tick
    dispatched: bool = False


@dataclass
class Decision:
    now: float
    dag_ids: list[str]  # scrape DAGs due now (to poll)
    agencies: list[AgencyCadence] = field(default_factory=list)
    plan: Plan | None = None
    triggered: list[str] = field(default_factory=list)  # due DAGs whose poll found news: start them
    probes: list[Probe] = field(default_factory=list)

    @property
    def conditional(self) -> dict[str, int]:
        """This tick's polls by answer: ``hit`` (304), ``miss`` (200 to a conditional request),
        ``full`` (unconditional); failed polls not counted."""
        out = {conditional.HIT: 0, conditional.MISS: 0, conditional.FULL: 0}
        for p in self.probes:
            if p.answer in out:
                out[p.answer] += 1
        return out


@dataclass
class Probe:
    key: str
    new: int = 0  # unknown items on the newest listing page, before the known-URL fence
    error: str | None = None  # the listing's error category
    # how it was read, not what it found: hit (304), miss (200 to a conditional request), full
    answer: str = field(default="", compare=False)


def probe_url(agency) -> str:
    """The listing a poll reads: the agency's first listing page; for Plone 6 sites the ``@search``
    API sorted by effective date as the scrape reads it, but a small page of summaries
    (``b_size`` 10, no ``fullobjects``): the poll needs the URLs, not 25 whole articles."""
    url = listing_url(agency)
    if agency.site_kind != "plone6_api":
        return url
    parts = urlsplit(url)
    query = {k: v for k, v in parse_qsl(parts.query) if k != "fullobjects"}
    query["b_size"] = str(PROBE_PAGE_SIZE)
    return urlunsplit(parts._replace(query=urlencode(query)))


def probe(
    conn,
    agency,
    fetcher,
    fence: int = 3,
    *,
    now: float | None = None,
    validators: conditional.ConditionalPolicy | None = None,
) -> Probe:
    """One listing request: how many items of the agency's newest listing page are not stored yet
    (counted until ``fence`` consecutive known URLs, as a scrape run stops). Conditional
    (:mod:`dgb.scraper.conditional`, ``validators`` default from the settings): a 304 is no news."""
    validators = validators or conditional.ConditionalPolicy.from_env()
    now = time.time() if now is None else now
    answer = ""
    try:
        got = conditional.get(conn, fetcher, agency.key, probe_url(agency), now, validators)
        answer = got.answer
        if got.response is None:
            return Probe(agency.key, answer=answer)  # 304: the listing as it was, every item known
        page = _parse_listing(agency, got.response, own_sites(agency))
    except Exception as exc:
        conn.rollback()
        return Probe(agency.key, error=as_scrape_error(exc).category, answer=answer)
    known = store.known_urls(conn, agency.key, [i.url for i in page.items])
    conn.rollback()  # read only: no transaction left open between probes
    new = streak = 0
    for item in page.items:
        if item.url in known:
            streak += 1
            if streak >= fence:
                break
        else:
            streak, new = 0, new + 1
    conditional.record(conn, agency.key, got, now, all_known=new == 0 and not page.errors)
    return Probe(agency.key, new, answer=answer)


def run_tick(
    conn,
    specs: Iterable,
    fetcher,
    agency_for,
    *,
    now: float | None = None,
    policy: CadencePolicy | None = None,
    rps: float | None = None,
    deadline_s: float = 45.0,
    clock=time.monotonic,
    validators: conditional.ConditionalPolicy | None = None,
) -> Decision:
    """One dispatcher tick: decide who is due, poll them (most overdue first, until ``deadline_s``),
    record every agency's cadence; ``Decision.triggered`` lists the scrape DAGs to start.
    ``agency_for(key)`` gives the agency (:func:`dgb.scraper.dags.agency_by_key`'s object)."""
    decision = decide(conn, specs, now=now, policy=policy, rps=rps, record=False)
    validators = validators or conditional.ConditionalPolicy.from_env()
    started = clock()
    by_dag: dict[str, list[AgencyCadence]] = {}
    for a in decision.agencies:
        by_dag.setdefault(a.dag_id, []).append(a)
    for dag_id in decision.dag_ids:
        mine = by_dag[dag_id]
        if clock() - started > deadline_s:  # still due: first in line at the next tick
            for a in mine:
                a.dispatched, a.reason = False, "budget"
            continue
        found = [
            probe(conn, agency_for(a.key), fetcher, now=decision.now, validators=validators) for a in mine
        ]
        decision.probes += found
        if any(p.new or p.error for p in found):
            decision.triggered.append(dag_id)
    _record(conn, decision.agencies, decision.now, decision.probes)
    return decision


def host_rps() -> float:
    """www.gov.br's requests/s in the shared host budget (``DGB_HOST_RPS``, ``DGB_HOST_BUDGETS``)."""
    return BudgetConfig.from_env().limits(GOV_BR).rate_per_s


def read_histories(conn, keys: list[str], now: float, days: float) -> dict[str, History]:
    at = datetime.fromtimestamp(now, UTC)
    out = {k: History(days=days) for k in keys}
    with conn.cursor() as cur:
        # hour of the week in Brasília time (UTC-3, as dgb.scraper.cadence.hour_of_week)
        cur.execute(
            """
            SELECT agency_key,
                   (extract(isodow FROM b)::int - 1) * 24 + extract(hour FROM b)::int AS slot,
                   count(*)
              FROM (SELECT agency_key, (published_at - interval '3 hours') AT TIME ZONE 'UTC' AS b
                      FROM news
                     WHERE agency_key = ANY(%s) AND published_at > %s - make_interval(secs => %s)
                       AND published_at <= %s) AS recent
             GROUP BY 1, 2
            """,
            (keys, at, days * DAY, at),
        )
        for key, slot, n in cur.fetchall():
            out[key].counts[slot] = float(n)
        cur.execute(
            """
            SELECT k, (SELECT max(published_at) FROM news WHERE agency_key = k AND published_at <= %s)
              FROM unnest(%s::text[]) AS k
            """,
            (at, keys),
        )
        for key, newest in cur.fetchall():
            out[key].last_new = newest.timestamp() if newest else None
    return out


def read_last_polls(conn, keys: list[str]) -> dict[str, float | None]:
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT k,
                   (SELECT started_at FROM scrape_runs WHERE agency_key = k ORDER BY scraped_at DESC LIMIT 1),
                   (SELECT dispatched_at FROM scrape_cadence WHERE agency_key = k)
              FROM unnest(%s::text[]) AS k
            """,
            (keys,),
        )
        out = {}
        for key, started, dispatched in cur.fetchall():
            seen = [t.timestamp() for t in (started, dispatched) if t is not None]
            out[key] = max(seen) if seen else None
    return out


def read_lags(conn, keys: list[str], now: float) -> dict[str, tuple[float | None, int]]:
    at = datetime.fromtimestamp(now, UTC)
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT agency_key,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM created_at - published_at)),
                   count(*)
              FROM news
             WHERE agency_key = ANY(%s) AND created_at > %s - make_interval(secs => %s)
               AND created_at <= %s AND created_at - published_at < make_interval(secs => %s)
               AND published_at > %s - make_interval(secs => %s)  -- implied: the index range
             GROUP BY agency_key
            """,
            (keys, at, LAG_WINDOW_S, at, BACKFILL_AGE_S, at, LAG_WINDOW_S + BACKFILL_AGE_S),
        )
        return {k: (max(0.0, float(p)) if p is not None else None, int(n)) for k, p, n in cur.fetchall()}


def decide(
    conn,
    specs: Iterable,
    *,
    now: float | None = None,
    policy: CadencePolicy | None = None,
    rps: float | None = None,
    record: bool = True,
) -> Decision:
    """Due scrape DAGs among ``specs`` (:class:`dgb.scraper.dags.ScrapeSpec`) now; writes
    ``scrape_cadence`` (committed) unless ``record`` is false."""
    policy = policy or CadencePolicy.from_env()
    rps = host_rps() if rps is None else rps
    now = time.time() if now is None else now
    specs = list(specs)
    keys = [k for s in specs for k in s.agency_keys]
    histories = read_histories(conn, keys, now, policy.history_days)
    last_polls = read_last_polls(conn, keys)
    lags = read_lags(conn, keys, now)
    # several agencies in one DAG (the EBC sources) are polled together: one unit, their rates summed
    units = {spec.dag_id: list(spec.agency_keys) for spec in specs}
    decided_cadences = schedule(histories, now, policy, rps, units)
    agencies: list[AgencyCadence] = []
    per_dag: list[tuple[str, Cadence, float | None]] = []
    for spec in specs:
        c = decided_cadences.cadences[spec.dag_id]
        mine = []
        for key in spec.agency_keys:
            lag, n = lags.get(key, (None, 0))
            mine.append(AgencyCadence(key, spec.dag_id, c, last_polls[key], lag, n, c.reason))
        agencies += mine
        lasts = [a.last_poll for a in mine if a.last_poll is not None]
        per_dag.append((spec.dag_id, c, max(lasts) if lasts else None))
    decided = plan(per_dag, now, policy, rps, decided_cadences.budget_per_hour)
    due, deferred = set(decided.due), set(decided.deferred)
    for a in agencies:
        a.dispatched = a.dag_id in due
        if a.dag_id in deferred:
            a.reason = "budget"
    if record:
        _record(conn, agencies, now)
    return Decision(now, decided.due, agencies, decided)


def _record(conn, agencies: list[AgencyCadence], now: float, probes: Iterable[Probe] = ()) -> None:
    """Every agency's cadence into ``scrape_cadence`` and the tick's polls into ``listing_polls``
    (:mod:`dgb.scraper.polls`), in one transaction."""
    at = datetime.fromtimestamp(now, UTC)
    rows = [
        (
            a.key,
            a.cadence.interval_s,
            a.reason,
            a.cadence.rate_per_hour,
            datetime.fromtimestamp(a.last_poll, UTC) if a.last_poll is not None else None,
            datetime.fromtimestamp(a.last_poll + a.cadence.interval_s, UTC)
            if a.last_poll is not None
            else at,
            at if a.dispatched else None,
            a.lag_p50_s,
            a.lag_articles,
            at,
        )
        for a in agencies
    ]
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO scrape_cadence AS c (agency_key, interval_s, reason, rate_per_hour, last_poll_at,
                                             due_at, dispatched_at, lag_p50_s, lag_articles, updated_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (agency_key) DO UPDATE SET
                interval_s = EXCLUDED.interval_s, reason = EXCLUDED.reason,
                rate_per_hour = EXCLUDED.rate_per_hour, last_poll_at = EXCLUDED.last_poll_at,
                due_at = EXCLUDED.due_at,
                dispatched_at = coalesce(EXCLUDED.dispatched_at, c.dispatched_at),
                lag_p50_s = EXCLUDED.lag_p50_s, lag_articles = EXCLUDED.lag_articles,
                updated_at = EXCLUDED.updated_at
            """,
            rows,
        )
        polls.add(cur, probes, at)
    conn.commit()


def cadence_table(conn, now: datetime | None = None) -> dict:
    """Each agency's current cadence as the dispatcher last wrote it (``dgb status``, the pipeline
    view): ``agencies`` (fastest first: interval, reason, expected rate, last poll, next due, median
    lag and its sample), ``by_reason``, ``polls_per_hour`` (3600 / interval, summed), the age of
    the last decision (``updated_age_s``; None when the dispatcher never ran) and the conditional
    polls so far (``conditional``: :func:`dgb.scraper.conditional.totals`)."""
    now = now or datetime.now(UTC)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT agency_key, interval_s, reason, rate_per_hour, last_poll_at, due_at, lag_p50_s,"
            " lag_articles, updated_at FROM scrape_cadence ORDER BY interval_s, agency_key"
        )
        rows = cur.fetchall()
    conn.commit()
    agencies, by_reason = [], {}
    for key, interval, reason, rate, last, due, lag, n, _ in rows:
        by_reason[reason] = by_reason.get(reason, 0) + 1
        agencies.append(
            {
                "agency": key,
                "interval_s": round(float(interval), 1),
                "reason": reason,
                "rate_per_hour": round(float(rate), 3),
                "last_poll_at": last.isoformat() if last else None,
                "due_in_s": round((due - now).total_seconds(), 1) if due else None,
                "lag_p50_s": None if lag is None else round(float(lag), 1),
                "lag_articles": n,
            }
        )
    updated = max((r[8] for r in rows), default=None)
    return {
        "agencies": agencies,
        "by_reason": dict(sorted(by_reason.items())),
        "polls_per_hour": round(sum(3600.0 / max(a["interval_s"], 1.0) for a in agencies), 1),
        "updated_age_s": None if updated is None else round((now - updated).total_seconds(), 1),
        "conditional": conditional.totals(conn),
    }
