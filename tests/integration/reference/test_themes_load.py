"""Loading the taxonomy into PostgreSQL when the tree changed: articles classified with a code
that is gone (or whose label changed) are queued for enrichment again, and the gone ``themes`` rows
are deleted; articles with valid codes are left alone. Real PostgreSQL (``pg``)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from dgb import db
from dgb.pipeline.stages import EnrichStage
from dgb.taxonomy import load_taxonomy, themes_rows

pytestmark = pytest.mark.stack

WHEN = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


def _old_tree() -> list[dict]:
    """Today's tree plus a level-2/3 branch that the new tree drops, and one code labelled otherwise."""
    rows = [dict(r) for r in themes_rows(load_taxonomy())]
    for row in rows:
        if row["code"] == "01.01.02":
            row["label"] = "Rótulo antigo"
    rows += [
        {
            "code": "01.99",
            "label": "Ramo extinto",
            "full_name": "Economia e Finanças > Ramo extinto",
            "level": 2,
            "parent_code": "01",
            "description": "Ramo que saiu da árvore.",
            "keywords": ["extinto"],
        },
        {
            "code": "01.99.01",
            "label": "Folha extinta",
            "level": 3,
            "parent_code": "01.99",
            "full_name": "Economia e Finanças > Ramo extinto > Folha extinta",
            "description": "Folha que saiu da árvore.",
            "keywords": [],
        },
    ]
    return rows


def _add_enriched(conn, uid: str, l1: str, l2: str, l3: str) -> None:
    """An article enriched with (l1, l2, l3), embedded and indexed at its version."""
    with db.transaction(conn) as cur:
        cur.execute("SELECT code, id FROM themes WHERE code = ANY(%s)", ([l1, l2, l3],))
        ids = dict(cur.fetchall())
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, content, version, scraped_at,"
            " theme_l1_id, theme_l2_id, theme_l3_id, most_specific_theme_id, summary, classifier,"
            " classifier_version, theme_confidence, enriched_at, content_embedding, embedding_model,"
            " embedding_dim, embedding_generated_at, embedded_at, indexed_at, indexed_version)"
            " VALUES (%s, 'fazenda', %s, %s, %s, 'Texto.', 3, %s, %s, %s, %s, %s, 'Resumo.', 'local', 'v1',"
            " 0.8, %s, %s, 'test-model', 2, %s, %s, %s, 3)",
            (
                uid,
                f"Notícia {uid}",
                f"https://www.gov.br/fazenda/{uid}",
                WHEN - timedelta(hours=2),
                WHEN,
                ids[l1],
                ids[l2],
                ids[l3],
                ids[l3],
                WHEN,
                [0.5, 0.5],
                WHEN,
                WHEN,
                WHEN,
            ),
        )


def _state(conn, uid: str) -> dict:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT enriched_at, embedded_at, summary, theme_l1_id, theme_l2_id, theme_l3_id,"
            " most_specific_theme_id, version, indexed_version FROM news WHERE unique_id = %s",
            (uid,),
        )
        names = [d.name for d in cur.description]
        return dict(zip(names, cur.fetchone()))


def _pending_enrich(conn) -> set[str]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT unique_id FROM news WHERE {EnrichStage(classifier=None).pending_condition()}")
        return {r[0] for r in cur.fetchall()}


def test_articles_on_gone_or_relabelled_codes_are_enriched_again(pg, caplog):
    db.upsert_themes(pg, _old_tree())
    _add_enriched(pg, "gone", "01", "01.99", "01.99.01")
    _add_enriched(pg, "relabelled", "01", "01.01", "01.01.02")
    _add_enriched(pg, "valid", "01", "01.01", "01.01.01")
    valid_before = _state(pg, "valid")
    assert _pending_enrich(pg) == set()

    tree = themes_rows(load_taxonomy())
    with caplog.at_level(logging.INFO, logger="dgb.db"):
        assert db.upsert_themes(pg, tree) == len(tree)

    assert _pending_enrich(pg) == {"gone", "relabelled"}
    for uid in ("gone", "relabelled"):
        state = _state(pg, uid)
        assert state["enriched_at"] is None and state["embedded_at"] is None and state["summary"] is None
        assert [
            state[k] for k in ("theme_l1_id", "theme_l2_id", "theme_l3_id", "most_specific_theme_id")
        ] == [None] * 4
        assert state["version"] == 4 and state["indexed_version"] == 3  # the index stage will see it too
    assert _state(pg, "valid") == valid_before

    with pg.cursor() as cur:
        cur.execute("SELECT code, label FROM themes")
        stored = dict(cur.fetchall())
        cur.execute(
            "SELECT count(*) FROM news n WHERE EXISTS (SELECT 1 FROM unnest(ARRAY[n.theme_l1_id,"
            " n.theme_l2_id, n.theme_l3_id, n.most_specific_theme_id]) AS t(id) WHERE t.id IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM themes th WHERE th.id = t.id AND th.code = ANY(%s)))",
            ([r["code"] for r in tree],),
        )
        dangling = cur.fetchone()[0]
    assert stored == {r["code"]: r["label"] for r in tree}
    assert dangling == 0
    messages = " | ".join(r.getMessage() for r in caplog.records)
    assert "2 code(s) gone, 1 relabelled; 2 article(s) queued for enrichment again" in messages
    assert "2 code(s) no longer in the taxonomy deleted" in messages

    # idempotent: loading the same tree again touches nothing
    caplog.clear()
    again = {uid: _state(pg, uid) for uid in ("gone", "relabelled", "valid")}
    with caplog.at_level(logging.INFO, logger="dgb.db"):
        db.upsert_themes(pg, tree)
    assert {uid: _state(pg, uid) for uid in again} == again
    assert not [r for r in caplog.records if "themes:" in r.getMessage()]
