"""``dgb reconcile | redrive | replay``: the safety net from the command line (see dgb.reconcile).

Each command works on the database of the current settings (DGB_PG_*), then relays the outbox
so the re-sent events leave at once (``--no-relay`` leaves that to the ``outbox_relay`` DAG).
Pub/Sub: the local emulator of the settings unless PUBSUB_EMULATOR_HOST is set, or ``--gcp``
(real Pub/Sub with application default credentials, project DGB_GCP_PROJECT).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from dgb import topology


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "reconcile",
        help="find articles stuck in a stage and Typesense drift; repair through the outbox",
        description="Find articles stuck beyond a threshold (scraped not enriched, "
        "enriched not embedded with the current model, not indexed at their version), "
        "unsent outbox events and Typesense drift "
        "(missing, extra, older documents); re-send the right event through the outbox (bounded "
        "attempts; past them the article is flagged problem='stuck'), delete extra documents, and "
        "record a reconcile_runs row. Default: the sweep's window of recent articles "
        "(DGB_RECONCILE_SWEEP_WINDOW_HOURS); --full: every article (the daily run).",
    )
    p.add_argument(
        "--full", action="store_true", help="every article, full Typesense comparison (daily mode)"
    )
    p.add_argument("--dry-run", action="store_true", help="report what would be repaired; change nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--older-than",
        type=float,
        metavar="SECONDS",
        help="age threshold for every stage and the outbox (default DGB_RECONCILE_STUCK_MINUTES)",
    )
    p.add_argument(
        "--window-hours", type=float, help="window of the sweep (default DGB_RECONCILE_SWEEP_WINDOW_HOURS)"
    )
    p.add_argument("--max-attempts", type=int, help="re-sends per article before it is flagged (default 5)")
    p.add_argument(
        "--retry-after",
        type=float,
        metavar="SECONDS",
        help="minimum time between two re-sends of one article (default: the age threshold)",
    )
    p.add_argument("--reset-stuck", action="store_true", help="re-arm articles flagged 'stuck' (after a fix)")
    p.add_argument("--no-drift", action="store_true", help="skip the Typesense comparison")
    _pubsub_args(p)
    p.set_defaults(func=cmd_reconcile)

    r = subparsers.add_parser(
        "redrive",
        help="re-publish selected open dead letters (after a fix) and mark them redriven",
        description="Re-publish OPEN dead letters, oldest first: a fresh event of the article built from "
        "PostgreSQL, or the original payload when the dead letter has no known article; mark them "
        "'redriven' with resolved_at and a resolution. A letter that fails again is re-opened.",
    )
    r.add_argument(
        "--reason",
        help="only dead letters with this reason (e.g. malformed_llm_output, unknown_id, "
        "pubsub_max_delivery_attempts)",
    )
    r.add_argument(
        "--subscription",
        choices=[s.name for s in topology.SUBSCRIPTIONS],
        help="only dead letters of this subscription",
    )
    r.add_argument(
        "--id", dest="ids", type=int, action="append", help="only this dead_letters.id (repeatable)"
    )
    r.add_argument("--limit", type=int, default=100, help="at most N dead letters (default 100)")
    r.add_argument(
        "--dry-run", action="store_true", help="list the dead letters it would re-publish; change nothing"
    )
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    _pubsub_args(r)
    r.set_defaults(func=cmd_redrive)

    y = subparsers.add_parser(
        "replay",
        help="re-process a time window (republish from PostgreSQL, or Pub/Sub snapshot + seek)",
        description="republish: re-emit, from PostgreSQL, TOPIC's event of every article whose stage time "
        "(scraped_at / enriched_at / embedded_at) is in [START, END); idempotent (stages skip done "
        "work). seek (Pub/Sub replay): snapshot each subscription of TOPIC, create a NEW subscription "
        "from the snapshot, seek it back to START and run the consuming stage over the messages "
        "published in [START, END) there, then delete it and the snapshot; the subscriptions the "
        "DAGs consume are never seeked. A seek that cannot run is an error (exit 1) unless "
        "--fallback-republish.",
    )
    y.add_argument("--start", required=True, help="ISO 8601 (UTC when no offset)")
    y.add_argument("--end", required=True, help="ISO 8601, exclusive")
    y.add_argument(
        "--topic",
        default=topology.TOPIC_SCRAPED,
        choices=list(topology.TOPICS),
        help="the topic whose events to replay (its consuming stage re-processes them)",
    )
    y.add_argument(
        "--mode",
        default="republish",
        choices=("republish", "seek"),
        help="republish from PostgreSQL, or Pub/Sub snapshot + seek of a new subscription",
    )
    y.add_argument("--subscription", help="seek only this subscription of the topic")
    y.add_argument(
        "--limit",
        type=int,
        default=50_000,
        help="at most N articles (republish) / messages per subscription (seek)",
    )
    y.add_argument(
        "--fallback-republish",
        action="store_true",
        help="seek: when Pub/Sub cannot snapshot/seek the window, republish from PostgreSQL (not fail)",
    )
    y.add_argument("--dry-run", action="store_true", help="count what would be replayed; change nothing")
    y.add_argument("--json", action="store_true", help="print the result as JSON")
    _pubsub_args(y)
    y.set_defaults(func=cmd_replay)


def _pubsub_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-relay", action="store_true", help="leave publishing to the outbox_relay DAG")
    p.add_argument(
        "--gcp",
        action="store_true",
        help="real Pub/Sub (application default credentials) instead of the local emulator",
    )


def _setup(args):
    from dgb import db
    from dgb.config import settings

    logging.basicConfig(
        level=logging.INFO if not getattr(args, "json", False) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "httpcore", "urllib3", "google"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    s = settings()
    if not args.gcp:
        os.environ.setdefault("PUBSUB_EMULATOR_HOST", s.pubsub_emulator_host)
    return s, db.connect(s.pg_dsn())


def _relay(args, conn, s) -> dict | None:
    if args.no_relay or args.dry_run:
        return None
    from dgb import outbox

    try:
        from dgb.pubsub_clients import publisher_client

        result = outbox.relay(conn, publisher_client(), s.gcp_project, timeout=15.0)
        return {"published": result.published, "failed": result.failed}
    except Exception as exc:
        print(
            f"warning: relay failed ({type(exc).__name__}: {exc}); the events stay in the outbox",
            file=sys.stderr,
        )
        return {"error": f"{type(exc).__name__}: {exc}"}


def _out(args, data: dict, line: str) -> None:
    if args.json:
        print(json.dumps(data, ensure_ascii=False, default=str))
    else:
        print(line)


def cmd_reconcile(args) -> int:
    from dgb.reconcile.repair import run
    from dgb.reconcile.stuck import Thresholds

    s, conn = _setup(args)
    try:
        t = Thresholds.from_env(
            window=not args.full,
            max_attempts=args.max_attempts,
            retry_after_s=args.retry_after,
            window_s=args.window_hours * 3600 if args.window_hours and not args.full else None,
        )
        if args.older_than is not None:
            t = t.with_age(args.older_than)
        ts = None
        if not args.no_drift:
            from dgb.search import schema

            ts = schema.client(s)
        rep = run(
            conn,
            mode="daily" if args.full else "manual",
            ts=ts,
            alias=s.typesense_collection,
            thresholds=t,
            model=s.embedding_model,
            dry_run=args.dry_run,
            reset_stuck=args.reset_stuck,
        )
        relayed = _relay(args, conn, s)
    finally:
        conn.close()
    data = {**rep.as_dict(), "relay": relayed}
    line = rep.line() + (f"; relay {relayed}" if relayed else "")
    _out(args, data, line)
    return 0


def cmd_redrive(args) -> int:
    from dgb.reconcile.redrive import redrive

    s, conn = _setup(args)
    try:
        rep = redrive(
            conn,
            reason=args.reason,
            limit=args.limit,
            subscription=args.subscription,
            ids=args.ids,
            model=s.embedding_model,
            dry_run=args.dry_run,
            actor="cli",
        )
        relayed = _relay(args, conn, s)
    finally:
        conn.close()
    _out(args, {**rep.as_dict(), "relay": relayed}, rep.line() + (f"; relay {relayed}" if relayed else ""))
    return 0


def _stage_builder(conn, s):
    """A stage by name, with the embedder and Typesense client of the settings (built only when
    the stage asks): what a seek replay runs over the replayed messages."""
    from dgb.pipeline import stages

    def embedder():
        from dgb.embed import get_embedder

        return get_embedder(s)

    def typesense():
        from dgb.search import schema

        return schema.client(s)

    deps = stages.Dependencies(embedder=embedder, typesense=typesense)
    return lambda name: stages.build(name, conn, s, deps)


def cmd_replay(args) -> int:
    from dgb.reconcile.replay import ReplayRequest, SeekUnavailable, replay_through_stages

    s, conn = _setup(args)
    try:
        subscriber = publisher = None
        if args.mode == "seek":
            from dgb.pubsub_clients import publisher_client, subscriber_client

            subscriber, publisher = subscriber_client(), publisher_client()
        try:
            request = ReplayRequest(
                args.start,
                args.end,
                topic=args.topic,
                mode=args.mode,
                subscription=args.subscription,
                limit=args.limit,
                dry_run=args.dry_run,
                fallback_republish=args.fallback_republish,
            )
            rep = replay_through_stages(
                conn,
                request,
                _stage_builder(conn, s),
                project=s.gcp_project,
                subscriber=subscriber,
                publisher=publisher,
            )
        except ValueError as exc:
            print(f"dgb replay: {exc}", file=sys.stderr)
            return 2
        except SeekUnavailable as exc:
            print(
                f"dgb replay: seek unavailable: {exc} (--fallback-republish republishes instead)",
                file=sys.stderr,
            )
            return 1
        relayed = _relay(args, conn, s)
    finally:
        conn.close()
    _out(args, {**rep.as_dict(), "relay": relayed}, rep.line() + (f"; relay {relayed}" if relayed else ""))
    return 0
