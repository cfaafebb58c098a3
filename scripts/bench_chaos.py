"""Chaos run judged from outside (issue 39): the whole stack under 10x load with crash, pause and
overlapping faults, checked by an oracle that reads only what readers see.

1. **A fresh deployment on scratch names** (database ``dgb_chaos``, project ``dgb-chaos``,
   collection ``chaos_news``): the local site serves its corpus of real articles and journals
   every one of them (``DGB_MIRROR_JOURNAL_BASE``), Airflow starts on an empty database, and the
   pipeline scrapes, enriches, embeds and indexes the whole base itself. Nothing is preloaded or
   marked done. Each agency's base is moved in time so its newest article is an hour old
   (``DGB_MIRROR_BASE_NEWEST_AGE``): the corpus's real articles are weeks old, and an agency whose
   newest article is a week old is polled every ~20 minutes by the learnt cadence, so the load's
   first 20 minutes would wait unread instead of meeting the faults in flight. The run starts
   once the oracle finds the base as the site has it (at most ``--base-min`` minutes).
2. **Load**: for ``--minutes``, :mod:`dgb_dev.chaos.load` publishes ``--rate`` new articles an
   hour (default 5,000: ten times production's day in one hour) of real gov.br text, in bursts,
   with edits, removals and moves of the run's articles, through the site's control API.
3. **Faults**: one every ``--fault-every-min`` minutes (+-20%), drawn with the printed ``--seed``
   as from a deck, each kind once before any comes twice (``--faults`` names the kinds; default
   all) (:mod:`faultsuite.chaos`: kill -9 of PostgreSQL, Typesense, every Airflow component, a running
   task and the model service; SIGSTOP pauses; two faults at once; the Pub/Sub emulator losing
   its messages; the site slow or answering 503; 5-minute outages; an upgrade). Each one is
   confirmed (the process gone, the port closed, the process stopped) or counted in
   ``faults_unconfirmed``. A process supervisor's turn follows each one, as systemd or Kubernetes
   would.
4. **Drain**: the load stops, every scrape DAG is triggered once, and the pipeline has up to
   ``--drain-min`` minutes until the oracle finds everything as the site has it.
5. **The verdict**, from outside:

   * the oracle (:mod:`dgb_dev.chaos.oracle`): the site's journal against the index read through
     the portal's alias. ``lost``: a live article with no document. ``wrong``: a stale text, no
     theme, no vector or a vector of the wrong size, or a removed article still visible.
     ``duplicated``: more than one document for one URL;
   * events published more than once per article version, counted on the oracle's own
     subscriptions (:mod:`dgb_dev.chaos.event_counter`; reopened after each emulator fault, so
     events published while it was down are not seen); history rows recorded twice for one edit
     (:mod:`dgb_dev.chaos.record`). Both count in ``duplicated``;
   * ``stuck``: live articles the pipeline dead-lettered, parked or held, each with the reason it
     gave;
   * recovery, by the oracle (:mod:`dgb_dev.chaos.watch`): from a fault's end until every article
     the site changed before that end reads right. ``worst_recovery_s`` is the longest; a fault
     never recovered makes it ``inf``;
   * publication -> searchable of every new article (a reader polling the index every 3 s; the
     p95 needs at least 1,000 articles to be called one, else it is printed with a warning);
   * timed, not judged: each edit -> a reader gets its text, each removal (and each move's old
     address) -> hidden (:class:`~dgb_dev.chaos.watch.EditsSeen`, ``FirstSeen.gone``): these reach
     readers through integrity's checks, which under the 10x load have a backlog of young
     articles to read first;
   * the most requests the site saw in any 10 s (``max_rps_10s``, against the host budget).

The whole history goes to ``.state/bench/chaos-<time>.json``: faults with their confirmations and
recoveries, the load's actions, the verdicts, the stuck articles and why. The last line:

    chaos: lost=<n> duplicated=<n> wrong=<n> stuck=<n> faults=<n> faults_unconfirmed=<n>
    worst_recovery_s=<x> fresh_p95_s=<x> max_rps_10s=<x> seed=<n>

    .venv/bin/python scripts/bench_chaos.py [--minutes 60] [--seed N] [--rate 5000]

It stops this checkout's Airflow, watchdog and site (`make up` brings the dev stack back) and
drops the scratch database at the end (``--keep`` leaves it). ``scripts/bench_soak.py`` stays
beside it: the production-scale soak over a 300k preloaded base, judged by the pipeline's own
markers. Never beside a test suite or another benchmark (2 cores). Loopback only. Exit 1 unless
lost, duplicated, wrong, stuck and faults_unconfirmed are all 0 and the budget was kept.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for sub in ("include", "plugins", "dev", "scripts"):
    sys.path.insert(0, str(ROOT / sub))

import bench_realtime as realtime  # noqa: E402
from bench_soak import drain  # noqa: E402
from faultsuite.chaos import CHAOS, Chaos  # noqa: E402
from faultsuite.context import Context  # noqa: E402

SCRATCH = {
    "DGB_PG_DB": "dgb_chaos",
    "DGB_GCP_PROJECT": "dgb-chaos",
    "DGB_TYPESENSE_COLLECTION": "chaos_news",
    "DGB_SOURCE_MODE": "mirror",
    "DGB_MIRROR_JOURNAL_BASE": "1",
    # each agency's newest base article an hour old, as under production's load (module doc, step 1)
    "DGB_MIRROR_BASE_NEWEST_AGE": "3600",
}
POLL_S = 20.0  # the oracle's recovery pass and the event counter's drain, this often
FRESH_MIN_ARTICLES = 1000  # a p95 over fewer new articles is printed with a warning
EMULATOR_FAULTS = ("restart_emulator",)  # faults after which the counter's subscriptions are made again


def log(msg: str) -> None:
    print(f"[chaos {datetime.now(UTC):%H:%M:%S}] {msg}", flush=True)


# --------------------------------------------------------------------------- the deployment


def bring_up():
    """Step 1 of the module doc up to Airflow started and unpaused; returns (settings, scrape
    DAGs, the event counter, the site's base URL)."""
    os.environ.update(SCRATCH)
    from dgb.config import Settings
    from dgb_dev import stack
    from dgb_dev.chaos.event_counter import EventCounter
    from dgb_dev.stack.airflow_start import unpause_pipeline, up_airflow
    from dgb_dev.stack.watchdog import start_watchdog

    s, pg = realtime.scratch_stack(Settings.from_env())
    counter = EventCounter(s.gcp_project).open()  # before anything is published: it sees it all
    s = stack.ensure(["mirror", "model"], s)
    up_airflow(s)
    dags = unpause_pipeline(s)
    log(f"watchdog: {start_watchdog(s)}")
    scrape_dags = sorted(d for d in dags if d.startswith("scrape_"))
    log(f"Airflow up: {len(dags)} DAGs, {len(scrape_dags)} scrape DAGs")
    return s, pg, scrape_dags, counter, s.mirror_url.rstrip("/")


def wait_truth(check, minutes: float, what: str, also=None) -> tuple[bool, float, object]:
    """Run the oracle every POLL_S until it finds nothing wrong or ``minutes`` pass; ``also`` is
    called on each turn (the drain goes on measuring the faults' recoveries)."""
    t0 = time.monotonic()
    verdict = None
    while True:
        if also is not None:
            also()
        try:
            verdict = check()
            if verdict.ok:
                return True, time.monotonic() - t0, verdict
            left = verdict.counts()
        except Exception as exc:
            left = f"{type(exc).__name__}: {str(exc)[:120]}"
        if time.monotonic() - t0 > minutes * 60:
            return False, time.monotonic() - t0, verdict
        log(f"{what}: not yet ({left}), {time.monotonic() - t0:.0f}s")
        time.sleep(POLL_S)


def journal_agencies(site: str, keys: list[str]) -> list[str]:
    """The site's agency keys of the scraped agencies (``keys``: the stack's own list, not the
    scrape DAGs' ids: one DAG, ``scrape_ebc_sources``, scrapes every EBC portal, and taking the
    ids left those portals' articles unjudged). Matched on letters and digits only, so a key the
    site spells another way (``memoria-ebc``, ``memoria_ebc``) is not missed either."""
    from dgb_dev.chaos import oracle

    def norm(key: str) -> str:
        return re.sub(r"[^a-z0-9]", "", key.lower())

    wanted = {norm(k) for k in keys}
    site_keys = {e["agency"] for e in oracle.read_journal(site) if e.get("agency")}
    return sorted({k for k in site_keys if norm(k) in wanted} | set(keys))


# --------------------------------------------------------------------------- the run


class FaultThread(threading.Thread):
    """One injection (or overlap) at a time, off the main loop, so the oracle keeps watching."""

    def __init__(self, chaos: Chaos, fault: str):
        super().__init__(name=f"chaos-{fault}", daemon=True)
        self.chaos, self.fault = chaos, fault
        self.records: list = []

    def run(self) -> None:
        rec = self.chaos.inject(self.fault)
        # two faults at once come back as one record whose ``parts`` are the two faults: each is
        # confirmed and recovers on its own
        self.records = list(rec.parts) or [rec]
        if rec.parts:
            for part in rec.parts:
                others = " + ".join(p.fault for p in rec.parts if p is not part)
                part.detail = f"(overlapping {others}) {part.detail}".strip()


class ChaosRun:
    """Steps 2-5 of the module doc on a deployment made by :func:`bring_up`."""

    def __init__(self, args, seed: int, s, scrape_dags: list[str], counter, site: str):
        from dgb import hostbudget
        from dgb.config import http as http_config
        from dgb.search import schema
        from dgb_dev.chaos import oracle
        from dgb_dev.chaos.watch import EditsSeen, Recoveries

        self.args, self.seed, self.s, self.counter, self.site = args, seed, s, counter, site
        self.scrape_dags = scrape_dags
        from dgb.scraper.dags import selected_agencies

        self.agencies = journal_agencies(site, [a.key for a in selected_agencies(s)])
        self.ts = schema.client(s, timeout=60.0)
        self.alias, self.dim = s.typesense_collection, s.embedding_dim
        self.budget_rps = hostbudget.BudgetConfig(**http_config.host_budget()).default_rps
        self.recoveries = Recoveries(self.journal, self.ts, self.alias, self.dim, self.agencies)
        self.edits = EditsSeen(
            self.ts, self.alias, lambda since: oracle.read_journal(site, since=since), self.agencies
        )
        self.changes: dict = {}
        self.faults: list = []
        self.waits: dict = {}
        self.driver = self.watcher = None
        self.history: dict = {"args": vars(args), "seed": seed, "agencies": self.agencies}
        self.history["budget_rps"] = self.budget_rps

    def journal(self) -> list[dict]:
        from dgb_dev.chaos import oracle

        return oracle.read_journal(self.site)

    def verdict(self, events=None):
        from dgb_dev.chaos import oracle

        return oracle.check(self.site, self.ts, self.alias, self.dim, events=events, agencies=self.agencies)

    def base(self) -> None:
        ok, took, v = wait_truth(self.verdict, self.args.base_min, "base")
        self.history["base"] = {"indexed": ok, "seconds": round(took), "verdict": v.as_dict() if v else None}
        state = "as the site has it" if ok else "NOT complete"
        log(f"base: {state} after {took:.0f}s ({v.summary() if v else '-'})")

    def load_and_faults(self) -> None:
        """Step 2 and 3: the load for ``--minutes``, a fault at a time, the oracle watching."""
        from dgb_dev.chaos import load
        from dgb_dev.chaos.watch import FirstSeen

        args, s = self.args, self.s
        ctx = Context.for_chaos(s, keep=args.keep)
        self.af = ctx.af
        chaos = Chaos(ctx, self.seed, self.site, scale=args.outage_scale, faults=args.faults, deck=True)
        self.run_start = datetime.now(UTC)
        self.epoch0 = time.time()
        self.watcher = FirstSeen(self.ts, self.alias, self.epoch0, self.dim)
        self.watcher.start()
        # the agencies the site serves and the stack scrapes (EBC's portals left out: their
        # addresses carry the month), weighted like production's mix
        keys = [k for k in load.scraped_agencies(s) if k in self.agencies]
        plan = load.LoadPlan.build(
            load.load_texts(),
            load.real_mix(keys),
            minutes=args.minutes,
            rate_per_hour=args.rate,
            seed=self.seed,
            tag=f"c{uuid.uuid4().hex[:8]}",  # a fresh tag: no slug of an earlier run is reused
        )
        log(plan.summary())
        self.driver = load.LoadDriver(plan, self.site).start()
        every_s = args.fault_every_min * 60
        deadline = time.monotonic() + args.minutes * 60
        next_fault = time.monotonic() + chaos.next_gap_s(every_s)
        running: FaultThread | None = None
        last_poll = 0.0
        while time.monotonic() < deadline or running is not None:
            if running is not None and not running.is_alive():
                self.fault_done(running)
                running = None
                next_fault = time.monotonic() + chaos.next_gap_s(every_s)
            if running is None and next_fault <= time.monotonic() < deadline:
                running = FaultThread(chaos, chaos.draw())
                running.start()
            if time.monotonic() - last_poll >= POLL_S:
                last_poll = time.monotonic()
                self.watch()
                if running is None:
                    chaos.supervise()
            time.sleep(1)
        self.driver.stop()
        self.published_until = time.time()
        log(f"load: {self.driver.summary()}")

    def fault_done(self, thread: FaultThread) -> None:
        for rec in thread.records:
            self.faults.append(rec)
            if rec.ended:
                ended = datetime.fromisoformat(rec.ended).timestamp()
                self.recoveries.add(f"{len(self.faults)}:{rec.fault}", ended)
            if rec.fault in EMULATOR_FAULTS:
                self.counter.open()  # the emulator forgot the counter's subscriptions too

    def watch(self) -> None:
        """The oracle's recovery pass and the event counter's drain."""
        for p in self.recoveries.check():
            log(f"{p.name}: readers see the truth again {p.recovery_s:.0f}s after its end")
        if self.watcher is not None:
            self.edits.check(self.watcher.ids)
        for p in self.recoveries.open:
            url, why = next(iter(p.last_problems.items()), ("-", "-"))
            log(f"{p.name}: not recovered yet: {len(p.last_problems)} articles, e.g. {url[-70:]}: {why}")
        try:
            self.counter.drain()
        except Exception as exc:  # the emulator is down: the next turn drains
            log(f"event counter: {type(exc).__name__}")

    def drain_and_judge(self) -> None:
        """Step 4 and 5."""
        import psycopg

        from dgb_dev.chaos import oracle, record

        self.counter.open()
        t0 = time.monotonic()
        drained_s = 0.0
        try:  # Ctrl-C in either part of the drain: judge what readers see now, report it
            drained_s = drain(self.s, self.af, self.scrape_dags, self.args.drain_min)
            t0 = time.monotonic()
            left_min = max(1.0, self.args.drain_min - drained_s / 60)
            settled, settled_s, _ = wait_truth(self.verdict, left_min, "drain", also=self.watch)
        except KeyboardInterrupt:
            settled, settled_s = False, time.monotonic() - t0
            log("drain cut short (Ctrl-C): judging what readers see now")
        self.history["drain"] = {"settled": settled, "seconds": round(drained_s + settled_s)}
        self.recoveries.check()
        self.final = self.verdict(events=self.counter)
        entries = self.journal()
        self.run_stop = datetime.now(UTC)
        log_ = realtime.mirror_requests(self.site, self.epoch0)
        self.requests = realtime.request_figures(log_, self.epoch0, time.time())
        with psycopg.connect(self.s.pg_dsn()) as conn:
            self.history_rows = record.duplicated_history(conn, self.run_start)
            mine = [e for e in entries if e["agency"] in self.agencies or e["event"] == "reset"]
            live = {u for u, e in oracle.truth(mine).items() if e.live}
            self.stuck = record.stuck_articles(conn, live)
        self.fresh = self.watcher.freshness(entries, self.epoch0)
        self.edits.check(self.watcher.ids)
        self.changes = {
            "edits": self.edits.figures(),
            "removals": self.watcher.gone(entries, self.epoch0, "remove"),
            "moves": self.watcher.gone(entries, self.epoch0, "move"),
        }
        with psycopg.connect(self.s.pg_dsn(self.s.pg_airflow_db)) as conn:
            self.waits = record.scrape_waits(conn, self.run_start, self.run_stop)

    def stop(self) -> None:
        """The load and the reader stopped (best effort: the stack's teardown comes after)."""
        for part in (self.driver, self.watcher):
            if part is None:
                continue
            try:
                part.stop()
            except Exception as exc:
                log(f"stopping {type(part).__name__}: {type(exc).__name__}: {exc}")

    def figures(self) -> dict:
        counts = self.final.counts()
        unrecovered = [p.name for p in self.recoveries.open]
        rec_s = [p.recovery_s for p in self.recoveries.done]
        return {
            "lost": counts["lost"],
            "duplicated": counts["duplicated"] + self.history_rows["repeated"],
            "wrong": counts["wrong"] + counts["removed_still_visible"],
            "stuck": len(self.stuck),
            "faults": len(self.faults),
            "faults_unconfirmed": sum(1 for f in self.faults if not getattr(f, "confirmed", False)),
            "worst_recovery_s": float("inf") if unrecovered else max(rec_s, default=0.0),
            "fresh_p95_s": realtime.pct(self.fresh["lags"], 95),
            "max_rps_10s": self.requests["max_rps_10s"],
            "seed": self.seed,
        }

    def report(self, figures: dict) -> Path:
        """The per-fault table and the figures on stdout; the whole history as JSON."""
        from dgb_dev.chaos import oracle

        args, fresh = self.args, self.fresh
        print()
        print(f"run: {args.minutes:.0f} min from {self.run_start:%H:%M:%S}Z, seed {self.seed},")
        print(f"  {len(self.agencies)} agencies scraped, {args.rate:.0f} new articles an hour planned")
        by_name = {p.name: p for p in [*self.recoveries.done, *self.recoveries.open]}
        for i, f in enumerate(self.faults, 1):
            p = by_name.get(f"{i}:{f.fault}")
            rec = "-" if p is None else "not recovered" if p.recovery_s is None else f"{p.recovery_s:.0f}s"
            conf = "confirmed" if getattr(f, "confirmed", False) else "UNCONFIRMED"
            seen = getattr(f, "confirmation", "")
            print(f"  {f.started[11:19]} {f.fault:<22} {conf:<12} recovery {rec:<14} {seen} {f.detail}")
        print(f"load: {self.driver.summary()}")
        n = len(fresh["lags"])
        warn = "" if n >= FRESH_MIN_ARTICLES else f" (only {n}: not a p95 over >= {FRESH_MIN_ARTICLES})"
        print(
            f"publication -> searchable: {n} new articles, p50 {realtime.pct(fresh['lags'], 50):.0f}s,"
            f" p95 {figures['fresh_p95_s']:.0f}s, max {max(fresh['lags'], default=float('nan')):.0f}s,"
            f" never seen {fresh['unseen']}{warn}"
        )
        per = fresh.get("by_agency", {})
        if per:  # in the agencies' alphabetical order: a bias of the scheduler's order shows as a trend
            print(
                "  by agency (p50/p95 s): "
                + " ".join(
                    f"{a}={realtime.pct(v, 50):.0f}/{realtime.pct(v, 95):.0f}" for a, v in sorted(per.items())
                )
            )
        for line in change_lines(self.changes):
            print(line)
        if self.waits:  # Airflow's rows: a run's event -> its task's start, in DAG-id order
            print(
                "scrape waits (mean/longest s): "
                + " ".join(
                    f"{d.removeprefix('scrape_')}={w['mean_s']:.0f}/{w['max_s']:.0f}"
                    for d, w in self.waits.items()
                )
            )
        print(self.final.summary() + f" events={self.final.events}")
        by_cause = oracle.causes(self.final.as_dict())
        if by_cause:
            print("oracle by cause: " + " ".join(f"{k}={n}" for k, n in by_cause.items()))
        h = self.history_rows
        print(
            f"history: {h['history_rows']} rows on {h['articles_with_history']} articles,"
            f" repeated {h['repeated']}"
        )
        print(
            f"stuck: {len(self.stuck)}" + "".join(f"\n  {u}: {w}" for u, w in list(self.stuck.items())[:20])
        )
        print(
            f"requests to the site: {self.requests['requests']}, max {self.requests['max_rps_10s']:.2f}/s"
            f" over any 10 s (budget {self.budget_rps:g}/s), the busiest from"
            f" {self.requests.get('max_rps_10s_at') or '-'}"
        )
        if self.recoveries.open:
            print(f"not recovered by the end: {', '.join(p.name for p in self.recoveries.open)}")
        out = ROOT / ".state" / "bench" / f"chaos-{self.run_start:%Y%m%dT%H%M%S}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        self.history |= {
            "run_start": self.run_start.isoformat(),
            "run_stop": self.run_stop.isoformat(),
            "published_until": self.published_until,
            "faults": [f.as_dict() for f in self.faults],
            "recoveries": [vars(p) for p in [*self.recoveries.done, *self.recoveries.open]],
            "load": {
                "summary": self.driver.summary(),
                "actions": [
                    {**asdict(r), "action": {k: v for k, v in asdict(r.action).items() if k != "body"}}
                    for r in self.driver.records()
                ],
            },
            "verdict": self.final.as_dict(),
            "history_rows": h,
            "stuck": self.stuck,
            "fresh": {
                **fresh,
                "lags": [round(x, 1) for x in fresh["lags"]],
                "by_agency": {a: [round(x, 1) for x in v] for a, v in fresh.get("by_agency", {}).items()},
            },
            "requests": self.requests,
            "scrape_waits": self.waits,
            "changes": {k: {**v, "lags": [round(x, 1) for x in v["lags"]]} for k, v in self.changes.items()},
            "figures": figures,
        }
        out.write_text(json.dumps(self.history, indent=1, default=str))
        print(f"full history: {out}")
        return out


def change_lines(changes: dict) -> list[str]:
    """The report's lines for edits and take-downs reaching readers (watch.EditsSeen, FirstSeen.gone)."""

    def figs(lags: list[float]) -> str:
        if not lags:
            return "none timed"
        p50, p95 = realtime.pct(lags, 50), realtime.pct(lags, 95)
        return f"p50 {p50:.0f}s, p95 {p95:.0f}s, max {max(lags):.0f}s"

    out = []
    e = changes.get("edits")
    if e is not None:
        out.append(
            f"edit -> a reader gets its text: {len(e['lags'])} edits, {figs(e['lags'])};"
            f" not seen by the end {e['open']}, superseded (taken down or moved first) {e['superseded']}"
        )
    for kind, what in (("removals", "removal"), ("moves", "move (the old address)")):
        g = changes.get(kind)
        if g is not None:
            out.append(
                f"{what} -> hidden: {len(g['lags'])}, {figs(g['lags'])};"
                f" still visible at the end {g['visible']}, never indexed {g['never_shown']}"
            )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--seed", type=int, help="the load's and the faults' seed (default: random, printed)")
    ap.add_argument("--rate", type=float, default=5000.0, help="new articles an hour (default 5000)")
    ap.add_argument("--fault-every-min", type=float, default=4.0)
    ap.add_argument(
        "--faults",
        type=lambda v: tuple(f.strip() for f in v.split(",") if f.strip()),
        default=(),
        help="the fault kinds drawn, comma-separated (default: every kind of faultsuite's catalogue)",
    )
    ap.add_argument("--outage-scale", type=float, default=1.0, help="outage lengths times this (smoke runs)")
    ap.add_argument("--base-min", type=float, default=20.0, help="longest wait for the base to be indexed")
    ap.add_argument(
        "--drain-min",
        type=float,
        default=40.0,
        help="longest wait after the load for the final verdict (a removal is confirmed by a second"
        " check a quarter of an hour after the first; it ends as soon as the oracle finds no fault)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the scratch database at the end")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.faults) - set(CHAOS))
    if unknown:
        ap.error(f"unknown fault kinds {unknown}; known: {', '.join(sorted(CHAOS))}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    log(f"seed={seed}")

    from dgb_dev import stack
    from dgb_dev.chaos import record
    from dgb_dev.stack.watchdog import stop_watchdog

    s, pg, scrape_dags, counter, site = bring_up()
    run = ChaosRun(args, seed, s, scrape_dags, counter, site)
    try:
        run.base()
        run.load_and_faults()
        run.drain_and_judge()
    finally:
        run.stop()
        log("stopping Airflow, watchdog and the site of the run (`make up` brings the dev stack back)")
        stop_watchdog(s)
        for name in [f"airflow-{p}" for p in reversed(stack.AIRFLOW_PARTS)] + ["mirror"]:
            stack.component(s, name).down()
        counter.close()
    figures = run.figures()
    run.report(figures)
    if not args.keep:
        pg._psql_admin(f'DROP DATABASE IF EXISTS "{s.pg_db}" WITH (FORCE)')
    print(record.summary_line(figures))
    clean = ("lost", "duplicated", "wrong", "stuck", "faults_unconfirmed")
    ok = all(figures[k] == 0 for k in clean) and figures["max_rps_10s"] <= run.budget_rps + 1e-9
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
