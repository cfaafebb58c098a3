"""The chaos run's outside watchers (dgb_dev.chaos.watch) on the real pipeline run in process: a
fault's recovery is not declared while an article the site published before the fault's end is
missing, incomplete or at a text the site never had, and is declared once readers get it (edits
and removals are left to the final verdict); a reader's first complete sight of each new URL gives
its publication -> searchable; edits and take-downs are timed until readers get them."""

from __future__ import annotations

import time

import pytest

from dgb.pipeline import definitions
from dgb_dev.chaos.watch import EditsSeen, FirstSeen, Recoveries

pytestmark = pytest.mark.stack


def recoveries(pipe) -> Recoveries:
    return Recoveries(pipe.site.journal, pipe.ts, pipe.alias, pipe.embedder.dim, agencies=("mec",))


NEW = {
    "agency": "mec",
    "url_slug": "chaos-watch-nova",
    "title": "Nova escola técnica em Goiás",
    "content": "O Ministério da Educação anunciou uma nova escola técnica em Goiás.",
}
NEW_URL = "/www.gov.br/mec/pt-br/assuntos/noticias/chaos-watch-nova"


def enrich_and_index(pipe) -> None:
    """Enriched and indexed, not embedded: the document is there, without its vector."""
    for name in ("enrich", "index"):
        pipe.relay()
        pipe.run_stage(name, pipe.deliver(definitions.definition(name)))


def test_a_fault_recovers_once_every_article_published_before_its_end_is_complete(pipeline):
    pipeline.scrape()
    pipeline.run()
    watch = recoveries(pipeline)
    pipeline.site.publish(NEW)  # published while the fault is on; the fault ends now
    fault = watch.add("1:kill_triggerer", time.time())
    assert watch.check() == []
    assert fault.last_problems == {NEW_URL: "no document"}
    # published after the end: the next minutes' ordinary work, not the fault's
    later = dict(NEW, url_slug="chaos-watch-depois", title="Outra escola técnica")
    pipeline.site.publish(later)
    pipeline.scrape()
    enrich_and_index(pipeline)
    assert watch.check() == []
    assert fault.last_problems == {NEW_URL: "no vector of the model's size"}
    pipeline.run("embed")
    assert watch.check() == [fault] and watch.open == []
    assert fault.recovery_s is not None and fault.recovery_s >= 0


def test_edits_and_removals_are_left_to_the_final_verdict(pipeline):
    """They reach readers on integrity's schedule whatever the faults: a fault ending before
    integrity saw them has still recovered."""
    pipeline.scrape()
    pipeline.run()
    watch = recoveries(pipeline)
    pipeline.site.edit("mec", "pe-de-meia-paga", title="Pé-de-Meia paga parcela extra")
    pipeline.site.remove("mec", "merenda-escolar", 410)
    fault = watch.add("1:typesense_outage", time.time())
    assert watch.check() == [fault]


def test_a_document_at_a_text_the_site_never_had_holds_the_recovery(pipeline):
    pipeline.scrape()
    pipeline.run()
    watch = recoveries(pipeline)
    fault = watch.add("1:restart_typesense", time.time())
    uid = pipeline.uid("pe-de-meia-paga")
    docs = pipeline.ts.collections[pipeline.alias].documents
    hit = docs.search({"q": uid, "query_by": "unique_id", "per_page": 1})["hits"][0]["document"]
    docs.upsert({**hit, "title": "Título que ninguém escreveu"})  # a writer that made up a text
    assert watch.check() == []
    assert list(fault.last_problems.values()) == ["a text the site never had"]


def test_first_seen_gives_each_new_article_its_publication_to_searchable(pipeline):
    since = time.time() - 1
    seen = FirstSeen(pipeline.ts, pipeline.alias, since, pipeline.embedder.dim)
    assert seen.poll() == 0  # nothing indexed yet
    pipeline.scrape()
    pipeline.run()
    assert seen.poll() == 0  # the base is dated before ``since``: not asked for
    assert seen.first == {}
    entries = pipeline.site.journal()
    fresh = seen.freshness(entries, 0)  # the base entries are not publications: nothing counted
    assert fresh["lags"] == [] and fresh["unseen"] == 0
    # an article the site publishes now: unseen until the pipeline indexes it, then seen once
    pipeline.site.publish(NEW)
    fresh = seen.freshness(pipeline.site.journal(), since)
    assert fresh["unseen"] == 1 and fresh["lags"] == []
    pipeline.scrape()
    enrich_and_index(pipeline)  # a reader finds it, without its vector: not complete
    assert seen.poll() == 0
    key = NEW_URL
    assert list(seen.shown) == [key] and seen.first == {}
    pipeline.run("embed")
    assert seen.poll() == 1
    assert list(seen.first) == [key] and seen.first[key] >= seen.shown[key]
    fresh = seen.freshness(pipeline.site.journal(), since)
    assert fresh["unseen"] == 0 and len(fresh["lags"]) == 1
    assert 0 <= fresh["lags"][0] <= time.time() - since
    published = [e for e in pipeline.site.journal() if e["event"] == "publish"][-1]  # NEW
    assert fresh["by_agency"] == {published["agency"]: fresh["lags"]}  # its agency, as the site says


def indexed_new(pipeline) -> FirstSeen:
    """NEW published, scraped and through every stage; a reader that has seen its document."""
    seen = FirstSeen(pipeline.ts, pipeline.alias, time.time() - 1, pipeline.embedder.dim)
    pipeline.site.publish(NEW)
    pipeline.scrape()
    pipeline.run()
    assert seen.poll() == 1 and NEW_URL in seen.ids
    return seen


def test_an_edit_is_timed_until_a_reader_gets_its_text_or_a_later_one(pipeline):
    seen = indexed_new(pipeline)
    edits = EditsSeen(pipeline.ts, pipeline.alias, pipeline.site.journal, agencies=("mec",))
    assert edits.check(seen.ids) == 0 and edits.figures()["open"] == 0  # a publication is no edit
    t0 = time.time()
    pipeline.site.edit("mec", "chaos-watch-nova", title="Nova escola técnica em Goiás abre vagas")
    assert edits.check(seen.ids) == 0 and edits.figures()["open"] == 1  # readers still get the old text
    # a second edit, which integrity finds; the stages bring its text to readers: both edits are seen
    pipeline.edit("chaos-watch-nova", content="O MEC abriu 500 vagas na nova escola técnica de Goiás.")
    pipeline.run()
    assert edits.check(seen.ids) == 2
    figures = edits.figures()
    assert figures["open"] == 0 and len(figures["lags"]) == 2
    assert all(0 <= lag <= time.time() - t0 for lag in figures["lags"])
    # an edit the pipeline never read stays open, however often the reader looks
    pipeline.site.edit("mec", "chaos-watch-nova", title="Escola técnica de Goiás: inscrições")
    pipeline.run()
    assert edits.check(seen.ids) == 0 and edits.check(seen.ids) == 0
    assert edits.figures()["open"] == 1 and edits.failed_checks == 0
    # taken down before readers got it: superseded, not open
    pipeline.site.remove("mec", "chaos-watch-nova", 410)
    edits.check(seen.ids)
    assert (edits.figures()["open"], edits.figures()["superseded"]) == (0, 1)


def test_a_removal_is_timed_until_a_reader_finds_no_document(pipeline):
    seen = indexed_new(pipeline)
    since = min(seen.ok_polls) - 1
    pipeline.site.remove("mec", "chaos-watch-nova", 410)
    seen.poll()  # gone from the site, not from the index
    gone = seen.gone(pipeline.site.journal(), since)
    assert (gone["lags"], gone["visible"], gone["never_shown"]) == ([], 1, 0)
    pipeline.remove("chaos-watch-nova", on_site=False)  # integrity's two 410s
    pipeline.run()
    seen.poll()
    gone = seen.gone(pipeline.site.journal(), since)
    assert (gone["visible"], gone["never_shown"]) == (0, 0) and len(gone["lags"]) == 1
    assert 0 <= gone["lags"][0] <= time.time() - since
    # published and moved away before any scrape: its old address was never indexed
    pipeline.site.publish(dict(NEW, url_slug="chaos-watch-movida", title="Escola técnica muda de endereço"))
    pipeline.site.move("mec", "chaos-watch-movida", "chaos-watch-movida-2")
    moves = seen.gone(pipeline.site.journal(), since, "move")
    assert (moves["lags"], moves["visible"], moves["never_shown"]) == ([], 0, 1)
