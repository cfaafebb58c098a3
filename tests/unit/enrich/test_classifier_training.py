"""Training the offline classifier on production's exported archive (``archive.jsonl`` format):
the file is read with its gaps (NaN fields), its four agencies teach no agency prior, and
``scripts/train_classifier.py --archive-file`` writes a head that loads and classifies (a small
sample of the real file: tests/fixtures/classifier/archive_sample.jsonl)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from dgb.enrich import training
from dgb.enrich.contract import ArticleText
from dgb.enrich.head import Head
from dgb.enrich.local import VERSION, LocalClassifier
from dgb.taxonomy import load_taxonomy

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "tests" / "fixtures" / "classifier" / "archive_sample.jsonl"


def _script():
    spec = importlib.util.spec_from_file_location(
        "train_classifier", REPO / "scripts" / "train_classifier.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_classifier"] = module
    spec.loader.exec_module(module)
    return module


def test_archive_file_rows_carry_no_agency_prior_and_read_nan_as_missing():
    rows = training.load_archive_file(SAMPLE)
    raw = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(raw) == 32 and {r.source for r in rows} == {"archive"}
    assert all(not r.agency_prior and r.weight == 1.0 for r in rows)
    assert {r.l1 for r in rows} == {"04", "06", "09", "20"}
    # the export writes NaN for a missing subtitle or summary: read as missing, never as text
    assert any(isinstance(r["subtitle"], float) for r in raw)
    assert all(r.item.subtitle is None or isinstance(r.item.subtitle, str) for r in rows)
    assert sum(r.reference_summary is not None for r in rows) == sum(
        isinstance(r["reference_summary"], str) for r in raw
    )
    assert training.prior_agencies(rows) == [None] * len(rows)
    assert len(training.load_archive_file(SAMPLE, limit=5)) == 5


def test_an_excerpt_is_the_title_and_the_first_characters_of_the_content():
    item = ArticleText("x", "Título", "Linha fina", "Chapéu", "abc " * 300, "mec")
    short = training.excerpt_item(item)
    assert (short.title, short.subtitle, short.editorial_lead, short.agency) == ("Título", None, None, "mec")
    assert short.content == item.content[: training.EXCERPT_CHARS] and len(short.content) == 500


def test_content_chars_are_each_items_length_whole_and_as_an_excerpt():
    items = [
        ArticleText("a", "T", None, None, "x" * 2000, None),
        ArticleText("b", "T", "sub", None, "y" * 40, "mec"),
        ArticleText("c", "T", None, None, None, None),
    ]
    whole, excerpt = training.content_chars(items)
    assert whole.tolist() == [2000, 40, 0]
    assert excerpt.tolist() == [training.EXCERPT_CHARS, 40, 0]


def test_balanced_weights_make_every_theme_weigh_alike():
    labels = np.array(["01"] * 6 + ["02"] * 2)
    w = training.balanced(np.ones(8), labels)
    assert w[labels == "01"].sum() == pytest.approx(w[labels == "02"].sum())


def test_train_classifier_on_the_archive_file_writes_a_head_that_classifies(tmp_path, capsys):
    out = tmp_path / "head.npz"
    script = _script()
    assert script.main(["--no-dev-data", "--archive-file", str(SAMPLE), "--out", str(out)]) == 0
    assert "archive file: 32 labelled articles" in capsys.readouterr().out

    head = Head.load(out)
    meta = head.meta
    assert meta["version"] == VERSION and meta["trained_on"] == {"archive": 32}
    assert set(meta["cv_level1_agreement"]) == {"archive", "archive_excerpts"}
    # four agencies, none of them a prior for anyone else
    assert meta["rows_without_agency_prior"] == 32 and meta["agencies_with_prior"] == 0
    assert head.agencies == () and head.Wa.shape == (len(head.codes), 0)
    assert 0.0 <= meta["hybrid_threshold"] <= 1.0 and head.scale > 0
    trained = {c for c, row in zip(head.codes, head.W) if np.any(row)}
    assert trained == {"04", "06", "09", "20"}

    from dgb.embed import get_embedder

    clf = LocalClassifier(get_embedder(prefer="local"), load_taxonomy(), head=head).warm()
    rows = training.load_archive_file(SAMPLE)
    results = clf.classify_batch([r.item for r in rows])
    agree = np.mean([res.theme_l1 == r.l1 for res, r in zip(results, rows)])
    assert agree >= 0.9, agree  # its own training articles, four well-separated themes
    # the agency changes nothing: the head learnt no prior from these four agencies
    [with_agency] = clf.classify_batch([rows[0].item])
    item = rows[0].item
    [without] = clf.classify_batch(
        [ArticleText(None, item.title, item.subtitle, item.editorial_lead, item.content, None)]
    )
    assert with_agency.confidence == without.confidence

    # deterministic: the same data trains the same head
    again = tmp_path / "again.npz"
    assert script.main(["--no-dev-data", "--archive-file", str(SAMPLE), "--out", str(again)]) == 0
    second = Head.load(again)
    assert second.scale == head.scale and second.meta == head.meta
    assert np.array_equal(second.W, head.W) and np.array_equal(second.b, head.b)
    assert np.array_equal(second.lexical.W, head.lexical.W) and second.lexical.terms == head.lexical.terms


def test_train_classifier_refuses_a_negative_file_limit(capsys):
    with pytest.raises(SystemExit):
        _script().main(["--no-dev-data", "--archive-file", str(SAMPLE), "--archive-file-limit", "-1"])
    assert "must be 0 (all) or a positive number" in capsys.readouterr().err
