"""The chaos run's outside watchers (dgb_dev.chaos.watch) on the real pipeline run in process: a
fault's recovery is not declared while a change the site made before the fault's end is not what
readers get, and is declared once it is; the reader's first sight of each new URL gives its
publication -> searchable."""

from __future__ import annotations

import time

import pytest

from dgb_dev.chaos.watch import FirstSeen, Recoveries

pytestmark = pytest.mark.stack


def recoveries(pipe) -> Recoveries:
    return Recoveries(pipe.site.journal, pipe.ts, pipe.alias, pipe.embedder.dim, agencies=("mec",))


def test_a_fault_recovers_only_once_readers_see_every_earlier_change(pipeline):
    pipeline.scrape()
    pipeline.run()
    watch = recoveries(pipeline)
    # the site changes while the "fault" is on; it ends now: readers must come to see the edit
    pipeline.edit("pe-de-meia-paga", title="Pé-de-Meia paga parcela extra", content="Texto corrigido.")
    fault = watch.add("1:kill_triggerer", time.time())
    assert watch.check() == []
    assert fault.recovery_s is None and list(fault.last_problems) == [
        "/www.gov.br/mec/pt-br/assuntos/noticias/pe-de-meia-paga"
    ]
    assert "stale content" in next(iter(fault.last_problems.values()))
    # a change made after the fault's end is not the fault's: it does not hold the recovery back
    later = watch.add("2:restart_postgres", time.time())
    pipeline.remove("merenda-escolar")
    pipeline.run()
    done = watch.check()
    assert fault in done and later in done
    assert fault.recovery_s is not None and fault.recovery_s >= 0
    assert watch.open == []


def test_a_removal_still_visible_holds_the_recovery(pipeline):
    pipeline.scrape()
    pipeline.run()
    watch = recoveries(pipeline)
    pipeline.site.remove("mec", "merenda-escolar", 410)  # the site takes it down; nobody looked yet
    fault = watch.add("1:typesense_outage", time.time())
    assert watch.check() == []
    assert any(w.startswith("removed_still_visible") for w in fault.last_problems.values())
    assert watch.check() == []  # still there on the next pass
    pipeline.remove("merenda-escolar", on_site=False)  # the pipeline's integrity check finds it ...
    pipeline.run()  # ... and the index stage takes it out
    assert watch.check() == [fault]


def test_first_seen_gives_each_new_article_its_publication_to_searchable(pipeline):
    since = time.time() - 1
    seen = FirstSeen(pipeline.ts, pipeline.alias, since)
    assert seen.poll() == 0  # nothing indexed yet
    pipeline.scrape()
    pipeline.run()
    assert seen.poll() == 0  # the base is dated before ``since``: not asked for
    assert seen.first == {}
    entries = pipeline.site.journal()
    fresh = seen.freshness(entries, 0)  # the base entries are not publications: nothing counted
    assert fresh["lags"] == [] and fresh["unseen"] == 0
    # an article the site publishes now: unseen until the pipeline indexes it, then seen once
    pipeline.site.publish(
        {
            "agency": "mec",
            "slug": "chaos-watch-nova",
            "title": "Nova escola técnica em Goiás",
            "content": "O Ministério da Educação anunciou uma nova escola técnica em Goiás.",
        }
    )
    fresh = seen.freshness(pipeline.site.journal(), since)
    assert fresh["unseen"] == 1 and fresh["lags"] == []
    pipeline.scrape()
    pipeline.run()
    assert seen.poll() == 1
    fresh = seen.freshness(pipeline.site.journal(), since)
    assert fresh["unseen"] == 0 and len(fresh["lags"]) == 1
    assert 0 <= fresh["lags"][0] <= time.time() - since
