"""The chaos run's outside watchers (dgb_dev.chaos.watch) on the real pipeline run in process: a
fault's recovery is not declared while an article the site published before the fault's end is
missing, incomplete or at a text the site never had, and is declared once readers get it (edits
and removals are left to the final verdict); a reader's first complete sight of each new URL gives
its publication -> searchable."""

from __future__ import annotations

import time

import pytest

from dgb.pipeline import definitions
from dgb_dev.chaos.watch import FirstSeen, Recoveries

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
