"""View counts (dgb.engagement.views) read from a PostgreSQL database holding Umami's real tables,
with pageviews written as Umami writes them: counted over 30 days per ``/artigos/<id>``, stored in
news_features and pushed to the index's ``view_count`` in the same run."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dgb import db
from dgb.engagement import trending, views
from tests.support.engagement import add_article, document, ensure_themes, features, index, make_index
from tests.support.umami import CUSTOM_EVENT, add_event, add_session, add_website, fresh_umami

H = timedelta(hours=1)
D = timedelta(days=1)


@pytest.fixture
def umami(pg_server):
    conn = db.connect(fresh_umami(pg_server))
    yield conn
    conn.close()


@pytest.fixture
def idx(pg, typesense_server):
    ensure_themes(pg)
    ts, alias, cleanup = make_index(typesense_server)
    yield ts, alias
    cleanup()


@pytest.fixture
def now(umami):
    with umami.cursor() as cur:
        cur.execute("SELECT now()")
        value = cur.fetchone()[0]
    umami.rollback()
    return value


def test_pageviews_and_sessions_of_30_days_per_article(pg, umami, idx, now):
    ts, alias = idx
    for uid in ("enem-recorde_a1b2c3", "vacina-campanha_d4e5f6", "sem-visitas_0a0b0c"):
        add_article(pg, uid, now - 2 * D, "01")
    index(pg, ts, alias, ["enem-recorde_a1b2c3", "vacina-campanha_d4e5f6", "sem-visitas_0a0b0c"])
    portal = add_website(umami)
    other = add_website(umami, "outro.gov.br")
    s1, s2, s3 = (add_session(umami, portal) for _ in range(3))
    enem = "/artigos/enem-recorde_a1b2c3"
    # enem: 4 pageviews by 2 sessions this month (a trailing slash and a query string count too)
    add_event(umami, portal, s1, enem, now - H)
    add_event(umami, portal, s1, enem, now - 2 * H)
    add_event(umami, portal, s2, enem + "/", now - 3 * D)
    add_event(umami, portal, s2, enem, now - 29 * D, query="utm_source=whatsapp")
    # not counted: older than 30 days, a custom event on the page, another page
    add_event(umami, portal, s3, enem, now - 31 * D)
    add_event(umami, portal, s1, enem, now - H, event_type=CUSTOM_EVENT)
    add_event(umami, portal, s3, "/busca", now - H, query="q=enem")
    add_event(umami, portal, s3, "/artigos", now - H)
    # vacina: 1 view; an id that is not an article of ours is dropped
    add_event(umami, portal, s3, "/artigos/vacina-campanha_d4e5f6", now - 5 * D)
    add_event(umami, portal, s3, "/artigos/0123456789abcdef0123456789abcdef", now - 5 * D)
    # another website of the same Umami
    osess = add_session(umami, other)
    add_event(umami, other, osess, enem, now - H)

    counts = views.read_umami(umami, 30, [portal])
    assert counts == {
        "enem-recorde_a1b2c3": (4, 2),
        "vacina-campanha_d4e5f6": (1, 1),
        "0123456789abcdef0123456789abcdef": (1, 1),
    }
    assert views.read_umami(umami, 30)["enem-recorde_a1b2c3"] == (5, 3)  # every website

    before = document(ts, alias, "enem-recorde_a1b2c3")
    out = views.run(pg, umami, ts, alias, days=30, website_ids=[portal])

    assert (out["matched"], out["unmatched"], out["zeroed"], out["changed"]) == (2, 1, 0, 2)
    assert (out["updated"], out["failed"]) == (2, 0)
    with pg.cursor() as cur:
        cur.execute("SELECT unique_id, features FROM news_features ORDER BY unique_id")
        assert cur.fetchall() == [
            ("enem-recorde_a1b2c3", {"view_count": 4, "unique_sessions": 2}),
            ("vacina-campanha_d4e5f6", {"view_count": 1, "unique_sessions": 1}),
        ]
    pg.rollback()
    doc = document(ts, alias, "enem-recorde_a1b2c3")
    assert doc["view_count"] == 4
    assert {k: v for k, v in doc.items() if k != "view_count"} == before  # nothing else touched
    # the portal's "Mais vistas" sort
    res = ts.collections[alias].documents.search({"q": "*", "sort_by": "view_count:desc", "per_page": 10})
    assert [h["document"]["unique_id"] for h in res["hits"][:2]] == [
        "enem-recorde_a1b2c3",
        "vacina-campanha_d4e5f6",
    ]


def test_counts_that_left_the_window_go_to_0_and_other_keys_stay(pg, umami, idx, now):
    ts, alias = idx
    add_article(pg, "hoje_111111", now - 3 * H, "02")
    add_article(pg, "antiga_222222", now - 20 * D, "02")
    index(pg, ts, alias, ["hoje_111111", "antiga_222222"])
    trending.run(pg, ts, alias)  # hoje_111111 holds a trending score: the import must keep it
    site = add_website(umami)
    sess = add_session(umami, site)
    add_event(umami, site, sess, "/artigos/antiga_222222", now - 10 * D)
    add_event(umami, site, sess, "/artigos/hoje_111111", now - H)
    first = views.run(pg, umami, ts, alias, days=30)
    assert first["changed"] == 2

    # a week later antiga's only view is older than the window (here: a 7-day window)
    again = views.run(pg, umami, ts, alias, days=7)
    assert (again["zeroed"], again["changed"], again["changed_ids"]) == (1, 1, ["antiga_222222"])
    assert features(pg, "view_count") == {"hoje_111111": 1, "antiga_222222": 0}
    assert document(ts, alias, "antiga_222222")["view_count"] == 0
    hoje = document(ts, alias, "hoje_111111")
    assert hoje["view_count"] == 1 and hoje["trending_score"] == 7.0
    assert features(pg, "trending_score") == {"hoje_111111": 7.0}

    unchanged = views.run(pg, umami, ts, alias, days=7)
    assert unchanged["changed"] == 0 and unchanged["zeroed"] == 0


def test_the_umami_read_leaves_no_transaction_open(pg, umami, idx):
    ts, alias = idx
    views.run(pg, umami, ts, alias)
    assert umami.info.transaction_status.name == "IDLE"
