"""``dgb url-policy``, ``dgb integrity-check`` and ``dgb integrity-report``."""

from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "url-policy", help="decide whether the integrity checker may fetch URL (no request made)"
    )
    p.add_argument("url", help="the URL to judge")
    p.add_argument("--exit-code", action="store_true", help="exit 1 when the URL is refused")
    p.set_defaults(func=_cmd_url_policy)

    c = sub.add_parser("integrity-check", help="run the full integrity check of one article now")
    c.add_argument("--unique-id", required=True, help="the article's unique_id")
    c.set_defaults(func=_cmd_check)

    r = sub.add_parser("integrity-report", help="integrity metrics per agency and per tier")
    r.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    r.add_argument("--recent", type=int, default=20, help="history rows to include (default 20)")
    r.set_defaults(func=_cmd_report)


def _cmd_url_policy(args) -> int:
    from dgb.urlpolicy import UrlPolicy

    decision = UrlPolicy.for_settings().decide(args.url)
    print(json.dumps(decision.as_dict(), ensure_ascii=False))
    return 1 if args.exit_code and not decision.allowed else 0


def make_fetcher(settings=None):
    """The integrity checker's fetcher: the per-host budget shared by every worker at ``integrity``
    priority (after scrapes), the URL guard on every hop and connections pinned to vetted addresses."""
    from dgb.hostbudget import task_fetcher
    from dgb.urlpolicy import UrlPolicy, guarded_transport

    policy = UrlPolicy.for_settings(settings)
    return task_fetcher(
        "integrity", settings=settings, url_guard=policy.guard, transport=guarded_transport(policy)
    )


def _cmd_check(args) -> int:
    from dgb import db
    from dgb.config import settings
    from dgb.integrity.article_check import ArticleNotFound, check_article

    s = settings()
    conn = db.connect(s.pg_dsn())
    try:
        with make_fetcher(s) as fetcher:
            try:
                result = check_article(conn, fetcher, args.unique_id)
            except ArticleNotFound as exc:
                print(json.dumps({"unique_id": args.unique_id, "error": str(exc.args[0])}), file=sys.stderr)
                return 1
    finally:
        conn.close()
    print(json.dumps(result.as_dict(), ensure_ascii=False, indent=2, default=str))
    return 0


def _cmd_report(args) -> int:
    from dgb import db
    from dgb.config import settings
    from dgb.integrity.report import format_table, integrity_report

    conn = db.connect(settings().pg_dsn())
    try:
        report = integrity_report(conn, recent=args.recent)
    finally:
        conn.close()
    if args.json:
        print(json.dumps(report, ensure_ascii=False, default=str))
    else:
        print(format_table(report))
    return 0
