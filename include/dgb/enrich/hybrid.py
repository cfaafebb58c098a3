"""``DGB_CLASSIFIER=hybrid``: the local classifier first, Amazon Bedrock for the articles it is
unsure of.

Every article is classified locally (one encode call per batch). An article whose calibrated
level-1 confidence (``theme_confidence``) is below the threshold is sent to Bedrock
(:class:`dgb.enrich.bedrock.BedrockClassifier`, with its own backoff on throttling), and
Bedrock's answer replaces the local one (``classifier = "bedrock"``, ``confidence`` None as
for any Bedrock answer; its ``usage`` carries the calls and tokens for the daily ledger
:mod:`dgb.enrich.ledger`, plus ``routed_from_local`` = the local level-1 code and confidence).

When Bedrock cannot answer (throttled after its retries, unavailable, invalid output) the
article KEEPS its local answer and the result carries Bedrock's usage (so the ledger counts the
failed calls): a throttled Bedrock never blocks the pipeline. Such articles stay findable as
``classifier = 'local' AND theme_confidence < threshold``. Errors that concern every call
(credentials, model access: :class:`dgb.enrich.bedrock.BedrockError`) raise, as in bedrock mode.

The threshold is ``DGB_HYBRID_THRESHOLD``; unset, the one chosen when the local head was trained
(``scripts/train_classifier.py``: the best simulated agreement with at most 30% of real.jsonl
routed), else :data:`DEFAULT_THRESHOLD`.
"""

from __future__ import annotations

import logging

from dgb.enrich.contract import ArticleText, Classification, ClassificationResult

log = logging.getLogger(__name__)

NAME = "hybrid"
VERSION = "hybrid-1"
DEFAULT_THRESHOLD = 0.5


def default_threshold(local) -> float:
    """The threshold recorded with the local classifier's trained head, else DEFAULT_THRESHOLD."""
    head = getattr(local, "head", None)
    value = (head.meta or {}).get("hybrid_threshold") if head is not None else None
    return float(value) if value is not None else DEFAULT_THRESHOLD


class HybridClassifier:
    """Local first; Bedrock for the articles whose local confidence is below ``threshold``."""

    name = NAME

    def __init__(self, local, bedrock, threshold: float | None = None):
        if threshold is None:
            threshold = default_threshold(local)
        if not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"hybrid threshold must be between 0 and 1, got {threshold!r}")
        self.local = local
        self.bedrock = bedrock
        self.threshold = float(threshold)
        self.version = f"{VERSION} (below {self.threshold:.2f} -> {bedrock.version}; else {local.version})"

    @property
    def model_id(self) -> str:
        """The Bedrock model (what the usage ledger is keyed by)."""
        return self.bedrock.model_id

    def routes(self, result: ClassificationResult) -> bool:
        """True when a local result should go to Bedrock."""
        return (
            isinstance(result, Classification)
            and result.confidence is not None
            and result.confidence < self.threshold
        )

    def classify_batch(self, items: list[ArticleText]) -> list[ClassificationResult]:
        results = list(self.local.classify_batch(items))
        routed = [n for n, r in enumerate(results) if self.routes(r)]
        if not routed:
            return results
        answers = self.bedrock.classify_batch([items[n] for n in routed])
        kept = 0
        for n, answer in zip(routed, answers):
            mine = results[n]
            note = {"theme_l1": mine.theme_l1, "confidence": mine.confidence}
            if isinstance(answer, Classification):
                answer.usage = dict(answer.usage or {}, routed_from_local=note)
                results[n] = answer
            else:
                kept += 1
                usage = dict(answer.usage or {}, routed_from_local=note, bedrock_failure=answer.reason)
                mine.usage = usage
                log.warning(
                    "hybrid: Bedrock could not classify %s (%s: %s); keeping the local answer %s "
                    "(confidence %.2f)",
                    items[n].unique_id,
                    answer.reason,
                    answer.detail,
                    mine.theme_l1,
                    mine.confidence,
                )
        log.info(
            "hybrid: %d of %d articles routed to Bedrock (threshold %.2f), %d kept local after a "
            "Bedrock failure",
            len(routed),
            len(items),
            self.threshold,
            kept,
        )
        return results
