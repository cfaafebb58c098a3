"""The removal-evidence rules (issue 16) without servers: confirmation arithmetic, settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dgb.integrity.checks import same_article
from dgb.integrity.evidence import RemovalPolicy, host_of, is_bad, is_normal, next_look, weigh
from dgb.integrity.lookups import page_url, plone6_search_url, same_publication

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_a_single_404_is_never_enough():
    p = RemovalPolicy()
    first = weigh(None, 0, 404, T0, p)
    assert (first.since, first.checks, first.confirmed) == (T0, 1, False)
    assert first.confirm_after == T0 + timedelta(hours=6)


@pytest.mark.parametrize("status,delay", [(404, timedelta(hours=6)), (410, timedelta(minutes=15))])
def test_second_gone_answer_confirms_only_after_the_delay(status, delay):
    p = RemovalPolicy()
    assert not weigh(T0, 1, status, T0 + delay - timedelta(seconds=1), p).confirmed
    ok = weigh(T0, 1, status, T0 + delay, p)
    assert ok.confirmed and ok.checks == 2 and ok.since == T0


def test_a_tripped_breaker_pauses_a_confirmed_removal():
    e = weigh(T0, 5, 404, T0 + timedelta(days=1), RemovalPolicy(), paused_by=("agency:mec",))
    assert not e.confirmed and e.paused_by == ("agency:mec",) and e.checks == 6


def test_more_checks_can_be_required():
    p = RemovalPolicy(confirm_checks=3, delay_s=0)
    assert not weigh(T0, 1, 404, T0, p).confirmed and weigh(T0, 2, 404, T0, p).confirmed


@pytest.mark.parametrize("status,delay", [(404, timedelta(hours=6)), (410, timedelta(minutes=15))])
def test_a_first_gone_answer_is_looked_at_again_when_its_delay_is_up(status, delay):
    p = RemovalPolicy()
    first = weigh(None, 0, status, T0, p)
    assert next_look(first, status, T0, p) == T0 + delay
    early = weigh(T0, 1, status, T0 + delay / 2, p)  # a second answer before the delay (a manual check)
    assert early.checks == 2 and next_look(early, status, T0 + delay / 2, p) == T0 + delay


def test_the_answers_still_needed_are_spread_over_the_delay_left():
    p = RemovalPolicy(gone_confirm_checks=3, gone_delay_s=900)
    first = weigh(None, 0, 410, T0, p)
    assert next_look(first, 410, T0, p) == T0 + timedelta(seconds=450)
    second = weigh(T0, 1, 410, T0 + timedelta(seconds=450), p)
    assert next_look(second, 410, T0 + timedelta(seconds=450), p) == T0 + timedelta(seconds=900)
    late = T0 + timedelta(hours=1)  # delay up, one answer short: at the policy's own spacing
    assert next_look(weigh(T0, 1, 410, late, p), 410, late, p) == late + timedelta(seconds=300)


def test_a_paused_streak_with_its_evidence_complete_has_nothing_to_wait_for():
    at = T0 + timedelta(days=1)
    e = weigh(T0, 5, 404, at, RemovalPolicy(), paused_by=("host:www.gov.br",))
    assert not e.confirmed and next_look(e, 404, at, RemovalPolicy()) == at  # the caller keeps its tier


def test_a_streak_dated_in_the_future_restarts_now():
    e = weigh(T0 + timedelta(hours=1), 1, 404, T0, RemovalPolicy())
    assert e.since == T0


def test_settings_from_env_and_bad_values(monkeypatch):
    monkeypatch.setenv("DGB_INTEGRITY_REMOVAL_DELAY_S", "7200")
    monkeypatch.setenv("DGB_INTEGRITY_BREAKER_RATIO", "0.5")
    monkeypatch.setenv("DGB_INTEGRITY_BREAKER_MIN_CHECKS", "40")
    p = RemovalPolicy.from_env()
    assert (p.delay_s, p.breaker_ratio, p.breaker_min_checks, p.confirm_checks) == (7200, 0.5, 40, 2)
    for name, value in [
        ("DGB_INTEGRITY_BREAKER_RATIO", "1.5"),
        ("DGB_INTEGRITY_BREAKER_RATIO", "x"),
        ("DGB_INTEGRITY_REMOVAL_CONFIRM_CHECKS", "0"),
        ("DGB_INTEGRITY_GONE_DELAY_S", "-1"),
        ("DGB_INTEGRITY_BREAKER_WINDOW_S", "ten"),
    ]:
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match=name):
            RemovalPolicy.from_env()
        monkeypatch.delenv(name)


def test_answer_classes():
    assert [is_bad(s) for s in (200, 304, 301, 403, 404, 410, 429, 500, 503, None)] == [
        False,
        False,
        False,
        False,
        True,
        True,
        False,
        True,
        True,
        False,
    ]
    assert [is_normal(s) for s in (200, 304, 301, 404, 503, None)] == [True, True, True, False, False, False]
    assert host_of("https://www.gov.br/mec/x") == "www.gov.br" and host_of(None) is None


def test_moved_helpers():
    assert page_url("http://h/www.gov.br/mec/++api++/pt-br/n/x") == "http://h/www.gov.br/mec/pt-br/n/x"
    assert page_url("http://h/www.gov.br/mec/pt-br/n/x") == "http://h/www.gov.br/mec/pt-br/n/x"
    assert same_article([]) and same_article(["title"]) and same_article(["content", "image_url"])
    assert not same_article(["title", "content"])  # a home page or another article
    assert same_article(["title", "content"], published_same=True)  # rewritten, then renamed


def test_same_publication_is_the_same_minute_and_known_on_both_sides():
    t = datetime(2026, 12, 5, 1, 44, 33, tzinfo=UTC)
    assert same_publication(t, t + timedelta(seconds=59)) and same_publication(t, t)
    assert not same_publication(t, t + timedelta(minutes=1))
    assert not same_publication(t, None) and not same_publication(None, t)
    assert not same_publication(t, t.replace(tzinfo=None))  # not comparable: not the same
    url = plone6_search_url("http://h/www.gov.br/mec/pt-br/assuntos/noticias/x", "mec", "Enem tem recorde")
    assert url == (
        "http://h/www.gov.br/mec/++api++/@search?portal_type=News%20Item&b_size=10&Title=Enem%20tem%20recorde"
    )
    assert plone6_search_url("http://h/other/x", "mec", "t") is None


def test_mirror_move_redirects_keeps_uid_and_search_by_title(tmp_path):
    import json

    Site = pytest.importorskip("dgb_dev.mirror.site", reason="the dev package is not installed here").Site

    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        json.dumps(
            {
                "agency": "mec",
                "url_slug": "velho",
                "title": "Enem tem recorde",
                "published_at": "2026-11-20T10:00:00-03:00",
                "content": "Texto.",
                "image_url": "imagens/x.jpg",
            }
        )
        + "\n"
    )
    site = Site(corpus, extra_dir=None, registry={})
    base, listing = "http://b", "/www.gov.br/mec/pt-br/assuntos/noticias"
    before = site.get("mec", "velho")
    moved = site.move("mec", "velho", "novo")
    assert (moved.uid, moved.image_uid) == (before.uid, before.image_uid)  # Plone keeps the UID
    old = site.render(site.route(f"{listing}/velho"), base)
    assert old.status == 301 and old.headers["Location"] == f"{base}{listing}/novo"
    api = site.render(site.route("/www.gov.br/mec/++api++/pt-br/assuntos/noticias/velho"), base)
    assert api.status == 301 and api.headers["Location"].endswith("/++api++/pt-br/assuntos/noticias/novo")
    assert site.render(site.route(f"{listing}/novo"), base).status == 200
    site.move("mec", "novo", "sem-redirect", redirect=False)
    assert site.render(site.route(f"{listing}/novo"), base).status == 404
    assert site.render(site.route(f"{listing}/velho"), base).status == 404  # chain ends without redirect
    found = json.loads(
        site.render(site.route("/www.gov.br/mec/++api++/@search"), base, "Title=enem%20recorde").body
    )
    assert [i["@id"] for i in found["items"]] == [f"{base}{listing}/sem-redirect"]
    assert (
        json.loads(site.render(site.route("/www.gov.br/mec/++api++/@search"), base, "Title=vacina").body)[
            "items"
        ]
        == []
    )
    with pytest.raises(ValueError):
        site.move("mec", "sem-redirect", "a/b")
    assert site.state()["moved"] == {"mec/novo": None, "mec/velho": "novo"}
