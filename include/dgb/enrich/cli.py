"""``dgb classify``: classify articles read as JSON lines on stdin, with the configured backend.

Input, one JSON object per line: ``title`` (required), optional ``subtitle``, ``editorial_lead``,
``content``, ``agency`` (the agency key, e.g. ``saude``: the local classifier uses it as a prior)
and ``unique_id``. Output with ``--json``, one line per classified input::

    {"line": 3, "l1": "03", "l2": "03.02", "l3": "03.02.01", "most_specific": "03.02.01",
     "summary": "...", "confidence": 0.93}

(codes; ``null`` when absent). A bad input line, or an article the classifier could not
classify, is reported on stderr with its line number and produces no output line; the other
lines are still classified, and the command exits 1 at the end. Uses
:func:`dgb.enrich.base.get_classifier` (``DGB_CLASSIFIER``), the same code path as the DAG.
"""

from __future__ import annotations

import json
import sys
from typing import IO

from dgb.enrich.base import BACKENDS, ArticleText, ClassificationFailure

TEXT_FIELDS = ("title", "subtitle", "editorial_lead", "content", "unique_id", "agency")


def parse_line(raw: str) -> ArticleText:
    """One input line -> ArticleText; ValueError with a readable message when it is bad."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    for name in TEXT_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"field {name!r} must be a string, got {type(value).__name__}")
    if not (data.get("title") or "").strip():
        raise ValueError("missing or empty 'title'")
    return ArticleText.from_mapping(data)


def _emit(out: IO[str], line_no: int, result, as_json: bool) -> None:
    if as_json:
        record = {
            "line": line_no,
            "l1": result.theme_l1,
            "l2": result.theme_l2,
            "l3": result.theme_l3,
            "most_specific": result.most_specific,
            "summary": result.summary,
            "confidence": result.confidence,
        }
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        conf = "" if result.confidence is None else f"{result.confidence:.2f}"
        out.write(f"{line_no}\t{result.most_specific}\t{conf}\t{result.summary or ''}\n")


def run(
    args, stdin: IO[str] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None
) -> int:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    from dgb.config import settings as current_settings
    from dgb.enrich.base import get_classifier

    settings = current_settings()
    backend = args.backend if getattr(args, "backend", None) else settings.classifier_backend
    classifier = None  # built on the first valid batch: a run with only bad lines loads no model
    errors = 0
    pending: list[tuple[int, ArticleText]] = []

    def flush() -> None:
        nonlocal errors, classifier
        if not pending:
            return
        if classifier is None:
            classifier = get_classifier(settings, backend=backend)
        results = classifier.classify_batch([item for _, item in pending])
        for (line_no, _), result in zip(pending, results):
            if isinstance(result, ClassificationFailure):
                errors += 1
                retry = "retryable" if result.retryable else "not retryable"
                stderr.write(
                    f"line {line_no}: classification failed: {result.reason} ({retry}): {result.detail}\n"
                )
            else:
                _emit(stdout, line_no, result, args.json)
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
            if len(pending) >= args.batch_size:
                flush()
        flush()
    except Exception as exc:  # the classifier itself failed (no model, no credentials, ...)
        first = pending[0][0] if pending else "?"
        stderr.write(
            f"dgb classify: the {backend} classifier failed at the batch starting on line "
            f"{first}: {type(exc).__name__}: {exc}\n"
        )
        return 2
    if errors:
        stderr.write(f"dgb classify: {errors} line(s) failed\n")
        return 1
    return 0


def _positive_int(raw: str) -> int:
    import argparse

    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {raw!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "classify",
        help="classify articles (JSON lines on stdin) into the theme taxonomy",
        description="Read one JSON object per line on stdin (title, optional subtitle, "
        "editorial_lead, content) and print each article's themes and summary, using "
        "the configured classifier (DGB_CLASSIFIER=local|bedrock|hybrid). The local "
        "classifier's summary is extractive (copied sentences).",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print one JSON object per line: {"line", "l1", "l2", "l3", "most_specific", '
        '"summary", "confidence"} (default: tab-separated text)',
    )
    p.add_argument(
        "--batch-size", type=_positive_int, default=64, help="articles per classify call (default 64)"
    )
    p.add_argument("--backend", choices=BACKENDS, default=None, help="override DGB_CLASSIFIER for this run")
    p.set_defaults(func=run)
