"""``dgb features --json``: the reading layer of articles on stdin, offline (:mod:`dgb.features.offline`).

``dgb features backfill [--since DATE] [--limit N]``: compute the features of articles enriched
before features existed (:mod:`dgb.features.backfill`), with the configured NER backend
(``DGB_FEATURES_NER``; Bedrock through the classifier's client, backoff and ledger). Progress goes
to stderr after every batch; the last line on stdout sums the run up. Stopping it is safe: the next
run resumes with the articles not done yet."""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import date

from dgb.features.entities_cli import register_entities


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "features",
        help="article features (news_features): compute them offline, backfill them",
        description="With --json: read one JSON object per line on stdin (title, content, optional "
        "subtitle, editorial_lead, agency) and print each article's reading figures, sentiment and "
        "entities as one JSON line, offline (the local classifier's sentiment head and the offline "
        "entity extractor: the enrich stage's code path). Subcommands act on the database.",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print one JSON object per input line: {"line", "word_count", "readability_flesch", '
        '"readability_flesch_pt", "sentiment", "sentiment_method", "entities"}',
    )
    sub = p.add_subparsers(dest="features_command", metavar="SUBCOMMAND")
    b = sub.add_parser(
        "backfill",
        help="compute the features of articles enriched without them (resumable)",
        description=__doc__,
    )
    b.add_argument(
        "--since", type=date.fromisoformat, metavar="DATE", help="only articles published on or after DATE"
    )
    b.add_argument("--limit", type=int, metavar="N", help="at most N articles this run")
    b.set_defaults(func=cmd_backfill)
    register_entities(sub)  # dgb features entities merge
    p.set_defaults(func=lambda args: _offline(args) if args.json else (p.print_help(sys.stderr), 2)[1])


def _offline(args) -> int:
    from dgb.features import offline

    return offline.run(args)


def computer_from_settings(s):
    """The feature computer the enrich stage would build (NER backend from the settings)."""
    from dgb.config.features import ner_backend
    from dgb.features.compute import FeatureComputer

    if ner_backend(s.classifier_backend) != "bedrock":
        return FeatureComputer()
    from dgb.enrich.bedrock import BedrockClassifier
    from dgb.features.bedrock_ner import BedrockNer

    return FeatureComputer(BedrockNer(BedrockClassifier()))


def _sentiment_head(s):
    """The local classifier's sentiment answers (the enrich stage's), or None with a warning when
    no embedder can be had (the lexicon then answers)."""
    from dgb.embed import get_embedder
    from dgb.enrich.local import LocalClassifier

    try:
        classifier = LocalClassifier(get_embedder(s), head=False)
    except Exception as exc:  # no model service and no local model
        print(
            f"features backfill: no embedder ({type(exc).__name__}: {exc}); sentiment from the lexicon",
            file=sys.stderr,
        )
        return None
    if classifier.sentiment_head is None:
        print(
            "features backfill: no sentiment head for this model; sentiment from the lexicon", file=sys.stderr
        )
        return None
    return classifier.sentiments


def cmd_backfill(args) -> int:
    from dgb import db
    from dgb.config import settings
    from dgb.features import backfill

    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    if args.limit is not None and args.limit < 0:
        print("--limit must be 0 or more", file=sys.stderr)
        return 2
    s = settings()
    sentiments = _sentiment_head(s)
    conn = db.connect(s.pg_dsn())
    try:
        result = backfill.run(
            conn,
            computer_from_settings(s),
            since=args.since,
            limit=args.limit,
            progress=backfill.print_progress,
            sentiments=sentiments,
        )
    finally:
        conn.close()
    print(
        f"features backfill: {result.done} articles in {result.batches} batches, {result.seconds:.1f} s "
        f"({result.rate:.1f} articles/s), {result.bedrock_calls} Bedrock calls; "
        f"{max(0, result.total - result.done)} left"
    )
    return 0
