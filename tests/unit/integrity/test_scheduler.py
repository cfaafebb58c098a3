"""The budget scheduler's choices (dgb.integrity.tiers.choose / scores) on small synthetic sets:
articles under 3 h first, a high-edit-rate agency preferred, 304s make checks cheaper, images less
often than text, the budget respected, and never-checked or old articles eventually chosen."""

from __future__ import annotations

import numpy as np

from dgb.integrity.tiers import (
    BudgetPolicy,
    Candidates,
    agency_rate_multipliers,
    choose,
    image_due,
    scores,
)

NOW = 1_800_000_000.0
H, D = 3600.0, 86400.0
POLICY = BudgetPolicy()


def cands(rows: list[dict]) -> Candidates:
    """Articles from dicts of ages/gaps in seconds (``since`` None = never checked)."""

    def col(key, default):
        return [r.get(key, default) for r in rows]

    nan = np.nan
    return Candidates(
        news_id=np.arange(len(rows)),
        published=NOW - np.array(col("age", D), dtype=float),
        last_checked=np.array([nan if r.get("since", 0) is None else NOW - r.get("since", H) for r in rows]),
        last_changed=np.array([NOW - r["changed"] if "changed" in r else nan for r in rows]),
        page_modified=np.array([NOW - r["page"] if "page" in r else nan for r in rows]),
        agency_rate=np.array(col("rate", 1.0), dtype=float),
        cheap=np.array(col("cheap", False), dtype=bool),
        image_checked=np.array([NOW - r.get("img", 0.0) for r in rows]),
        has_image=np.array(col("has_image", True), dtype=bool),
        urgent=np.array(col("urgent", False), dtype=bool),
    )


def test_under_3h_comes_first_even_when_old_articles_score_higher():
    rows = [{"age": 400 * D, "since": 20 * D, "rate": 5.0, "changed": 2 * H} for _ in range(50)]
    rows.append({"age": 2 * H, "since": 11 * 60})  # a fresh article, 11 min since its last check
    rows.append({"age": 2 * H, "since": 3 * 60})  # checked 3 min ago: not yet
    c = cands(rows)
    assert scores(c, NOW, POLICY)[50] < scores(c, NOW, POLICY)[0]  # by score it would lose
    plan = choose(c, NOW, capacity=3, policy=POLICY)
    assert plan.index[0] == 50 and plan.reason[0] == 0
    assert 51 not in plan.index
    assert plan.requests <= 3


def test_a_high_edit_rate_agency_is_preferred():
    same = {"age": 5 * D, "since": 12 * H, "img": 0.0}
    c = cands([dict(same, rate=0.5), dict(same, rate=3.0), dict(same, rate=1.0)])
    plan = choose(c, NOW, capacity=1, policy=POLICY)
    assert list(plan.index) == [1]
    assert list(choose(c, NOW, capacity=3, policy=POLICY).index) == [1, 2, 0]


def test_a_page_that_answered_304_is_cheaper_to_check():
    same = {"age": 10 * D, "since": 2 * D, "img": 0.0}
    c = cands([dict(same, cheap=False), dict(same, cheap=True)])
    s = scores(c, NOW, POLICY)
    assert s[1] == s[0] / POLICY.cost_304
    assert list(choose(c, NOW, capacity=1, policy=POLICY).index) == [1]


def test_recent_change_and_page_date_modified_raise_the_priority():
    same = {"age": 20 * D, "since": 1 * D, "img": 0.0}
    c = cands([dict(same), dict(same, changed=2 * H), dict(same, page=3 * H)])
    s = scores(c, NOW, POLICY)
    assert s[1] > s[0] and s[2] > s[0]
    assert list(choose(c, NOW, capacity=2, policy=POLICY).index) == [1, 2]


def test_images_are_rechecked_less_often_than_text():
    c = cands(
        [
            {"age": 1 * H, "img": 30 * 60},  # image checked 30 min ago: hourly for a young article
            {"age": 1 * H, "img": 2 * H},
            {"age": 40 * D, "img": 5 * D},  # a 40-day-old article: its image every 10 days
            {"age": 40 * D, "img": 11 * D},
            {"age": 40 * D, "img": 11 * D, "has_image": False},
        ]
    )
    assert list(image_due(c, NOW, POLICY)) == [False, True, False, True, False]
    plan = choose(c, NOW, capacity=100, policy=POLICY)
    assert plan.requests == len(plan) + int(plan.image.sum())


def test_the_budget_caps_the_requests_of_a_run():
    rows = [{"age": (i + 1) * D, "since": 2 * D, "img": 30 * D} for i in range(40)]
    c = cands(rows)
    plan = choose(c, NOW, capacity=21, policy=POLICY)
    assert plan.requests <= 21 and len(plan) == 10  # every check here is content + image
    assert len(set(plan.index.tolist())) == len(plan)
    assert len(choose(c, NOW, capacity=0.5, policy=POLICY)) == 0


def test_removal_evidence_due_and_month_old_checks_are_forced():
    rows = [{"age": 3 * D, "since": 6 * H, "rate": 4.0, "changed": H} for _ in range(5)]
    rows.append({"age": 900 * D, "since": 26 * D})  # beyond max_unchecked
    rows.append({"age": 900 * D, "since": 2 * H, "urgent": True})  # a suspect 404 to confirm
    plan = choose(cands(rows), NOW, capacity=4, policy=POLICY)
    assert set(plan.index[:2].tolist()) == {5, 6} and set(plan.reason[:2].tolist()) == {1}


def test_never_checked_and_old_articles_are_eventually_chosen():
    """A simulated clock: 10-min runs with room for few checks among many busy young articles;
    the never-checked one and the old one are still checked, the old one within the month."""
    rng = np.random.default_rng(3)
    rows = [{"age": float(a), "since": 5 * 60.0, "rate": 3.0} for a in rng.uniform(4 * H, 2 * D, 60)]
    rows.append({"age": 200 * D, "since": None})  # never checked
    rows.append({"age": 700 * D, "since": 20 * D})  # old, last seen 20 days ago
    c = cands(rows)
    first_seen: dict[int, float] = {}
    t = NOW
    for _ in range(int(30 * D / 600)):
        t += 600
        plan = choose(c, t, capacity=4, policy=POLICY)
        c.last_checked[plan.index] = t
        c.image_checked[plan.index[plan.image]] = t
        c.cheap[plan.index] = True
        for i in plan.index.tolist():
            first_seen.setdefault(i, t)
    assert 60 in first_seen and 61 in first_seen
    assert first_seen[61] - NOW <= 5 * D + 600  # 20 days + 5 = the 25-day limit
    assert (t - c.last_checked).max() <= POLICY.max_unchecked_s + 600


def test_agency_rate_multipliers_shrink_small_samples_and_keep_a_floor():
    m = agency_rate_multipliers({"busy": 40, "calm": 0, "new": 1}, {"busy": 100, "calm": 400, "new": 1})
    assert m["busy"] > 2.0  # 40% against ~8% overall
    assert m["calm"] == 0.2  # the floor: never starved
    assert 1.0 < m["new"] < 2.0  # one edited article of one: shrunk toward the overall rate


def test_under_a_backlog_of_young_articles_their_texts_come_before_images():
    """40 young articles never checked (images due), room for 10 requests: 10 texts, no image.
    With room for all, each text and its image."""
    rows = [{"age": (10 + i) * 60.0, "since": None, "img": np.nan} for i in range(40)]
    c = cands(rows)
    assert image_due(c, NOW, POLICY).all()
    tight = choose(c, NOW, capacity=10, policy=POLICY)
    assert len(tight) == 10 and not tight.image.any() and tight.requests == 10
    assert set(tight.index.tolist()) == set(range(30, 40))  # the longest waiting first
    roomy = choose(c, NOW, capacity=80, policy=POLICY)
    assert len(roomy) == 40 and roomy.image.all() and roomy.requests == 80
    some = choose(c, NOW, capacity=50, policy=POLICY)  # all texts, then 10 images
    assert len(some) == 40 and int(some.image.sum()) == 10 and some.requests == 50


def test_removal_evidence_due_comes_before_a_backlog_of_young_articles():
    rows = [{"age": (10 + i) * 60.0, "since": None, "img": np.nan} for i in range(40)]
    rows.append({"age": 30 * 60.0, "since": 5 * 60.0, "urgent": True})  # its first 410, to confirm
    plan = choose(cands(rows), NOW, capacity=5, policy=POLICY)
    assert plan.index[0] == 40 and plan.reason[0] == 1
    assert plan.requests <= 5
