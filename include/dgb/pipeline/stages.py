"""The event-driven stages: enrich, embed, index. Each is a :class:`Stage` over its definition.

What is ready, done and pending for each stage (idempotency included: enrich is done once
``enriched_at`` is set, embed once embedded by the current model, index once
``indexed_version = version``) is defined once, in :mod:`dgb.pipeline.definitions`; the classes
here add what to load, how to process and how to persist.

:data:`STAGES` is the registry the Airflow operator builds a stage from (:func:`build`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from dgb import db
from dgb.pipeline import definitions
from dgb.pipeline.prefetch import MISSING, Ahead
from dgb.pipeline.resilience import BEDROCK, MODEL_SERVICE, TYPESENSE, UNKNOWN
from dgb.pipeline.stage import Failure, Stage
from dgb.search import drift

log = logging.getLogger("dgb.pipeline")

# classifier backend -> the dependencies it calls (the local classifier embeds via the model service)
CLASSIFIER_DEPENDENCIES = {
    "local": (MODEL_SERVICE,),
    "bedrock": (BEDROCK,),
    "hybrid": (MODEL_SERVICE, BEDROCK),
}


class EnrichStage(Stage):
    """Theme + summary by the configured classifier, and the article's features (word count,
    readability, sentiment, entities: :mod:`dgb.features`) written to ``news_features`` in the same
    transaction as the classification; an edit resets ``enriched_at``, so an edited article gets
    both again. The token usage of every Bedrock call (classification and NER) is written to the
    ledger in the chunk's own transaction (:meth:`record_chunk`), so paid work and its bill commit
    together."""

    definition = definitions.ENRICH
    columns = (
        "title",
        "subtitle",
        "editorial_lead",
        "content",
        "agency_key",
        "enriched_at",
        "removed_at",
        "published_at",
    )

    def __init__(
        self,
        classifier,
        conn=None,
        dependencies: tuple[str, ...] | None = None,
        embedder=None,
        features=None,
    ):
        self.classifier = classifier
        self.conn = conn
        self.embedder = embedder  # the local classifier's (model service), for its health check
        self.features = features  # a dgb.features.compute.FeatureComputer, or None (features off)
        self._theme_ids: dict[str, int] | None = None
        self._ahead = Ahead()  # the next chunk's classification (the local classifier only: free)
        self._usage: list[dict] = []
        self._computed: dict[str, Any] = {}  # unique_id -> ArticleFeatures of this chunk
        self.dependencies = dependencies or CLASSIFIER_DEPENDENCIES.get(
            str(getattr(classifier, "name", "local")), (MODEL_SERVICE,)
        )

    @classmethod
    def from_settings(cls, conn, s, deps: Dependencies) -> EnrichStage:
        from dgb.enrich.base import get_classifier

        # the local classifier embeds (hybrid mode runs it first)
        embedder = deps.embedder() if s.classifier_backend in ("local", "hybrid") else None
        classifier = get_classifier(s, embedder=embedder)
        return cls(
            classifier,
            conn,
            CLASSIFIER_DEPENDENCIES.get(s.classifier_backend),
            embedder=embedder,
            features=_feature_computer(s, classifier),
        )

    def healthy(self, dependency: str) -> bool | None:
        return _service_health(self.embedder) if dependency == MODEL_SERVICE else None

    @staticmethod
    def _items(rows: list[dict]) -> list:
        from dgb.enrich.base import ArticleText

        return [
            ArticleText(
                r["unique_id"],
                r["title"] or "",
                r["subtitle"],
                r["editorial_lead"],
                r["content"] or "",
                r.get("agency_key"),
            )
            for r in rows
        ]

    def drop_prefetched(self) -> None:
        self._ahead.clear()

    def prefetch(self, rows: list[dict]) -> None:
        if str(getattr(self.classifier, "name", "")) == "local":  # never Bedrock: paid
            self._ahead.start(_key(rows), self.classifier.classify_batch, self._items(rows))

    def process(self, rows: list[dict]) -> dict[str, Any]:
        from dgb.enrich.base import ClassificationFailure

        results = self._ahead.take(_key(rows))
        if results is MISSING:
            results = self.classifier.classify_batch(self._items(rows))
        out: dict[str, Any] = {}
        for row, res in zip(rows, results):
            if isinstance(res, ClassificationFailure):
                bedrock = res.reason.startswith("bedrock") or res.reason == "throttled"
                out[row["unique_id"]] = Failure(
                    res.reason, res.detail, res.retryable, dependency=BEDROCK if bedrock else None
                )
            else:
                out[row["unique_id"]] = res
        self._usage += [r.usage for r in results if getattr(r, "usage", None)]
        if self.features is not None:
            self._compute_features(rows, out)
        return out

    def _compute_features(self, rows: list[dict], out: dict[str, Any]) -> None:
        """Features of the rows classified now (a failed row gets none: it is retried whole)."""
        todo = [r for r in rows if not isinstance(out[r["unique_id"]], Failure)]

        def one(r: dict):
            return self.features.compute(
                r["title"] or "",
                r["content"] or "",
                subtitle=r["subtitle"],
                lead=r["editorial_lead"],
                classifier_sentiment=getattr(out[r["unique_id"]], "sentiment", None),
            )

        workers = max(1, int(getattr(self.classifier, "concurrency", 1) or 1))
        if self.features.ner is not None and workers > 1 and len(todo) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=workers) as pool:
                computed = list(pool.map(one, todo))
        else:
            computed = [one(r) for r in todo]
        for r, f in zip(todo, computed):
            self._computed[r["unique_id"]] = f
            self._usage += f.usage

    def persist_chunk(self, cur, rows: list[dict]) -> None:
        todo = [r for r in sorted(rows, key=lambda r: r["unique_id"]) if r["unique_id"] in self._computed]
        if todo:
            from dgb.features import compute

            compute.write_many(
                cur, [(r["unique_id"], self._computed[r["unique_id"]], r.get("published_at")) for r in todo]
            )

    def record_chunk(self, cur) -> None:
        if not self._usage:
            return
        from dgb.enrich import ledger

        model_id = next(
            (u.get("model_id") for u in self._usage if u.get("model_id")),
            getattr(self.classifier, "model_id", "unknown"),
        )
        ledger.record_usage(cur.connection, model_id, self._usage, commit=False)

    def chunk_committed(self) -> None:
        self._usage = []
        self._computed = {}

    def _themes(self, cur) -> dict[str, int]:
        if self._theme_ids is None:
            cur.execute("SELECT code, id FROM themes")
            self._theme_ids = dict(cur.fetchall())
        return self._theme_ids

    def persist(self, cur, row: dict, result) -> dict | None:
        ids = self._themes(cur)
        cur.execute(
            "UPDATE news SET theme_l1_id = %s, theme_l2_id = %s, theme_l3_id = %s,"
            " most_specific_theme_id = %s, summary = %s, classifier = %s, classifier_version = %s,"
            " theme_confidence = %s,"
            " enriched_at = %s, version = version + 1, updated_at = now(), last_error = NULL,"
            " last_error_stage = NULL WHERE unique_id = %s AND version = %s",
            (
                ids.get(result.theme_l1),
                ids.get(result.theme_l2),
                ids.get(result.theme_l3),
                ids.get(result.most_specific),
                result.summary,
                result.classifier,
                result.classifier_version,
                result.confidence,
                result.enriched_at,
                row["unique_id"],
                row["version"],
            ),
        )
        if cur.rowcount != 1:
            return None
        # its features: written with the chunk's by persist_chunk
        return {
            "unique_id": row["unique_id"],
            "enriched_at": result.enriched_at,
            "most_specific_theme_code": result.most_specific,
            "has_summary": bool(result.summary),
        }


def _feature_computer(s, classifier):
    """The enrich stage's feature computer (None when ``DGB_FEATURES`` is off); its NER is a
    Bedrock call when configured (``DGB_FEATURES_NER``), through the classifier's own Bedrock
    client when the classifier is Bedrock's."""
    from dgb.config.features import features_enabled, ner_backend
    from dgb.features.compute import FeatureComputer

    if not features_enabled():
        return None
    if ner_backend(s.classifier_backend) != "bedrock":
        return FeatureComputer()
    from dgb.enrich.bedrock import BedrockClassifier
    from dgb.features.bedrock_ner import BedrockNer

    caller = classifier if isinstance(classifier, BedrockClassifier) else getattr(classifier, "bedrock", None)
    return FeatureComputer(
        BedrockNer(caller if isinstance(caller, BedrockClassifier) else BedrockClassifier())
    )


class EmbedStage(Stage):
    definition = definitions.EMBED
    columns = ("title", "summary", "content", "enriched_at", "embedded_at", "embedding_model", "removed_at")

    def __init__(self, embedder, model_name: str):
        if not model_name:
            raise ValueError("EmbedStage needs the current embedding model's name")
        self.embedder = embedder
        self.model_name = model_name
        self.model = model_name  # the current-model rule: vectors of another model are pending
        self.dependencies = (MODEL_SERVICE,)
        self._ahead = Ahead()  # the next chunk's vectors

    @classmethod
    def from_settings(cls, conn, s, deps: Dependencies) -> EmbedStage:
        return cls(deps.embedder(), s.embedding_model)

    def healthy(self, dependency: str) -> bool | None:
        return _service_health(self.embedder) if dependency == MODEL_SERVICE else None

    @staticmethod
    def _texts(rows: list[dict]) -> list[str]:
        from dgb.embed.model import prepare_text

        return [prepare_text(r["title"] or "", r["summary"], r["content"]) for r in rows]

    def drop_prefetched(self) -> None:
        self._ahead.clear()

    def prefetch(self, rows: list[dict]) -> None:
        self._ahead.start(_key(rows), partial(self.embedder.encode, batch_size=32), self._texts(rows))

    def process(self, rows: list[dict]) -> dict[str, Any]:
        vectors = self._ahead.take(_key(rows))
        if vectors is MISSING:
            vectors = self.embedder.encode(self._texts(rows), batch_size=32)
        if vectors.shape != (len(rows), self.embedder.dim):
            raise RuntimeError(f"embedder returned shape {vectors.shape} for {len(rows)} texts")
        return {r["unique_id"]: vectors[i] for i, r in enumerate(rows)}

    def persist(self, cur, row: dict, vector) -> dict | None:
        db.adapt_real_arrays(cur)  # on the chunk's cursor, made before this call (idempotent, cheap)
        now = datetime.now(UTC)
        cur.execute(
            "UPDATE news SET content_embedding = %s, embedding_model = %s, embedding_dim = %s,"
            " embedding_generated_at = %s, embedded_at = %s, version = version + 1, updated_at = now(),"
            " last_error = NULL, last_error_stage = NULL WHERE unique_id = %s AND version = %s",
            (
                db.RealArray(vector),
                self.model_name,
                len(vector),
                now,
                now,
                row["unique_id"],
                row["version"],
            ),
        )
        if cur.rowcount != 1:
            return None
        return {"unique_id": row["unique_id"], "embedded_at": now, "embedding_dim": len(vector)}


class IndexStage(Stage):
    """Builds each Typesense document whole from PostgreSQL and upserts it (or deletes it when
    the article was removed); marks ``indexed_version`` for the version it indexed.

    The one stage that writes inside :meth:`process` (see dgb.pipeline.runner's module doc):
    :func:`dgb.search.sync.sync` writes Typesense and then commits the ``indexed_version``
    marks itself, for the rows still at the version it read. :meth:`persist` writes nothing."""

    definition = definitions.INDEX
    columns = ("enriched_at", "indexed_version", "removed_at")

    def __init__(self, ts, alias: str, conn, dim: int):
        self.ts, self.alias, self.conn, self.dim = ts, alias, conn, dim
        self.dependencies = (TYPESENSE,)

    @classmethod
    def from_settings(cls, conn, s, deps: Dependencies) -> IndexStage:
        return cls(deps.typesense(), s.typesense_collection, conn, s.embedding_dim)

    def start_run(self) -> None:
        self.restore_lost_documents()

    def restore_lost_documents(self) -> int:
        """Once per run (:meth:`start_run`), before any sweep: articles marked indexed whose
        document Typesense no longer has are made pending again
        (:func:`dgb.search.drift.restore_lost_documents`), so the run re-indexes them. Best
        effort: a Typesense that does not answer is the breaker's business, not a reason not to
        start."""
        try:
            marked = drift.restore_lost_documents(self.conn, self.ts, self.alias)
        except Exception as exc:
            self.conn.rollback()
            log.info("index: could not compare Typesense with PostgreSQL: %s", exc)
            return 0
        if marked:
            log.warning("index: %d indexed article(s) had no document in Typesense: made pending", marked)
        return marked

    def healthy(self, dependency: str) -> bool | None:
        if dependency != TYPESENSE:
            return None
        try:
            return bool(self.ts.operations.is_healthy())  # GET /health
        except Exception:
            return False

    def process(self, rows: list[dict]) -> dict[str, Any]:
        from dgb.search.sync import IndexUnavailable, sync

        try:
            result = sync(self.ts, self.alias, self.conn, [r["unique_id"] for r in rows], self.dim)
        except IndexUnavailable as exc:
            if exc.result is None:
                raise
            # Typesense went away mid-chunk: what it took (and was marked) counts, the rest waits
            done = {u for u in exc.result.versions if u not in set(exc.result.stale)}
            failure = Failure("typesense_unavailable", str(exc), True, dependency=TYPESENSE)
            return {r["unique_id"]: True if r["unique_id"] in done else failure for r in rows}
        out: dict[str, Any] = {}
        for r in rows:
            uid = r["unique_id"]
            if uid in result.failed:  # Typesense refused this document (429/503 were retried)
                out[uid] = Failure("index_failed", str(result.failed[uid]), True, kind=UNKNOWN)
            else:
                out[uid] = True
        return out


def _service_health(embedder) -> bool | None:
    """The model service's GET /health (``ServiceEmbedder.available``); None for an in-process
    model (nothing to check)."""
    check = getattr(embedder, "available", None)
    return bool(check()) if callable(check) else None


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Dependencies:
    """How a caller provides what stages need, built only when the stage asks for it:
    ``embedder()`` -> an embedder of the current model (dgb.embed), ``typesense()`` -> a
    Typesense client."""

    embedder: Callable[[], Any]
    typesense: Callable[[], Any]


STAGES: dict[str, type[Stage]] = {"enrich": EnrichStage, "embed": EmbedStage, "index": IndexStage}


def build(name: str, conn, s, deps: Dependencies) -> Stage:
    """The stage ``name`` for settings ``s`` (dgb.config.Settings) on ``conn``."""
    try:
        cls = STAGES[name]
    except KeyError:
        raise ValueError(f"unknown stage {name!r}; expected one of {list(STAGES)}") from None
    return cls.from_settings(conn, s, deps)


def _key(rows: list[dict]) -> tuple:
    """What a prefetched call is for: the rows' ids and versions (an edit meanwhile is new work)."""
    return tuple((r["unique_id"], r.get("version")) for r in rows)
