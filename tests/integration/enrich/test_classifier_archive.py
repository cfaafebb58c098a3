"""Training the local classifier's head on an operator's own labelled archive (real PostgreSQL):
which ``news`` rows count as labelled (production's and Bedrock's themes, never the local
classifier's own), and ``scripts/train_classifier.py --archive --no-dev-data`` end to end with the
real model, writing a head that loads and classifies."""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from dgb import db
from dgb.enrich import training, training_level2
from dgb.enrich.head import Head
from dgb.enrich.local import LocalClassifier
from dgb.taxonomy import load_taxonomy, themes_rows

pytestmark = pytest.mark.stack

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"
WHEN = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
THEMES = ("02", "03", "10")  # the corpus has 9-10 articles of each


def corpus(themes=THEMES) -> list[dict]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r["theme_l1"] in themes]


def _insert(conn, uid: str, article: dict, *, classifier: str | None, l1: str | None, age_h: int) -> None:
    with db.transaction(conn) as cur:
        cur.execute("SELECT code, id FROM themes WHERE code = ANY(%s)", ([l1, f"{l1}.01"],))
        ids = dict(cur.fetchall())
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, subtitle, url, published_at, content,"
            " theme_l1_id, theme_l2_id, classifier) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                uid,
                article["agency"],
                article["title"],
                article.get("subtitle"),
                f"https://www.gov.br/{article['agency']}/{uid}",
                WHEN - timedelta(hours=age_h),
                article["content"],
                ids.get(l1),
                ids.get(f"{l1}.01"),
                classifier,
            ),
        )


@pytest.fixture
def archive_db(pg):
    """The taxonomy loaded; the corpus articles of :data:`THEMES` labelled by production (odd
    rows) or Bedrock (even rows), plus rows that must NOT train: the local classifier's answers,
    a production row without a theme and a row never classified."""
    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    arts = corpus()
    for n, a in enumerate(arts):
        _insert(
            pg, f"arch-{n:03d}", a, classifier="bedrock" if n % 2 else "production", l1=a["theme_l1"], age_h=n
        )
    other = corpus(("05",))
    _insert(pg, "local-000", other[0], classifier="local", l1="05", age_h=0)
    _insert(pg, "prod-no-theme", other[1], classifier="production", l1=None, age_h=0)
    _insert(pg, "never-classified", other[2], classifier=None, l1=None, age_h=0)
    return pg, arts


def test_the_archive_is_the_rows_production_or_bedrock_labelled_newest_first(archive_db):
    conn, arts = archive_db
    rows = training.load_archive(conn)
    assert [a.item.unique_id for a in rows] == [f"arch-{n:03d}" for n in range(len(arts))]
    assert {a.source for a in rows} == {"archive"} and all(a.weight == 1.0 for a in rows)
    first = rows[0]
    assert (first.l1, first.item.title, first.item.agency) == (
        arts[0]["theme_l1"],
        arts[0]["title"],
        arts[0]["agency"],
    )
    assert first.item.subtitle == arts[0].get("subtitle") and first.item.content.startswith(
        arts[0]["content"][:50]
    )
    # the level-2 label travels (what the level-2 part trains on), and maps back to our code
    assert first.l2_label == load_taxonomy().get(f"{first.l1}.01").label
    assert training_level2.level2_targets(rows[:1], load_taxonomy()) == [f"{first.l1}.01"]
    assert [a.item.unique_id for a in training.load_archive(conn, limit=3)] == [
        "arch-000",
        "arch-001",
        "arch-002",
    ]
    with pytest.raises(ValueError, match="positive number"):
        training.load_archive(conn, limit=0)
    # a read only: the connection is left outside a transaction and nothing changed
    assert conn.info.transaction_status.name == "IDLE"


def _script():
    spec = importlib.util.spec_from_file_location(
        "train_classifier", REPO / "scripts" / "train_classifier.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_classifier"] = module
    spec.loader.exec_module(module)
    return module


def test_train_classifier_on_the_archive_alone_writes_a_head_that_classifies(archive_db, tmp_path, capsys):
    conn, arts = archive_db
    out = tmp_path / "head.npz"
    script = _script()
    assert script.main(["--archive", "--no-dev-data", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"archive: {len(arts)} labelled articles" in printed

    head = Head.load(out)
    assert head.meta["trained_on"] == {"archive": len(arts)}
    assert set(head.meta["cv_level1_agreement"]) == {"archive", "archive_excerpts"}
    assert 0.0 <= head.meta["hybrid_threshold"] <= 1.0 and head.scale > 0
    # the themes the archive has get trained rows; the others only their prototype scores
    trained = {c for c, row in zip(head.codes, head.W) if np.any(row)}
    assert trained == set(THEMES)

    from dgb.embed import get_embedder

    clf = LocalClassifier(get_embedder(prefer="local"), load_taxonomy(), head=head).warm()
    items = [
        training.ArticleText(None, a["title"], a.get("subtitle"), None, a["content"], a["agency"])
        for a in arts
    ]
    results = clf.classify_batch(items)
    agree = np.mean([r.theme_l1 == a["theme_l1"] for r, a in zip(results, arts)])
    assert agree >= 0.9  # its own training articles, three well-separated themes


def test_train_classifier_refuses_to_train_on_nothing(pg, tmp_path, capsys):
    script = _script()
    with pytest.raises(SystemExit):
        script.main(["--no-dev-data"])
    assert "--no-dev-data needs --archive" in capsys.readouterr().err
    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    out = tmp_path / "head.npz"
    assert script.main(["--archive", "--no-dev-data", "--out", str(out)]) == 2
    assert "nothing to train on" in capsys.readouterr().err and not out.exists()
