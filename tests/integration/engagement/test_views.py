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

# trending runs here use small themes: production's formula alone
pytestmark = pytest.mark.usefixtures("production_trending_formula")


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


def _stored_counts(pg, umami, idx, now) -> tuple[str, str]:
    """Two indexed articles with 10 and 6 stored views (a first, accepted import)."""
    ts, alias = idx
    for uid in ("a_111111", "b_222222"):
        add_article(pg, uid, now - 2 * D, "03")
    index(pg, ts, alias, ["a_111111", "b_222222"])
    site = add_website(umami)
    for uid, n in (("a_111111", 10), ("b_222222", 6)):
        sess = add_session(umami, site)
        for k in range(n):
            add_event(umami, site, sess, f"/artigos/{uid}", now - (k + 1) * H)
    first = views.run(pg, umami, ts, alias, days=30)
    assert first["changed"] == 2 and first["source_total"] == 16
    return site


def test_an_empty_source_keeps_the_stored_counts_and_fails_the_run(pg, umami, idx, now):
    """A misconfigured website id (or an emptied Umami) reads nothing: the import refuses to zero
    every count, writes nothing, pushes nothing and records why."""
    ts, alias = idx
    _stored_counts(pg, umami, idx, now)
    with pytest.raises(views.ImportRefused, match="no pageviews of known articles while 16 are stored"):
        views.run(pg, umami, ts, alias, days=30, website_ids=["00000000-0000-0000-0000-000000000000"])
    assert features(pg, "view_count") == {"a_111111": 10, "b_222222": 6}
    assert document(ts, alias, "a_111111")["view_count"] == 10
    with pg.cursor() as cur:
        cur.execute("SELECT status, error FROM engagement_runs WHERE kind = 'views' ORDER BY id")
        (ok, _), (failed, error) = cur.fetchall()
    assert (ok, failed) == ("ok", "failed") and "ImportRefused" in error


def test_a_sharp_drop_is_refused_a_moderate_one_accepted_and_force_imports(pg, umami, idx, now):
    ts, alias = idx
    site = _stored_counts(pg, umami, idx, now)
    with umami.cursor() as cur:  # 12 of the 16 pageviews vanish from the source: 4 < 50% of 16
        cur.execute(
            "DELETE FROM website_event WHERE event_id IN (SELECT event_id FROM website_event"
            " ORDER BY created_at LIMIT 12)"
        )
    umami.commit()
    with pytest.raises(views.ImportRefused, match=r"\(4\) are below 50% of the stored total \(16\)"):
        views.run(pg, umami, ts, alias, days=30)
    assert features(pg, "view_count") == {"a_111111": 10, "b_222222": 6}
    # a looser limit accepts the same drop; forcing skips the check
    accepted = views.run(pg, umami, ts, alias, days=30, max_drop=0.8)
    assert accepted["source_total"] == 4 and accepted["changed"] >= 1
    sess = add_session(umami, site)
    with umami.cursor() as cur:
        cur.execute("DELETE FROM website_event")
    umami.commit()
    add_event(umami, site, sess, "/artigos/a_111111", now - H)
    forced = views.run(pg, umami, ts, alias, days=30, force=True)
    assert forced["forced"] is True
    assert features(pg, "view_count") == {"a_111111": 1, "b_222222": 0}
