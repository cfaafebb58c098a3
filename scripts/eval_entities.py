"""Measure the offline entity extractor (dgb.features.rules_ner) on the labelled real news of
evaluation/entities/: precision and recall per type (ORG, PER, LOC), with counts.

    .venv/bin/python scripts/eval_entities.py [--split dev|test|all] [--errors ORG|PER|LOC]

Input: ``articles.jsonl`` (``id``, ``title``, ``text``) and ``gold.jsonl`` (``id``, ``entities``:
``[{type, forms}]``), labelled by ``evaluation/entities/guide.md``. The extractor is called as the
enrich stage would call it: ``extract(title, content)`` with the title the text's first line and the
content the rest after the blank line.

Matching rule:

* **normalisation** of a surface: NFKD, accents (combining marks) dropped, lowercase, whitespace
  (non-breaking spaces included) collapsed to one space and trimmed;
* **predictions** of an article: the distinct (type, normalised surface) pairs the extractor
  outputs for it, where each mention of type ORG, PER or LOC gives its ``text`` and its
  ``forma_canonica`` (two pairs, or one when they normalise alike);
* a prediction is **correct** when its normalised surface equals one of the normalised forms of a
  gold entity **of the same type** in that article; otherwise it is a false positive (a wrong
  type, a wrong span or a name the gold does not have);
* precision = correct predictions / predictions; **recall** = gold entities with at least one
  correctly predicted form / gold entities (an entity missed entirely is a false negative).

``--split``: the articles are halved by a stable hash of their id (the first byte of its SHA-1:
even -> ``dev``, odd -> ``test``, ~50/50). Rules are improved by looking at the dev half's errors
only; the test half is what the figures are reported on. ``--errors TYPE`` lists that type's false
positives (prediction and article) and false negatives (the gold entity's forms) in the chosen half.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "evaluation" / "entities"
TYPES = ("ORG", "PER", "LOC")


def normalise(text: str) -> str:
    """NFKD, combining marks dropped, lowercase, whitespace (incl. U+00A0) collapsed."""
    decomposed = unicodedata.normalize("NFKD", text or "")
    folded = "".join(c for c in decomposed if not unicodedata.combining(c)).lower()
    return re.sub(r"\s+", " ", folded).strip()


def split_of(article_id: str) -> str:
    return "dev" if hashlib.sha1(article_id.encode("utf-8")).digest()[0] % 2 == 0 else "test"


def title_and_content(text: str) -> tuple[str, str]:
    """The title (first line) and the content (the rest after the blank line)."""
    title, _, content = text.partition("\n\n")
    return title, content


def predictions(mentions: Iterable[dict]) -> set[tuple[str, str]]:
    """The distinct (type, normalised surface) pairs of an article's mentions (ORG, PER, LOC)."""
    out = set()
    for m in mentions:
        if m.get("type") not in TYPES:
            continue
        for surface in (m.get("text"), m.get("forma_canonica")):
            if isinstance(surface, str) and normalise(surface):
                out.add((m["type"], normalise(surface)))
    return out


@dataclass
class Score:
    correct: int = 0
    predicted: int = 0
    found: int = 0  # gold entities with a correctly predicted form
    gold: int = 0
    false_positives: list[tuple[str, str]] = field(default_factory=list)  # (surface, article id)
    false_negatives: list[tuple[list[str], str]] = field(default_factory=list)  # (forms, article id)

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.found / self.gold if self.gold else 0.0


def score_article(
    article_id: str, predicted: set[tuple[str, str]], gold: list[dict], scores: dict[str, Score]
) -> None:
    """Add one article's predictions against its gold entities to ``scores`` (per type)."""
    for etype in TYPES:
        s = scores[etype]
        entities = [e for e in gold if e.get("type") == etype]
        forms = [{normalise(f) for f in e["forms"]} for e in entities]
        every = set().union(*forms) if forms else set()
        mine = {surface for t, surface in predicted if t == etype}
        s.predicted += len(mine)
        for surface in sorted(mine):
            if surface in every:
                s.correct += 1
            else:
                s.false_positives.append((surface, article_id))
        s.gold += len(entities)
        for entity, fs in zip(entities, forms):
            if fs & mine:
                s.found += 1
            else:
                s.false_negatives.append((entity["forms"], article_id))


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def evaluate(
    articles: list[dict], gold: dict[str, list[dict]], extract: Callable[[str, str], list[dict]]
) -> dict[str, Score]:
    scores = {t: Score() for t in TYPES}
    for a in articles:
        title, content = title_and_content(a["text"])
        score_article(a["id"], predictions(extract(title, content)), gold.get(a["id"], []), scores)
    return scores


def report(scores: dict[str, Score], label: str, out=None) -> None:
    out = out or sys.stdout
    print(f"{label}", file=out)
    for t in TYPES:
        s = scores[t]
        print(
            f"  {t}  P {s.precision:.3f} ({s.correct}/{s.predicted})  R {s.recall:.3f} ({s.found}/{s.gold})",
            file=out,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("dev", "test", "all"), default="all")
    ap.add_argument("--errors", choices=TYPES, help="list this type's false positives and negatives")
    ap.add_argument("--data", type=Path, default=DATA, help="folder with articles.jsonl and gold.jsonl")
    args = ap.parse_args(argv)

    from dgb.features import rules_ner

    articles = load(args.data / "articles.jsonl")
    gold = {g["id"]: g["entities"] for g in load(args.data / "gold.jsonl")}
    chosen = [a for a in articles if args.split == "all" or split_of(a["id"]) == args.split]
    scores = evaluate(chosen, gold, rules_ner.extract)
    report(scores, f"{len(chosen)} articles ({args.split})")
    if args.errors:
        s = scores[args.errors]
        print(f"\nfalse positives ({len(s.false_positives)}):")
        for surface, aid in s.false_positives:
            print(f"  {surface!r}  [{aid[:24]}]")
        print(f"\nfalse negatives ({len(s.false_negatives)}):")
        for forms, aid in s.false_negatives:
            print(f"  {' | '.join(forms)}  [{aid[:24]}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
