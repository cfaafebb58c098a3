"""The publication model of the scraping simulation (dgb_dev.mirror.publication): estimated from
real articles, stored, and what it generates (office hours, weekends, per-agency shares)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from dgb_dev.mirror.publication import MODEL_FILE, PublicationModel, estimate

DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "classifier-dev"


@pytest.mark.skipif(
    not (DATA / "real.jsonl").exists(), reason="the real articles are not beside the checkout"
)
def test_the_stored_model_is_the_estimate_from_the_real_articles():
    import json

    assert json.loads(MODEL_FILE.read_text(encoding="utf-8")) == estimate(DATA)


def test_generated_publications_follow_office_hours_weekdays_and_agency_shares():
    model = PublicationModel.load()
    assert model.weekend_factor < 0.5 and abs(sum(model.hour_share) - 1) < 1e-3
    keys = ["mdr", "cidades", "orgao-que-nunca-apareceu"]
    start = datetime(2026, 12, 7, 3, 0, tzinfo=UTC).timestamp()  # Monday 00:00 in Brasília
    times, who = model.generate(keys, start, 28, 300.0, np.random.default_rng(1))
    assert 28 * 300 * 0.9 < len(times) < 28 * 300 * 1.1
    local = (times - start) % 86400 / 3600  # Brasília hour of day
    day = ((times - start) // 86400) % 7
    office = ((local >= 9) & (local < 19)).mean()
    assert office > 0.7  # most articles in office hours
    assert (day >= 5).mean() < 0.1  # few at weekends
    counts = np.bincount(who, minlength=3)
    assert counts[0] > counts[1] > counts[2] > 0  # the sample's shares; an unseen agency still publishes
