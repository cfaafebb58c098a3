"""The oracle's decisions (dgb_dev.chaos.oracle.judge) on hand-made journals and index documents, and
the event counter's notion of a copy. The same oracle against the real pipeline, clean and with
planted bugs: tests/integration/chaos/test_checker_planted_bugs.py."""

from __future__ import annotations

import json

from dgb.search.documents import CONTENT_CAP
from dgb_dev.chaos.event_counter import EventCounter
from dgb_dev.chaos.oracle import Verdict, causes, judge, read_journal, truth
from dgb_dev.mirror import Site, start_in_thread
from dgb_dev.mirror.journal import text_hash

SITE = "/www.gov.br/mec/pt-br/assuntos/noticias"
MIRROR = "http://127.0.0.1:8090"
DIM = 4


def entry(seq, event, slug, title="Título", content="Texto.", from_slug=None):
    return {
        "seq": seq,
        "event": event,
        "at": "2026-12-04T12:00:00+00:00",
        "agency": "mec",
        "slug": slug,
        "url": f"{SITE}/{slug}",
        "title": title,
        "hash": None if event == "remove" else text_hash(title, content),
        "from_url": f"{SITE}/{from_slug}" if from_slug else None,
    }


def doc(slug, title="Título", content="Texto.", uid=None, **extra):
    d = {
        "id": uid or slug,
        "unique_id": uid or slug,
        "url": f"{MIRROR}{SITE}/{slug}",
        "title": title,
        "content": content,
        "most_specific_theme_code": "01.01",
        "theme_1_level_1_code": "01",
        "content_embedding": [0.5] * DIM,
    }
    d.update(extra)
    return {k: v for k, v in d.items() if v is not None}


def test_a_faithful_index_gets_all_zeros():
    journal = [
        entry(0, "base", "a"),
        entry(1, "publish", "b", "Outro", "Corpo **em** negrito."),
        entry(2, "edit", "a", "Título novo", "Texto novo."),
        entry(3, "remove", "c"),
        entry(4, "move", "e", from_slug="d"),
    ]
    docs = [
        doc("a", "Título novo", "Texto novo."),
        doc("b", "Outro", "Corpo em negrito."),  # the pipeline's Markdown of the same text
        doc("e", url="https://www.gov.br/mec/pt-br/assuntos/noticias/e"),  # the original address
    ]
    v = judge(truth(journal), docs, DIM)
    assert v.ok and v.counts() == {"lost": 0, "duplicated": 0, "wrong": 0, "removed_still_visible": 0}
    assert (v.live, v.removed, v.documents, v.untracked) == (3, 2, 3, 0)
    assert v.summary().startswith("oracle: lost=0 duplicated=0 wrong=0 removed_still_visible=0 live=3")


def test_each_category_names_its_urls():
    journal = [entry(i, "base", s) for i, s in enumerate("abcdefgh")]
    journal += [entry(8, "edit", "c", content="Texto corrigido."), entry(9, "remove", "g")]
    journal += [entry(10, "move", "i", from_slug="h")]
    docs = [
        doc("a"),
        doc("b", uid="b1"),
        doc("b", uid="b2"),  # twice
        doc("c"),  # stale: the edit never reached the index
        doc("d", most_specific_theme_code=None, theme_1_level_1_code=None),
        doc("e", content_embedding=None),
        doc("f", content_embedding=[0.1] * (DIM + 1)),
        doc("g"),  # removed on the site
        doc("h"),  # moved away
        doc("i"),
        doc("zz"),  # an address the journal never named: counted, not judged
    ]
    v = judge(truth(journal), docs, DIM)
    assert not v.ok
    u = f"{SITE}/"
    assert v.lost == {}
    assert list(v.duplicated) == [u + "b"] and "b1, b2" in v.duplicated[u + "b"]
    assert v.wrong == {
        u + "c": "stale content (site: edit #8)",
        u + "d": "no theme",
        u + "e": "no vector",
        u + "f": f"vector of {DIM + 1} dimensions, not {DIM}",
    }
    assert sorted(v.removed_still_visible) == [u + "g", u + "h"]
    assert "remove" in v.removed_still_visible[u + "g"] and "move" in v.removed_still_visible[u + "h"]
    assert v.untracked == 1
    v2 = judge(truth(journal), [d for d in docs if not d["url"].endswith("/a")], DIM)
    assert v2.lost == {u + "a": "no document (site: base #0)"}


def test_a_capped_document_is_judged_on_its_title():
    long_text = "palavra " * (CONTENT_CAP // 4)
    journal = [entry(0, "publish", "a", "Longo", long_text)]
    cut = long_text[:CONTENT_CAP]
    v = judge(truth(journal), [doc("a", "Longo", cut)], DIM)
    assert v.ok and v.capped == 1
    v = judge(truth(journal), [doc("a", "Título antigo", cut)], DIM)
    assert list(v.wrong.values()) == ["stale content (site: publish #0)"]


def test_a_reset_forgets_what_came_before():
    journal = [entry(0, "publish", "a"), {**entry(1, "reset", "x"), "url": ""}, entry(2, "base", "b")]
    v = judge(truth(journal), [doc("b")], DIM)
    assert v.ok and v.live == 1 and v.removed == 0


def test_event_copies_are_distinct_message_ids_of_one_event():
    c = EventCounter("p", topics=("t",))
    ev = (b'{"unique_id": "u1"}', {"unique_id": "u1", "event_ts": "2026-12-04T12:00:00.000001+00:00"})
    other = (b'{"unique_id": "u1"}', {"unique_id": "u1", "event_ts": "2026-12-04T12:00:01.000001+00:00"})
    c.add("t", *ev, "m1")
    c.add("t", *ev, "m1")  # a redelivery to our own subscription: not a copy
    c.add("t", *other, "m2")  # the next version's event
    assert c.duplicates() == {} and c.distinct == 2
    c.add("t", *ev, "m3")  # the same event published again
    assert c.duplicates() == {"u1": ["t x2"]}
    v = judge(truth([entry(0, "base", "a")]), [doc("a", uid="u1")], DIM, c.duplicates())
    assert v.duplicated == {f"{SITE}/a": "events published more than once: t x2"}
    v = judge(truth([]), [], DIM, {"u9": ["t x3"]})
    assert v.duplicated == {"unique_id:u9": "events published more than once: t x3"}


def test_the_journal_is_read_in_process_or_from_a_site_in_another_process(tmp_path):
    corpus = tmp_path / "articles.jsonl"
    row = {"agency": "mec", "url_slug": "a", "title": "A", "content": "Texto.", "published_at": "2026-11-20"}
    corpus.write_text(json.dumps(row) + "\n", encoding="utf-8")
    site = Site(corpus, extra_dir=None, registry={}, journal_base=True)
    site.edit("mec", "a", title="B")
    server, base = start_in_thread(site)
    try:
        over_http = read_journal(base)
    finally:
        server.shutdown()
        server.server_close()
    assert over_http == read_journal(site) == site.journal() and over_http[-1]["title"] == "B"
    assert read_journal(over_http) == over_http


def test_causes_count_each_finding_by_the_sites_last_change():
    verdict = Verdict(
        lost={"/a": "no document (site: move #4)", "/b": "no document (site: publish #1)"},
        wrong={
            "/c": "stale content (site: edit #9)",
            "/d": "stale content (site: edit #12); no vector",
            "/e": "no theme",
        },
        removed_still_visible={
            "/f": "1 document(s) after the site's remove: x_1",
            "/g": "1 document(s) after the site's move: y",
        },
    ).as_dict()
    assert causes(verdict) == {
        "lost/move": 1,
        "lost/publish": 1,
        "removed_still_visible/move": 1,
        "removed_still_visible/remove": 1,
        "wrong/edit": 2,
        "wrong/no theme": 1,
    }
    assert causes(Verdict().as_dict()) == {}
