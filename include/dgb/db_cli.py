"""`dgb db`: apply and list the migrations of :mod:`dgb.db`, load the reference data."""

from __future__ import annotations

from dgb import db


def register(sub) -> None:
    p = sub.add_parser("db", help="database migrations and reference data")
    dsub = p.add_subparsers(dest="db_command", required=True)
    m = dsub.add_parser("migrate", help="apply pending migrations (idempotent)")
    m.set_defaults(func=_cmd_migrate)
    s = dsub.add_parser("status", help="list migrations and whether each is applied")
    s.set_defaults(func=_cmd_status)
    r = dsub.add_parser("load-reference", help="load agencies and themes (idempotent)")
    r.set_defaults(func=_cmd_load)


def _cmd_migrate(args) -> int:
    from dgb.config import settings

    applied = db.migrate_dsn(settings().pg_dsn())
    print(f"applied {len(applied)}: {', '.join(applied)}" if applied else "up to date")
    return 0


def _cmd_status(args) -> int:
    from dgb.config import settings

    conn = db.connect(settings().pg_dsn())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
            done = {}
            if cur.fetchone()[0]:
                cur.execute("SELECT version, applied_at FROM schema_migrations")
                done = dict(cur.fetchall())
    finally:
        conn.close()
    for mig in db.discover():
        when = done.get(mig.version)
        print(f"{mig.version}_{mig.name:40s} {'applied ' + when.isoformat() if when else 'PENDING'}")
    return 0


def _cmd_load(args) -> int:
    from dgb.config import settings

    print(db.load_reference_data(settings()))
    return 0
