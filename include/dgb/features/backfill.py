"""``dgb features backfill``: features for articles enriched before features existed (an adopted
production database, ~300k rows) or computed by an older version of the methods, in batches,
resumable.

Which articles: enriched, not removed, published on or after ``since`` (when given), whose
``news_features`` object has no ``features_version`` of the current version
(:data:`dgb.features.compute.FEATURES_VERSION`; production's rows and this pipeline's older ones
have a lower one or none), newest first; at most ``limit``. New and edited articles need none of
this: the enrich stage computes theirs.

Each batch is one transaction: the features are computed and merged, the Bedrock usage of the
batch (NER calls, when ``DGB_FEATURES_NER=bedrock``) is added to the daily ledger, and the
article's ``version`` is bumped so the index stage re-indexes it whole (the features reach
Typesense by the normal path). What an LLM answered is kept: a stored ``sentiment`` that is
production's (no ``sentiment_method``) or Bedrock's, and stored ``entities`` that are production's
(no ``entities_method``) or Bedrock's, are not overwritten; the figures computed from the text
(``word_count``, the readability figures) and this pipeline's offline answers are recomputed.
A run stopped midway loses at most its current batch; the next run resumes where it stopped,
since finished articles no longer match. The sentiment of a recomputed article is the local
classifier's sentiment head (``sentiments``: one encode call per batch through the model
service), else the lexicon's; Bedrock calls go through the classifier's backoff on throttling.
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
   AND (nf.features IS NULL
        OR coalesce((nf.features ->> 'features_version')::int, 0) < %(version)s)
   AND (%(since)s::date IS NULL OR n.published_at >= %(since)s::date)
   AND (%(after)s::timestamptz IS NULL OR (n.published_at, n.unique_id) < (%(after)s, %(after_id)s))
 ORDER BY n.published_at DESC, n.unique_id DESC
 LIMIT %(n)s
"""
_COUNT = """
SELECT count(*) FROM news n LEFT JOIN news_features nf ON nf.unique_id = n.unique_id
 WHERE n.enriched_at IS NOT NULL AND n.removed_at IS NULL
   AND (nf.features IS NULL
        OR coalesce((nf.features ->> 'features_version')::int, 0) < %(version)s)
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


LLM_METHODS = (None, "bedrock")  # no method: production's (its LLM); bedrock: ours through Bedrock


def _keep_llm_answers(computed: compute.ArticleFeatures, stored: dict | None) -> compute.ArticleFeatures:
    """Leave out of ``computed`` what an LLM answered in the stored object (production's or
    Bedrock's sentiment and entities); everything else is recomputed."""
    stored = stored or {}
    keys = dict(computed.keys)
    if stored.get("sentiment") is not None and stored.get("sentiment_method") in LLM_METHODS:
        keys.pop("sentiment")
        keys.pop("sentiment_method", None)
    mentions = computed.mentions
    if (
        isinstance(stored.get("entities"), list)
        and stored["entities"]
        and stored.get("entities_method") in (None, "bedrock")
        and computed.entities_source != "llm"
    ):
        mentions = None  # the LLM's entities stay
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
    sentiments: Callable[[list], list] | None = None,
) -> BackfillResult:
    """``sentiments``: the local classifier's :meth:`~dgb.enrich.local.LocalClassifier.sentiments`
    (articles as ``ArticleText``, one answer or None each); without it the lexicon answers."""
    from dgb.enrich import ledger
    from dgb.enrich.contract import ArticleText

    out = BackfillResult()
    params = {"since": since, "version": compute.FEATURES_VERSION}
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
        # compute outside any transaction (model and Bedrock calls take seconds), then write in a
        # short one
        answers = [None] * len(rows)
        if sentiments is not None:
            answers = sentiments([ArticleText(r[0], r[1] or "", r[2], r[3], r[4] or "") for r in rows])
        computed = [
            (
                uid,
                _keep_llm_answers(
                    computer.compute(t or "", c or "", subtitle=sub, lead=lead, classifier_sentiment=answer),
                    stored,
                ),
                pub,
            )
            for (uid, t, sub, lead, c, pub, stored, _version), answer in zip(rows, answers)
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
