"""``dgb features --json``: the reading layer of articles read as JSON lines on stdin, offline.

Input, one JSON object per line: ``title`` (required), ``content``, optional ``subtitle``,
``editorial_lead`` and ``agency`` (the agency key). Output, one line per valid input::

    {"line": 1, "word_count": 412, "readability_flesch": 21.3, "readability_flesch_pt": 38.9,
     "sentiment": {"label": "positive", "score": 0.41}, "sentiment_method": "local-head-1",
     "entities": [{"text": "Ibama", "type": "ORG", "count": 2, "forma_canonica": "Instituto ...",
                   "salience": 0.71, "canonical_id": "dgb_ibama"}, ...]}

The same code path as the enrich stage with the offline backends: the local classifier answers
the sentiment (its sentiment head over its own vectors; the embedder of ``DGB_EMBEDDER``, the model
service or the bundled model in-process, no download), :class:`dgb.features.compute.FeatureComputer`
computes the rest with the offline entity extractor. Deterministic: the same input gives the same
output. Canonical ids are the ones the extractor proposes (an agency's ``dgb_<key>``, a gazetteer's
Wikidata QID) or the minted id; with no database, aliases an operator merged are not applied
(the enrich stage resolves them through ``entity_alias``). A bad input line is reported on stderr
with its line number and gives no output line; the others are computed, and the command exits 1
at the end (2 when the classifier cannot run at all).
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from typing import IO

from dgb.enrich.base import ArticleText, ClassificationFailure
from dgb.enrich.cli import parse_line
from dgb.features.compute import FeatureComputer
from dgb.features.entities import agency_id, is_qid, mint_id, minted_type

BATCH = 64
KEYS = ("word_count", "readability_flesch", "readability_flesch_pt", "sentiment", "sentiment_method")


@lru_cache(maxsize=1)
def _agency_ids() -> frozenset[str]:
    from dgb.agencies import load_agencies

    return frozenset(agency_id(key) for key in load_agencies())


def offline_canonical_id(mention: dict) -> str:
    """A mention's canonical id without a database, by the registry's rule for a name it does not
    know yet (:func:`dgb.features.registry.resolve`): the extractor's proposal when it fits the type
    (a QID, an agency's ``dgb_<key>`` for an ORG, a minted id of the same type), else the minted
    ``dgb_<type>_<slug>``."""
    pid = mention.get("canonical_id")
    if pid and (
        is_qid(pid)
        or minted_type(pid) == mention["type"]
        or (mention["type"] == "ORG" and pid in _agency_ids())
    ):
        return pid
    return mint_id(mention.get("forma_canonica") or mention["text"], mention["type"])


def record(line_no: int, item: ArticleText, computer: FeatureComputer, classification) -> dict:
    """One output object: the features the stage would store, entities with their ids."""
    answer = None if isinstance(classification, ClassificationFailure) else classification.sentiment
    features = computer.compute(
        item.title,
        item.content,
        subtitle=item.subtitle,
        lead=item.editorial_lead,
        classifier_sentiment=answer,
    )
    out: dict = {"line": line_no}
    out.update({k: features.keys.get(k) for k in KEYS})
    out["entities"] = [{**m, "canonical_id": offline_canonical_id(m)} for m in features.mentions]
    return out


def run(
    args,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    classifier=None,
) -> int:
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    computer = FeatureComputer()  # the offline entity extractor
    errors = 0
    pending: list[tuple[int, ArticleText]] = []

    def flush() -> None:
        nonlocal classifier
        if not pending:
            return
        if classifier is None:
            classifier = _local_classifier()
        results = classifier.classify_batch([item for _, item in pending])
        for (line_no, item), result in zip(pending, results):
            stdout.write(json.dumps(record(line_no, item, computer, result), ensure_ascii=False) + "\n")
        stdout.flush()
        pending.clear()

    try:
        for line_no, raw in enumerate(stdin, start=1):
            if not raw.strip():
                continue
            try:
                pending.append((line_no, parse_line(raw)))
            except ValueError as exc:
                errors += 1
                stderr.write(f"line {line_no}: bad input: {exc}\n")
                continue
            if len(pending) >= BATCH:
                flush()
        flush()
    except Exception as exc:  # the model could not run at all
        first = pending[0][0] if pending else "?"
        stderr.write(
            f"dgb features: the local classifier failed at the batch starting on line {first}: "
            f"{type(exc).__name__}: {exc}\n"
        )
        return 2
    if errors:
        stderr.write(f"dgb features: {errors} line(s) failed\n")
        return 1
    return 0


def _local_classifier():
    from dgb.config import settings
    from dgb.enrich.base import get_classifier

    return get_classifier(settings(), backend="local")
