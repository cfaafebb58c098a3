"""The diff, once every batch is complete (or the deadline passed): per fault, the articles lost,
duplicated and dead-lettered though healthy, and the time to recover; then the contract's last
line (:data:`LAST_LINE`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from dgb import topology

from .articles import Articles
from .catalogue import RECOVERY_LIMIT_S
from .completion import Completion
from .context import Context
from .deadletters import DeadLetterWatch
from .duplicator import Duplicator
from .reconciler import Reconciler

# the contract of the last stdout line
LAST_LINE = (
    r"faults: lost=(?P<lost>\d+) duplicated=(?P<duplicated>\d+)"
    r" dead_lettered_healthy=(?P<dead_lettered_healthy>\d+) worst_recovery_s=(?P<worst>[0-9.]+)"
)


def last_line(lost: int, duplicated: int, dead_lettered_healthy: int, worst_recovery_s: float) -> str:
    return (
        f"faults: lost={lost} duplicated={duplicated} dead_lettered_healthy={dead_lettered_healthy}"
        f" worst_recovery_s={worst_recovery_s:.1f}"
    )


@dataclass
class Report:
    ctx: Context
    articles: Articles
    completion: Completion
    dead_letters: DeadLetterWatch
    duplicator: Duplicator
    reconciler: Reconciler

    def write(self) -> int:
        self.articles.refresh_uids()
        self.dead_letters.collect()
        self.dead_letters.observe()
        titles = [t for b in self.articles.batches for t in b.titles]
        pg_rows = self.pg_rows()
        ts_count = self.ts_count()
        uids = self.articles.all_uids()
        done = self.completion.complete(uids)
        counts = self.stage_events(uids)
        total_lost = total_dup = total_dlh = 0
        late = []
        worst = 0.0
        lines = []
        for b in self.articles.batches:
            lost = dup = 0
            for t in b.titles:
                uid = b.uids.get(t)
                if uid is None or uid not in done or ts_count.get(t, 0) == 0:
                    lost += 1
                c = counts.get(uid, {}) if uid else {}
                scraped = c.get(topology.TOPIC_SCRAPED, 0)
                if (
                    pg_rows.get(t, 0) > 1
                    or ts_count.get(t, 0) > 1
                    or c.get(topology.TOPIC_ENRICHED, 0) > max(scraped, 1)
                    or c.get(topology.TOPIC_EMBEDDED, 0) > max(scraped, 1)
                ):
                    dup += 1
            dlh = sum(1 for t in b.titles if b.uids.get(t) in self.dead_letters.dead_lettered)
            total_dlh += dlh
            rec = b.recovery_s
            if b.long and (rec is None or rec > RECOVERY_LIMIT_S):
                late.append(b.fault)
            if rec is None:
                rec_txt = "timeout"
                worst = max(worst, time.monotonic() - (b.fault_at or b.published_at))
            else:
                rec_txt = f"{rec:.1f}"
                worst = max(worst, rec)
            total_lost += lost
            total_dup += dup
            line = (
                f"fault={b.fault} lost={lost} duplicated={dup} dead_lettered_healthy={dlh}"
                f" recovery_s={rec_txt} articles={len(b.titles)}"
            )
            if dlh:
                seen = sorted(
                    {src for t in b.titles for src in self.dead_letters.dead_lettered.get(b.uids.get(t), ())}
                )
                line += f" dead_lettered_via={','.join(seen)}"
            if b.note:
                line += f" note={b.note.replace(' ', ';')}"
            lines.append(line)
        poison_line = (
            f"deliveries: extra_copies={self.duplicator.dup_published} (every event 3x)"
            f" poison_sent={len(self.dead_letters.poison_sent)}"
            f" poison_dead_lettered={len(self.dead_letters.poison_seen & set(self.dead_letters.poison_sent))}"
            f" reconcile_runs={self.reconciler.reconcile_runs} articles={len(titles)}"
        )
        for line in lines:
            print(line, flush=True)
        print(poison_line, flush=True)
        if late:
            print(
                f"late: {','.join(late)} not indexed within {RECOVERY_LIMIT_S:.0f}s of the recovery",
                flush=True,
            )
        failed = sum(b.failed_for_good for b in self.articles.batches)
        if failed:
            print(f"failed_for_good: {failed} task(s) failed with no retry left", flush=True)
        print(last_line(total_lost, total_dup, total_dlh, worst), flush=True)
        ok = total_lost == 0 and total_dup == 0 and total_dlh == 0 and not late and not failed
        return 0 if ok else 1

    def pg_rows(self) -> dict[str, int]:
        """Title -> PostgreSQL rows of the run's articles."""
        pg_rows: dict[str, int] = {}
        for title, n in self.ctx.db.query(
            "SELECT title, count(*) FROM news WHERE title LIKE %s GROUP BY 1", (f"%{self.ctx.tag}%",)
        ):
            pg_rows[title] = n
        return pg_rows

    def ts_count(self) -> dict[str, int]:
        """Title -> Typesense documents of the run's articles."""
        ts_count: dict[str, int] = {}
        raw = self.ctx.ts.collections[self.ctx.s.typesense_collection].documents.export(
            {"include_fields": "id,title"}
        )
        for line in raw.splitlines():
            if self.ctx.tag in line:
                t = json.loads(line).get("title")
                ts_count[t] = ts_count.get(t, 0) + 1
        return ts_count

    def stage_events(self, uids: list[str]) -> dict[str, dict[str, int]]:
        """unique_id -> topic -> outbox events written by the scraper and the stages (re-sends by
        reconcile/redrive/replay carry ``dgb_source`` and are not counted)."""
        counts: dict[str, dict[str, int]] = {}
        for uid, topic, n in self.ctx.db.query(
            "SELECT aggregate_id, topic, count(*) FROM outbox WHERE aggregate_id = ANY(%s)"
            " AND NOT (attributes ? 'dgb_source') GROUP BY 1, 2",
            (uids,),
        ):
            counts.setdefault(uid, {})[topic] = n
        return counts
