"""The query shapes production's clients send (the DestaquesGovBr portal and its GraphQL API) run
unchanged against an index this pipeline built: scrape from the local site, enrich, embed and
index through the real stages, then query Typesense as the portal does."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from dgb.features.compute import FeatureComputer
from dgb.fetch import Fetcher
from dgb.pipeline import stages
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.scraper.run import scrape_agency
from dgb.search import schema
from dgb.search.query import server_version
from tests.support.articles import ARTICLES, mirrored_agency
from tests.support.fetch import FAST

pytestmark = pytest.mark.stack

#: Every field the portal's article type reads from a hit.
PORTAL_FIELDS = {
    "unique_id",
    "agency",
    "published_at",
    "title",
    "url",
    "image",
    "video_url",
    "category",
    "content",
    "summary",
    "subtitle",
    "editorial_lead",
    "extracted_at",
    "theme_1_level_1_code",
    "theme_1_level_1_label",
    "theme_1_level_2_code",
    "theme_1_level_2_label",
    "theme_1_level_3_code",
    "theme_1_level_3_label",
    "most_specific_theme_code",
    "most_specific_theme_label",
    "published_year",
    "published_month",
    "published_week",
    "tags",
}
# Fields a document may omit when the article has no value (production omits them too).
MAY_BE_ABSENT = {
    "video_url",
    "subtitle",
    "editorial_lead",
    "category",
    "tags",
    "image",
    "theme_1_level_2_code",
    "theme_1_level_2_label",
    "theme_1_level_3_code",
    "theme_1_level_3_label",
}


@pytest.fixture(scope="module")
def embedder():
    from dgb.embed.model import load_model

    return load_model("use-multilingual-v3", 512)


@pytest.fixture
def portal_index(pg, mirror, typesense_server, embedder):
    from dgb import db
    from dgb.enrich.base import get_classifier
    from dgb.taxonomy import load_taxonomy, themes_rows

    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    _site, _server, base = mirror(ARTICLES)
    with Fetcher(FAST) as f:
        for key in ("mec", "mulheres"):
            scrape_agency(pg, mirrored_agency(base, key), f)
    alias = f"t_{uuid.uuid4().hex[:8]}"
    s = replace(typesense_server, typesense_collection=alias, embedding_dim=512)
    ts = schema.client(s)
    schema.ensure_collection(s, ts)
    classifier = get_classifier(embedder=embedder, backend="local")
    for stage in (
        stages.EnrichStage(classifier, pg, features=FeatureComputer()),  # the offline features
        stages.EmbedStage(embedder, embedder.name),
        stages.IndexStage(ts, alias, pg, 512),
    ):
        report = run_stage(stage, pg, [], RunOptions(sweep_limit=100))
        assert len(report.processed) == len(ARTICLES), (stage.name, report)
    yield ts, alias
    target = ts.aliases[alias].retrieve()["collection_name"]
    ts.aliases[alias].delete()
    ts.collections[target].delete()


def _search(ts, alias, **params):
    return ts.collections[alias].documents.search({"q": "*", **params})


def test_portal_query_shapes_return_hits_with_every_field_it_reads(portal_index):
    ts, alias = portal_index
    start = int(datetime(2026, 10, 1, tzinfo=UTC).timestamp())
    end = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp())
    in_range = f"published_at:>={start} && published_at:<{end}"

    # feed / admin preview: newest first
    feed = _search(ts, alias, sort_by="published_at:desc", per_page=50)
    assert feed["found"] == len(ARTICLES)
    stamps = [h["document"]["published_at"] for h in feed["hits"]]
    assert stamps == sorted(stamps, reverse=True)
    for hit in feed["hits"]:
        doc = hit["document"]
        assert set(doc) >= PORTAL_FIELDS - MAY_BE_ABSENT, PORTAL_FIELDS - set(doc)
        assert isinstance(doc["published_at"], int) and isinstance(doc["extracted_at"], int)
        assert doc["published_week"] // 100 == doc["published_year"]  # YYYYWW
        assert doc["most_specific_theme_code"].startswith(doc["theme_1_level_1_code"])

    # admin preview by id
    uid = feed["hits"][0]["document"]["unique_id"]
    assert _search(ts, alias, q=uid, query_by="unique_id")["hits"][0]["document"]["unique_id"] == uid

    # theme page: filter by level-1 label, range, newest first, one hit per content_hash
    label = feed["hits"][0]["document"]["theme_1_level_1_label"]
    theme = _search(
        ts,
        alias,
        filter_by=f"theme_1_level_1_label:=`{label}` && {in_range}",
        sort_by="published_at:desc",
        group_by="content_hash",
        group_limit=1,
    )
    assert theme["found"] >= 1
    assert all(g["hits"][0]["document"]["theme_1_level_1_label"] == label for g in theme["grouped_hits"])

    # agency page
    mec = _search(ts, alias, filter_by="agency:=mec", sort_by="published_at:desc", per_page=50)
    assert mec["found"] == sum(1 for a in ARTICLES if a[0] == "mec")

    # facets on theme labels and agency
    facets = _search(
        ts, alias, facet_by="theme_1_level_1_label,most_specific_theme_label,agency", max_facet_values=50
    )
    counts = {f["field_name"]: {c["value"]: c["count"] for c in f["counts"]} for f in facets["facet_counts"]}
    assert counts["agency"] == {"mec": 5, "mulheres": 2}
    assert sum(counts["theme_1_level_1_label"].values()) == len(ARTICLES)

    # editorial dashboard: articles with an image, grouped by theme and by agency
    with_image = f'{in_range} && image:!=""'
    total = _search(ts, alias, filter_by=with_image, per_page=1)["found"]
    assert 0 < total <= len(ARTICLES)
    by_agency = _search(ts, alias, filter_by=with_image, group_by="agency", group_limit=1, per_page=100)
    assert {g["group_key"][0] for g in by_agency["grouped_hits"]} <= {"mec", "mulheres"}
    if server_version(ts) >= (0, 25):  # grouped_hits[].found exists from 0.25 on (production: 27.x)
        assert sum(g["found"] for g in by_agency["grouped_hits"]) == total

    # text query on title and content, production's weights
    text = _search(ts, alias, q="Enem inscritos", query_by="title,content", query_by_weights="3,1")
    assert text["hits"][0]["document"]["title"] == "Enem tem recorde de inscritos confirmados"

    # the feature fields' sorts and facets answer (their values: the tests below)
    for params in (
        {"filter_by": "sentiment_label:=positivo"},
        {"sort_by": "trending_score:desc"},
        {"facet_by": "entity_org"},
        {"sort_by": "view_count:desc"},
    ):
        res = _search(ts, alias, **params)
        assert "hits" in res
    assert _search(ts, alias, filter_by="sentiment_label:=positivo")["found"] == 0


@pytest.mark.usefixtures("production_trending_formula")  # the local site's themes are small
def test_trending_and_most_viewed_sorts_after_the_engagement_jobs(portal_index, pg, pg_server):
    """The portal's "Em alta" sort (trending_score:desc, badge at >= 1.5) and "Mais vistas" sort
    (view_count:desc) on the index the stages built, after one run of each engagement job: the
    trending job scored as of one hour after the newest article (the corpus' dates are in the
    past), the view import read from an Umami database with real pageviews."""
    from datetime import timedelta

    from dgb import db
    from dgb.engagement import trending, views
    from dgb.engagement.formula import EM_ALTA, trending_score
    from tests.support.umami import add_event, add_session, add_website, fresh_umami

    ts, alias = portal_index
    docs = [h["document"] for h in _search(ts, alias, per_page=50)["hits"]]
    newest = max(d["published_at"] for d in docs)
    now = datetime.fromtimestamp(newest, UTC) + timedelta(hours=1)

    out = trending.run(pg, ts, alias, now=now)

    # the formula over the index's own dates and level-1 themes: the articles of the last 24 h
    want = {}
    for d in docs:
        p, theme = d["published_at"], d["theme_1_level_1_code"]
        if now.timestamp() - 86_400 < p <= now.timestamp():
            same = [o["published_at"] for o in docs if o["theme_1_level_1_code"] == theme]
            day = sum(1 for q in same if p - 86_400 <= q <= p)
            week = sum(1 for q in same if p - 7 * 86_400 <= q <= p)
            want[d["unique_id"]] = trending_score(day, week)
    assert want and out["updated"] == len(want) and out["failed"] == 0
    ranked = _search(ts, alias, sort_by="trending_score:desc,published_at:desc", per_page=50)["hits"]
    got = [(h["document"]["unique_id"], h["document"].get("trending_score")) for h in ranked]
    # today's articles first, busiest theme first; the rest hold no score and come after
    assert got[: len(want)] == sorted(want.items(), key=lambda kv: -kv[1])
    assert all(score is None for _, score in got[len(want) :])
    em_alta = _search(ts, alias, filter_by=f"trending_score:>={EM_ALTA}", per_page=50)
    assert em_alta["found"] == sum(1 for v in want.values() if v >= EM_ALTA)

    # "Mais vistas": pageviews of the last 30 days from Umami
    umami = db.connect(fresh_umami(pg_server))
    site = add_website(umami)
    wanted_views = dict(zip([d["unique_id"] for d in docs[:3]], (2, 9, 5)))
    at = datetime.now(UTC) - timedelta(days=1)
    for uid, n in wanted_views.items():
        for _ in range(n):
            add_event(umami, site, add_session(umami, site), f"/artigos/{uid}", at)
    views.run(pg, umami, ts, alias)
    umami.close()
    most = _search(ts, alias, sort_by="view_count:desc", per_page=3)["hits"]
    assert [(h["document"]["unique_id"], h["document"]["view_count"]) for h in most] == sorted(
        wanted_views.items(), key=lambda kv: -kv[1]
    )


def _features(pg) -> dict[str, dict]:
    with pg.cursor() as cur:
        cur.execute("SELECT unique_id, features FROM news_features")
        return dict(cur.fetchall())


def _ids(res) -> set[str]:
    return {h["document"]["unique_id"] for h in res["hits"]}


def test_sentiment_filter_and_facet(portal_index, pg):
    """The search page's "sentimento" filter: one label or several, and its facet counts."""
    from collections import Counter

    ts, alias = portal_index
    labels = {uid: f["sentiment"]["label"] for uid, f in _features(pg).items()}
    assert len(labels) == len(ARTICLES)
    positive = {uid for uid, label in labels.items() if label == "positive"}
    assert positive and positive != set(labels)  # the corpus has both kinds
    assert _ids(_search(ts, alias, filter_by="sentiment_label:=[positive]", per_page=50)) == positive
    both = _search(ts, alias, filter_by="sentiment_label:=[positive, neutral]", per_page=50)
    assert _ids(both) == {uid for uid, label in labels.items() if label in ("positive", "neutral")}
    facet = _search(ts, alias, facet_by="sentiment_label", per_page=0)["facet_counts"][0]["counts"]
    assert {c["value"]: c["count"] for c in facet} == dict(Counter(labels.values()))


def test_entity_page_by_canonical_id(portal_index, pg):
    """/entidades/<id>: the articles that mention a canonical entity, newest first; the chips of
    each hit come from its entity fields."""
    ts, alias = portal_index
    with pg.cursor() as cur:
        cur.execute("SELECT unique_id FROM news_entities WHERE entity_id = 'dgb_mec'")
        want = {r[0] for r in cur.fetchall()}
    assert want  # the MEC articles name it
    res = _search(
        ts, alias, filter_by="entity_canonical:=[dgb_mec]", sort_by="published_at:desc", per_page=50
    )
    assert _ids(res) == want
    stamps = [h["document"]["published_at"] for h in res["hits"]]
    assert stamps == sorted(stamps, reverse=True)
    for hit in res["hits"]:
        doc = hit["document"]
        assert "dgb_mec" in doc["entity_canonical"] and doc["entity_canonical"] == sorted(
            doc["entity_canonical"]
        )
        assert set(doc["entity_org"]) <= set(doc["entities"])


def test_entity_suggestions_facet_with_a_prefix(portal_index):
    """The search box's entity suggestions: a facet over the entity fields narrowed by a
    ``facet_query`` prefix, all entities and per type."""
    ts, alias = portal_index

    def suggest(field, prefix):
        res = _search(
            ts, alias, facet_by=field, facet_query=f"{field}:{prefix}", max_facet_values=10, per_page=0
        )
        return {c["value"]: c["count"] for c in res["facet_counts"][0]["counts"]}

    assert suggest("entities", "Ene") == {"Enem": 1}
    assert suggest("entity_org", "ME") == {"MEC": 1}
    assert suggest("entity_policy", "Pé") == {"Pé-de-Meia": 1}
    assert "Casa da Mulher Brasileira" in suggest("entity_org", "Cas")
    assert suggest("entity_org", "Zzz") == {}


def test_reading_time_and_readability_band(portal_index, pg):
    """The article page's reading time (word_count / 200, at least one minute) and readability
    band (>= 70 easy, >= 50 medium, else dense) from the hit's fields."""
    import math

    ts, alias = portal_index
    feats = _features(pg)
    res = _search(ts, alias, include_fields="unique_id,word_count,readability_flesch", per_page=50)
    assert len(res["hits"]) == len(ARTICLES)
    for hit in res["hits"]:
        doc = hit["document"]
        f = feats[doc["unique_id"]]
        assert doc["word_count"] == f["word_count"] > 0
        assert max(1, math.ceil(doc["word_count"] / 200)) == 1  # short local articles
        assert doc["readability_flesch"] == f["readability_flesch"]
