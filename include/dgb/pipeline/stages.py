"""The event-driven stages: enrich, embed, index. Each is a :class:`Stage`.

Idempotency (production's skip rules: theme set, embedding set, upsert; made version-aware):
* enrich: done when ``enriched_at`` is set (an edit resets it);
* embed: done when ``embedded_at`` is set with the current model (a model change = stale);
* index: done when ``indexed_version = version`` (every change that affects the document bumps
  ``version``: an edit, enrichment, embedding, an integrity flag).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from dgb import topology
from dgb.pipeline.stage import Failure, Stage


class EnrichStage(Stage):
    name = "enrich"
    subscriptions = (topology.SUB_ENRICHMENT,)
    next_topic = topology.TOPIC_ENRICHED
    columns = ("title", "subtitle", "editorial_lead", "content", "enriched_at", "removed_at")
    sweep_order = "scraped_at"

    def __init__(self, classifier, conn=None):
        self.classifier = classifier
        self.conn = conn
        self._theme_ids: dict[str, int] | None = None

    def pending_condition(self) -> str:
        return "enriched_at IS NULL AND removed_at IS NULL"

    def is_done(self, row: dict) -> bool:
        return row["enriched_at"] is not None

    def ready(self, row: dict) -> bool:
        return row["removed_at"] is None

    def process(self, rows: list[dict]) -> dict[str, Any]:
        from dgb.enrich.base import ArticleText, ClassificationFailure

        items = [ArticleText(r["unique_id"], r["title"] or "", r["subtitle"], r["editorial_lead"], r["content"] or "")
                 for r in rows]
        results = self.classifier.classify_batch(items)
        out: dict[str, Any] = {}
        for row, res in zip(rows, results):
            if isinstance(res, ClassificationFailure):
                out[row["unique_id"]] = Failure(res.reason, res.detail, res.retryable)
            else:
                out[row["unique_id"]] = res
        self._record_usage(results)
        return out

    def _record_usage(self, results) -> None:
        usage = [r.usage for r in results if getattr(r, "usage", None)]
        if not usage or self.conn is None:
            return
        from dgb.enrich import ledger

        model_id = next((u.get("model_id") for u in usage if u.get("model_id")), getattr(self.classifier, "model_id", "unknown"))
        ledger.record_usage(self.conn, model_id, usage)

    def _themes(self, cur) -> dict[str, int]:
        if self._theme_ids is None:
            cur.execute("SELECT code, id FROM themes")
            self._theme_ids = dict(cur.fetchall())
        return self._theme_ids

    def persist(self, cur, row: dict, result) -> dict | None:
        ids = self._themes(cur)
        cur.execute(
            "UPDATE news SET theme_l1_id = %s, theme_l2_id = %s, theme_l3_id = %s, most_specific_theme_id = %s,"
            " summary = %s, classifier = %s, classifier_version = %s, theme_confidence = %s,"
            " enriched_at = %s, version = version + 1, updated_at = now(), last_error = NULL,"
            " last_error_stage = NULL WHERE unique_id = %s AND version = %s",
            (ids.get(result.theme_l1), ids.get(result.theme_l2), ids.get(result.theme_l3),
             ids.get(result.most_specific), result.summary, result.classifier, result.classifier_version,
             result.confidence, result.enriched_at, row["unique_id"], row["version"]),
        )
        if cur.rowcount != 1:
            return None
        return {"unique_id": row["unique_id"], "enriched_at": result.enriched_at,
                "most_specific_theme_code": result.most_specific, "has_summary": bool(result.summary)}


class EmbedStage(Stage):
    name = "embed"
    subscriptions = (topology.SUB_EMBEDDINGS,)
    next_topic = topology.TOPIC_EMBEDDED
    columns = ("title", "summary", "content", "enriched_at", "embedded_at", "embedding_model", "removed_at")
    sweep_order = "enriched_at"

    def __init__(self, embedder, model_name: str):
        self.embedder = embedder
        self.model_name = model_name

    def pending_condition(self) -> str:
        return "enriched_at IS NOT NULL AND embedded_at IS NULL AND removed_at IS NULL"

    def is_done(self, row: dict) -> bool:
        return row["embedded_at"] is not None and row["embedding_model"] == self.model_name

    def ready(self, row: dict) -> bool:
        return row["enriched_at"] is not None and row["removed_at"] is None

    def process(self, rows: list[dict]) -> dict[str, Any]:
        from dgb.embed.model import prepare_text

        texts = [prepare_text(r["title"] or "", r["summary"], r["content"]) for r in rows]
        vectors = self.embedder.encode(texts, batch_size=32)
        if vectors.shape != (len(rows), self.embedder.dim):
            raise RuntimeError(f"embedder returned shape {vectors.shape} for {len(rows)} texts")
        return {r["unique_id"]: vectors[i] for i, r in enumerate(rows)}

    def persist(self, cur, row: dict, vector) -> dict | None:
        now = datetime.now(timezone.utc)
        cur.execute(
            "UPDATE news SET content_embedding = %s, embedding_model = %s, embedding_dim = %s,"
            " embedding_generated_at = %s, embedded_at = %s, version = version + 1, updated_at = now(),"
            " last_error = NULL, last_error_stage = NULL WHERE unique_id = %s AND version = %s",
            ([float(x) for x in vector], self.model_name, len(vector), now, now, row["unique_id"], row["version"]),
        )
        if cur.rowcount != 1:
            return None
        return {"unique_id": row["unique_id"], "embedded_at": now, "embedding_dim": len(vector)}


class IndexStage(Stage):
    """Builds each Typesense document whole from PostgreSQL and upserts it (or deletes it when
    the article was removed); marks ``indexed_version`` for the version it indexed."""

    name = "index"
    subscriptions = (topology.SUB_TYPESENSE, topology.SUB_TYPESENSE_UPDATE)
    next_topic = None
    columns = ("enriched_at", "indexed_version", "removed_at")
    sweep_order = "updated_at"

    def __init__(self, ts, alias: str, conn, dim: int):
        self.ts, self.alias, self.conn, self.dim = ts, alias, conn, dim

    def pending_condition(self) -> str:
        return "enriched_at IS NOT NULL AND indexed_version IS DISTINCT FROM version"

    def is_done(self, row: dict) -> bool:
        return row["indexed_version"] == row["version"]

    def ready(self, row: dict) -> bool:
        return row["enriched_at"] is not None

    def process(self, rows: list[dict]) -> dict[str, Any]:
        from dgb.search import index

        result = index.sync(self.ts, self.alias, self.conn, [r["unique_id"] for r in rows], self.dim)
        out: dict[str, Any] = {}
        for r in rows:
            uid = r["unique_id"]
            if uid in result.failed:
                out[uid] = Failure("index_failed", str(result.failed[uid]), True)
            else:
                out[uid] = True
        return out


STAGES = {"enrich": EnrichStage, "embed": EmbedStage, "index": IndexStage}
