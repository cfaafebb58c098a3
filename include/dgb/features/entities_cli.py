"""``dgb features entities merge FROM_ID INTO_ID [--dry-run]``: merge two registry entities of the
same type (:mod:`dgb.features.merge`): FROM's aliases, ``news_entities`` rows and the articles'
mentions go to INTO (the articles re-indexed), FROM's names become aliases of INTO, FROM stays as a
marker merged into INTO. Refused with exit code 2 when an id is not in the registry, the types
differ or FROM is INTO; running it twice changes nothing the second time. ``--dry-run`` does the
merge in a transaction that is rolled back. One summary line on stdout."""

from __future__ import annotations

import argparse
import sys


def register_entities(sub: argparse._SubParsersAction) -> None:
    """Add ``entities`` (and its ``merge``) under the ``dgb features`` subparsers ``sub``."""
    p = sub.add_parser("entities", help="the entity registry (entity_registry, entity_alias)")
    esub = p.add_subparsers(dest="entities_command", metavar="SUBCOMMAND")
    m = esub.add_parser(
        "merge", help="merge one registry entity into another of the same type", description=__doc__
    )
    m.add_argument("from_id", metavar="FROM_ID", help="the entity merged away (its id in entity_registry)")
    m.add_argument("into_id", metavar="INTO_ID", help="the entity that remains")
    m.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")
    m.set_defaults(func=cmd_merge)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def cmd_merge(args) -> int:
    from dgb import db
    from dgb.config import settings
    from dgb.features.merge import MergeRefused, merge

    conn = db.connect(settings().pg_dsn())
    try:
        conn.autocommit = False
        try:
            with conn.cursor() as cur:
                result = merge(cur, args.from_id, args.into_id)
        except MergeRefused as exc:
            conn.rollback()
            print(f"entities merge: refused: {exc}", file=sys.stderr)
            return 2
        except BaseException:
            conn.rollback()
            raise
        if args.dry_run:
            conn.rollback()
        else:
            conn.commit()
    finally:
        conn.close()
    print(result.summary(dry_run=args.dry_run))
    return 0
