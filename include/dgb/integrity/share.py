"""Integrity's share of www.gov.br's request budget, decided at the start of each budget run
(issues 14 and 27).

Scrapes come first on the shared host budget (:mod:`dgb.hostbudget`: priority ``scrape`` before
``integrity``), so integrity gets what they leave. With the learnt cadence (:mod:`dgb.scraper.cadence`)
that is not a constant: the listing budget follows the forecast of where the news is, most of it in
office hours, little at night. A run therefore plans with the same forecast:

    host rps - max(listings planned + articles forecast, scrape requests measured over the last 10 min)

(the plan: each agency's current interval in ``scrape_cadence``, which spends this hour's listing
budget, capped by the dispatcher's peak share; the forecast: the agencies' expected articles an
hour, ``scrape_cadence.rate_per_hour``, one article page each; the measure: the scrape tokens the
host budget granted), never below ``DGB_INTEGRITY_MIN_RPS``. A run that planned for more than it
gets still checks the most urgent articles first and stops at the end of its slot; planning for
what is left makes it end with its plan done instead of cut.

``DGB_INTEGRITY_BUDGET_RPS`` pins the rate instead (the behaviour before the learnt cadence). With
the shared budget off (``DGB_HOST_BUDGET=0``) there is nothing to measure: the default 1.7
requests/s (``dgb.integrity.tiers.DEFAULT_BUDGET_RPS``) is used.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from dgb.config import http as config_http
from dgb.config import integrity as config_integrity
from dgb.hostbudget import GRANTS_KEPT_S, PRIORITIES
from dgb.integrity.tiers import DEFAULT_BUDGET_RPS
from dgb.scraper.cadence import CadencePolicy
from dgb.scraper.dispatch import host_rps

log = logging.getLogger("dgb.integrity")

CADENCE_FRESH_S = 3600  # scrape_cadence rows older than this are not the current plan


@dataclass(frozen=True)
class Share:
    """What one budget run may spend and why (logged and returned in the run's summary)."""

    rps: float  # requests/s this run plans with
    # "host": what scrapes leave; "configured": DGB_INTEGRITY_BUDGET_RPS or the run's own rate;
    # "default": the shared budget is off
    source: str
    host_rps: float = 0.0
    listings_planned_rps: float = 0.0
    articles_planned_rps: float = 0.0
    scrape_measured_rps: float = 0.0
    min_rps: float = 0.0

    def as_dict(self) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def listings_planned_rps(conn, host_rate: float, policy: CadencePolicy | None = None) -> float:
    """Listing requests/s the learnt cadence plans now: the sum of 1/interval over the agencies'
    current cadences, at most the dispatcher's peak share of the host's rate."""
    return _planned(conn, host_rate, policy)[0]


def _planned(conn, host_rate: float, policy: CadencePolicy | None = None) -> tuple[float, float]:
    """(listing polls/s, forecast articles/s) of the current ``scrape_cadence`` rows."""
    policy = policy or CadencePolicy.from_env()
    with conn.cursor() as cur:
        cur.execute(
            "SELECT coalesce(sum(1.0 / greatest(interval_s, 1)), 0)::float8,"
            " coalesce(sum(rate_per_hour), 0)::float8 / 3600 FROM scrape_cadence"
            " WHERE updated_at > now() - make_interval(secs => %s)",
            (CADENCE_FRESH_S,),
        )
        polls, articles = cur.fetchone()
    return min(float(polls), policy.peak_share * host_rate), float(articles)


def scrape_measured_rps(conn, window_s: float = GRANTS_KEPT_S) -> float:
    """Scrape requests/s the host budget granted over the last ``window_s`` seconds (every host:
    listings, article pages and retries; the budget keeps its grants for 10 minutes)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM host_grants WHERE priority = %s"
            " AND at > clock_timestamp() - make_interval(secs => %s)",
            (PRIORITIES["scrape"], window_s),
        )
        n = int(cur.fetchone()[0])
    return n / window_s


def integrity_share(conn, fixed_rps: float | None = None) -> Share:
    """Integrity's requests/s for the run starting now (see the module's docstring): ``fixed_rps``
    (``DGB_INTEGRITY_BUDGET_RPS``) when given, the default rate with the shared budget off, else
    what the scrapes leave of the host's rate. Commits its reads."""
    if fixed_rps is not None:
        return Share(rps=float(fixed_rps), source="configured")
    if not config_http.host_budget_enabled():
        return Share(rps=DEFAULT_BUDGET_RPS, source="default")
    floor = config_integrity.min_rps()
    rate = host_rps()
    planned, articles = _planned(conn, rate)
    measured = scrape_measured_rps(conn)
    conn.commit()
    taken = max(planned + articles, measured)
    share = Share(max(floor, rate - taken), "host", rate, planned, articles, measured, floor)
    log.info("integrity share of the host budget: %s", share.as_dict())
    return share
