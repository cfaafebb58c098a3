"""``dgb features backfill``: features for articles enriched before features existed (an adopted
production database, ~300k rows), in batches, resumable.

Which articles: enriched, not removed, published on or after ``since`` (when given), whose
``news_features`` object has no ``features_computed_at`` yet (the key this pipeline writes with
every computation), newest first; at most ``limit``. New and edited articles need none of this:
the enrich stage computes theirs.

Each batch is one transaction: the features are computed and merged (production's own keys are
kept: a key the stored object already holds, such as production's LLM ``sentiment`` or
``entities``, is not overwritten; missing ones are filled), the Bedrock usage of the batch (NER
calls, when ``DGB_FEATURES_NER=bedrock``) is added to the daily ledger, and the article's
``version`` is bumped so the index stage re-indexes it whole (the features reach Typesense by the
normal path). A run stopped midway loses at most its current batch; the next run resumes where it
stopped, since finished articles no longer match. Bedrock calls go through the classifier's
backoff on throttling; the sentiment of a backfilled article is the offline lexicon's (Bedrock's
comes only with a classification, which adopted rows already have).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from dgb import db
from dgb.features import compute, registry, store

BATCH = 100

_SELECT = """
SELECT n.unique_id, n.title, n.subtitle, n.editorial_lead, n.content, n.published_at, nf.features,
       n.version
  FROM news n
  LEFT JOIN news_features nf ON nf.unique_id = n.unique_id
 WHERE n.enriched_at IS NOT NULL AND n.removed_at IS NULL
   AND (nf.features IS NULL OR NOT nf.features ? 'features_computed_at')
   AND (%(since)s::date IS NULL OR n.published_at >= %(since)s::date)
   AND (%(after)s::timestamptz IS NULL OR (n.published_at, n.unique_id) < (%(after)s, %(after_id)s))
 ORDER BY n.published_at DESC, n.unique_id DESC
 LIMIT %(n)s
"""
_COUNT = """
SELECT count(*) FROM news n LEFT JOIN news_features nf ON nf.unique_id = n.unique_id
 WHERE n.enriched_at IS NOT NULL AND n.removed_at IS NULL
   AND (nf.features IS NULL OR NOT nf.features ? 'features_computed_at')
   AND (%(since)s::date IS NULL OR n.published_at >= %(since)s::date)
"""


@dataclass
class BackfillResult:
    total: int = 0  # articles that needed features when the run started
    todo: int = 0  # of which this run takes (--limit)
    done: int = 0
    batches: int = 0
    seconds: float = 0.0
    bedrock_calls: int = 0

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0


def _keep_production(computed: compute.ArticleFeatures, stored: dict | None) -> compute.ArticleFeatures:
    """Leave out of ``computed`` the keys the stored object already holds (production's values)."""
    stored = stored or {}
    if "features_computed_at" in stored:
        return computed
    keys = dict(computed.keys)
    for key in ("sentiment", "word_count", "readability_flesch"):
        if stored.get(key) is not None:
            keys.pop(key)
            if key == "sentiment":
                keys.pop("sentiment_method", None)
    if keys.get("readability_flesch") is None:
        keys.pop("readability_flesch", None)  # never remove a stored figure here
    mentions = computed.mentions
    if isinstance(stored.get("entities"), list) and stored["entities"]:
        mentions = None  # production's entities stay
        for key in ("entities_method", "entities_error"):
            keys.pop(key, None)
    return compute.ArticleFeatures(keys, mentions, computed.entities_source, computed.usage)


def run(
    conn,
    computer: compute.FeatureComputer,
    *,
    since: date | None = None,
    limit: int | None = None,
    batch: int = BATCH,
    progress: Callable[[BackfillResult], None] | None = None,
) -> BackfillResult:
    from dgb.enrich import ledger

    out = BackfillResult()
    params = {"since": since}
    with db.transaction(conn) as cur:
        registry.seed_agencies(cur)
        cur.execute(_COUNT, params)
        out.total = cur.fetchone()[0]
        out.todo = min(out.total, limit) if limit is not None else out.total
    start = time.monotonic()
    after: tuple | None = None
    while out.done < out.todo:
        n = min(batch, out.todo - out.done)
        with db.transaction(conn) as cur:
            cur.execute(
                _SELECT,
                {
                    **params,
                    "n": n,
                    "after": after[0] if after else None,
                    "after_id": after[1] if after else None,
                },
            )
            rows = cur.fetchall()
        if not rows:
            break
        # compute outside any transaction (Bedrock calls take seconds), then write in a short one
        computed = [
            (uid, _keep_production(computer.compute(t or "", c or "", subtitle=sub, lead=lead), stored), pub)
            for uid, t, sub, lead, c, pub, stored, _version in rows
        ]
        usage = [u for _, f, _ in computed for u in f.usage]
        with db.transaction(conn) as cur:
            db.lock_articles(cur, [r[0] for r in rows])
            # an article edited meanwhile is left out: the enrich stage computes its features
            cur.execute(
                "SELECT unique_id, version FROM news"
                " WHERE unique_id = ANY(%s::text[]) AND enriched_at IS NOT NULL",
                ([r[0] for r in rows],),
            )
            current = dict(cur.fetchall())
            kept = [r[0] for r in rows if current.get(r[0]) == r[7]]
            for uid, features, published_at in computed:
                if uid in kept:
                    _write(cur, uid, features, published_at)
            cur.execute(
                "UPDATE news SET version = version + 1, updated_at = now() WHERE unique_id = ANY(%s::text[])",
                (kept,),
            )
            if usage:
                ledger.record_usage(cur.connection, "unknown", usage, commit=False)
        after = (rows[-1][5], rows[-1][0])
        out.done += len(rows)
        out.batches += 1
        out.bedrock_calls += sum(int(u.get("calls") or 0) for u in usage)
        out.seconds = time.monotonic() - start
        if progress:
            progress(out)
    out.seconds = time.monotonic() - start
    return out


def _write(cur, uid: str, features: compute.ArticleFeatures, published_at) -> None:
    if features.mentions is None:  # production's entities kept: only the other keys
        present = {k: v for k, v in features.keys.items() if v is not None}
        store.merge_features(cur, {uid: present})
        return
    compute.write(cur, uid, features, published_at)


def print_progress(result: BackfillResult, stream=None) -> None:
    pct = 100.0 * result.done / result.todo if result.todo else 100.0
    eta = (result.todo - result.done) / result.rate if result.rate else 0.0
    print(
        f"features backfill: {result.done}/{result.todo} articles ({pct:.1f}%), "
        f"{result.rate:.1f} articles/s, eta {eta:.0f} s",
        file=stream or sys.stderr,
        flush=True,
    )
