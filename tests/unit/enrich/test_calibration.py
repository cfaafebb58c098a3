"""The offline classifier's calibration (dgb.enrich.calibration): temperatures recovered from
labels drawn at known temperatures, one for short texts and one for the rest."""

from __future__ import annotations

import numpy as np
import pytest

from dgb.enrich import calibration, training

CODES = [str(i) for i in range(5)]


def _draw(rng, z, temperature):
    p = training.softmax(temperature * z)
    return [str(rng.choice(5, p=row)) for row in p]


def test_fit_scale_recovers_a_known_temperature():
    rng = np.random.default_rng(7)
    z = rng.normal(size=(4000, 5))
    assert calibration.fit_scale(z, _draw(rng, z, 2.5), CODES) == pytest.approx(2.5, rel=0.1)


def test_fit_scales_recovers_one_temperature_for_short_texts_and_one_for_the_rest():
    rng = np.random.default_rng(11)
    z = rng.normal(size=(6000, 5))
    chars = np.where(np.arange(6000) % 2 == 0, 400, 3000)  # half short, half whole
    labels = [
        lab_short if c <= calibration.SHORT_CHARS else lab_long
        for c, lab_short, lab_long in zip(chars, _draw(rng, z, 0.8), _draw(rng, z, 3.0))
    ]
    scale, short_scale = calibration.fit_scales(z, labels, CODES, chars)
    assert scale == pytest.approx(3.0, rel=0.12) and short_scale == pytest.approx(0.8, rel=0.12)
    # one temperature for both lies between them: overconfident on one side, under on the other
    one = calibration.fit_scale(z, labels, CODES)
    assert short_scale < one < scale


def test_a_side_without_labelled_rows_takes_the_overall_factor():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(2000, 5))
    labels = _draw(rng, z, 2.0)
    chars = np.full(2000, 5000)  # no short text at all
    scale, short_scale = calibration.fit_scales(z, labels, CODES, chars)
    assert short_scale == scale == calibration.fit_scale(z, labels, CODES)
    with pytest.raises(ValueError, match="content_chars has shape"):
        calibration.fit_scales(z, labels, CODES, chars[:10])


def test_factors_by_content_length():
    f = calibration.factors([0, 1200, 1201, 50_000], 2.0, 0.5, 1200)
    assert f.shape == (4, 1) and f.ravel().tolist() == [0.5, 0.5, 2.0, 2.0]
    assert calibration.factors([0, 50_000], 2.0, None, 1200).ravel().tolist() == [2.0, 2.0]


def test_prior_bias_takes_out_the_weighted_log_share_of_each_code():
    labels = ["a", "a", "a", "b", None, "x"]  # None and codes outside the list count for nothing
    bias = calibration.prior_bias(labels, [1.0, 1.0, 2.0, 1.0, 5.0, 5.0], ["a", "b", "c"], weight=0.5)
    counts = np.array([1 + 4.0, 1 + 1.0, 1.0])  # one more per code: a theme without rows is finite
    assert bias == pytest.approx(-0.5 * np.log(counts / counts.sum()))
    assert bias[0] < bias[1] < bias[2]  # the common theme loses most
    # softmax(z + bias) is softmax(z) divided by the prior's share to the power of the weight
    z = np.array([[0.3, -0.2, 0.1]])
    p = np.exp(z + bias) / np.exp(z + bias).sum()
    q = np.exp(z) * (counts / counts.sum()) ** -0.5
    assert p == pytest.approx(q / q.sum())
    with pytest.raises(ValueError, match="weights has shape"):
        calibration.prior_bias(labels, [1.0], ["a"])
