"""The mirror's synthetic corpus (dgb_dev.mirror.synthetic): production-scale volume for every
agency, the documented edit model, and pages served as they stand at the site's clock (edits at
their known times, dateModified, 304 until the next edit), through the real HTTP server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import numpy as np

from dgb_dev.mirror import Site, start_in_thread
from dgb_dev.mirror.synthetic import DAY, SyntheticCorpus

END = datetime(2026, 12, 1, tzinfo=UTC)


def test_volume_and_edit_model():
    c = SyntheticCorpus(20_000, 5.0, end=END, extra_days=10, seed=3)
    assert len(c.agencies) >= 150 and len(set(c.agency.tolist())) >= 140  # all ~160 agencies publish
    last_year = c.published_between(END - timedelta(days=365), END)
    first_year = c.published_between(END - timedelta(days=5 * 365), END - timedelta(days=4 * 365))
    assert last_year > 2.5 * first_year  # growing volume (e^(0.575 * 4) ~ 10x per day, 3-4x per year)
    assert len(c) > 20_000  # the extra days keep publishing
    assert np.all(np.diff(c.published) >= 0)
    edited = np.unique(c.edit_article)
    share = len(edited) / len(c)
    assert 0.05 < share < 0.3  # per-agency shares in [2%, 40%]
    delays = c.edit_time - c.published[c.edit_article]
    assert np.all(delays > 0)
    assert 0.4 < np.mean(delays < 3 * 3600) < 0.75  # most edits within the first hours
    assert np.mean(delays > 30 * DAY) < 0.1
    for k in (0, 1):  # edits of an article are sorted and delimited by edit_start
        i = int(edited[k])
        times = c.edit_time[c.edit_start[i] : c.edit_start[i + 1]]
        assert len(times) >= 1 and np.all(np.diff(times) >= 0)


def test_office_profile_publishes_at_least_n_an_hour_for_the_active_agencies_and_edits_follow():
    """dgb mirror serve --synthetic-office N (bench_realtime.py --profile office): from the corpus's
    end on, at least N new articles in any 60 minutes for the agencies the catalogue marks active,
    the corpus before the end untouched, and the edit model applied to the new articles too."""
    from dgb.agencies import load_agencies
    from dgb_dev.mirror.publication import fewest_in_window

    end = END.timestamp()
    c = SyntheticCorpus(20_000, 5.0, end=END, extra_days=2, office=200)
    plain = SyntheticCorpus(20_000, 5.0, end=END, extra_days=2)
    cut = int(np.searchsorted(c.published, end))
    assert np.array_equal(c.published[:cut], plain.published[plain.published < end])
    assert np.array_equal(c.agency[:cut], plain.agency[plain.published < end])
    new = c.published[cut:]
    assert int(np.sum(new < end + 3600)) >= 200  # the first hour
    assert fewest_in_window(new, end, end + 2 * DAY, 3600) >= 200  # and any other
    assert int(np.sum(plain.published >= end)) < 100  # without it: the final rate, ~33 a day at 20k
    catalogue = load_agencies()
    office_keys = {c.agencies[k] for k in np.unique(c.agency[cut:])}
    inactive = {k for k in c.agencies if not catalogue[k].active}
    assert inactive and len(office_keys - inactive) >= 140
    # an inactive agency (no scrape DAG) publishes as before, at the corpus's final rate
    ids = [c.agencies.index(k) for k in inactive]
    assert np.sum(np.isin(c.agency[cut:], ids)) == np.sum(np.isin(plain.agency[plain.published >= end], ids))
    # edits follow publication: most of the new articles' edits within hours of it
    mine = c.edit_article >= cut
    delay = c.edit_time[mine] - c.published[c.edit_article[mine]]
    assert mine.sum() > 0.1 * len(new) and np.all(delay > 0) and np.mean(delay < 3 * 3600) > 0.4
    again = SyntheticCorpus(20_000, 5.0, end=END, extra_days=2, office=200)
    assert np.array_equal(again.published, c.published) and np.array_equal(again.edit_time, c.edit_time)
    assert c.summary()["office"] == 200


def test_pages_follow_the_edits_at_their_known_times():
    c = SyntheticCorpus(3_000, 1.0, end=END, seed=5)
    i = int(c.edit_article[0])  # the first article with an edit
    agency, slug = c.agencies[int(c.agency[i])], c.slug(i)
    first_edit = float(c.edit_time[c.edit_start[i]])
    clock = [datetime.fromtimestamp(first_edit - 60, UTC)]
    site = Site(None, extra_dir=None, synthetic=c, clock=lambda: clock[0])
    server, base = start_in_thread(site)
    try:
        before = site.get(agency, slug)
        assert before.modified_at == before.published_at
        assert any(a.slug == slug for a in site.articles(agency))  # in its agency's listing
        url = site.article_url(base, before)
        with httpx.Client() as http:
            page = http.get(url)
            assert page.status_code == 200 and before.title in page.text
            etag = page.headers["etag"]
            assert http.get(url, headers={"If-None-Match": etag}).status_code == 304
            clock[0] = datetime.fromtimestamp(first_edit + 1, UTC)  # just after the first edit
            after = site.get(agency, slug)
            assert after.modified_at == datetime.fromtimestamp(first_edit, UTC).replace(microsecond=0)
            assert (after.title, after.content, after.image_url) != (
                before.title,
                before.content,
                before.image_url,
            )
            changed = http.get(url, headers={"If-None-Match": etag})
            assert changed.status_code == 200 and changed.headers["etag"] != etag
        assert site.get(agency, "sintetica-999999") is None and site.get("outro", slug) is None
    finally:
        server.shutdown()
        server.server_close()


def test_the_site_counts_what_it_served_per_second_and_kind():
    c = SyntheticCorpus(2_000, 1.0, end=END, seed=5)
    site = Site(None, extra_dir=None, synthetic=c, clock=lambda: END)
    server, base = start_in_thread(site)
    try:
        i = len(c) - 1
        a = site.get(c.agencies[int(c.agency[i])], c.slug(i))
        with httpx.Client() as http:
            t0 = http.get(f"{base}/_control/requests").json()["started"]
            for _ in range(3):
                assert http.get(site.article_url(base, a)).status_code == 200
            assert http.get(f"{base}/www.gov.br/robots.txt").status_code in (200, 404)
            log = http.get(f"{base}/_control/requests", params={"since": int(t0)}).json()
            assert http.get(f"{base}/_control/requests", params={"since": "x"}).status_code == 400
            probe = http.get(site.article_url(base, a), headers={"X-Dgb-Probe": "1"})
            assert probe.status_code == 200
            after = http.get(f"{base}/_control/requests", params={"since": int(t0)}).json()
        assert sum(n for _, n in log["per_second"]) == 4  # control calls are not counted
        assert log["total"]["robots"] == 1 and sum(log["total"].values()) == 4
        # a fault probe (the chaos run's) is counted apart, never against the budget per second
        assert after["per_second"] == log["per_second"] and after["total"]["probe"] == 1
        assert all(t >= int(t0) for t, _ in log["per_second"])
    finally:
        server.shutdown()
        server.server_close()


def test_stack_passes_the_synthetic_corpus_settings_to_the_site(monkeypatch, tmp_path):
    from dataclasses import replace

    from dgb.config import Settings
    from dgb_dev.mirror.cli import register
    from dgb_dev.stack.local_services import Mirror

    monkeypatch.setenv("DGB_MIRROR_SYNTHETIC", "300000")
    monkeypatch.setenv("DGB_MIRROR_SYNTHETIC_END", "2026-12-01T12:00:00+00:00")
    monkeypatch.setenv("DGB_MIRROR_SYNTHETIC_EXTRA_DAYS", "2")
    monkeypatch.setenv("DGB_MIRROR_SYNTHETIC_OFFICE", "200")
    argv = Mirror(replace(Settings.from_env(), state_dir=tmp_path)).argv()
    flags = argv[argv.index("serve") + 1 :]
    assert flags[flags.index("--synthetic") + 1] == "300000"
    assert flags[flags.index("--synthetic-end") + 1] == "2026-12-01T12:00:00+00:00"
    assert flags[flags.index("--synthetic-extra-days") + 1] == "2"
    assert flags[flags.index("--synthetic-office") + 1] == "200"
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["mirror", "serve", *flags])  # the site's own CLI accepts them
    assert (args.synthetic, args.synthetic_end, args.synthetic_extra_days, args.synthetic_office) == (
        300000,
        "2026-12-01T12:00:00+00:00",
        2.0,
        200,
    )
    monkeypatch.setenv("DGB_MIRROR_SYNTHETIC", "0")
    assert "--synthetic" not in Mirror(replace(Settings.from_env(), state_dir=tmp_path)).argv()


def test_escaped_listing_paths_and_synthetic_images_are_served():
    """MRE's catalogue path holds %20 (".../alertas%20e%20noticias/noticias"): its listing and
    articles answer under the escaped URL; a synthetic article's image (resolveuid) answers, each
    version of it, and an unknown id is still a 404 (the integrity checks' broken image)."""
    from types import SimpleNamespace

    url = "https://www.gov.br/mre/pt-br/assuntos/portal-consular/alertas%20e%20noticias/noticias"
    c = SyntheticCorpus(500, 1.0, end=END, seed=5, agencies=["mre"])
    registry = {"mre": SimpleNamespace(url=url, name="MRE")}
    site = Site(None, extra_dir=None, registry=registry, synthetic=c, clock=lambda: END)
    server, base = start_in_thread(site)
    try:
        i = next(j for j in range(len(c) - 1, 0, -1) if c.has_image[j])
        a = site.get("mre", c.slug(i))
        page = site.article_url(base, a)
        assert "alertas%20e%20noticias" in page
        with httpx.Client() as http:
            assert http.get(site.listing_url(base, site.agency_for("mre"))).status_code == 200
            assert http.get(page).status_code == 200
            image = site.image_src(base, a)
            assert "resolveuid" in image and http.get(image).status_code == 200
            gone = image.replace(a.image_uid, "0" * 32)
            assert http.get(gone).status_code == 404
    finally:
        server.shutdown()
        server.server_close()
