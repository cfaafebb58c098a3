"""The UI pages' shared HTML/SVG helpers (dgb_airflow.ui.common): what they render, escape and
return on normal values, missing values and hostile text (markup, quotes in attributes)."""

from __future__ import annotations

from datetime import UTC, datetime
from xml.etree import ElementTree

import pytest

from dgb_airflow.ui.common import CSS, duration_text, esc, hours_text, legend, pct, short_time, svg_open

HOSTILE = '<script>alert(\'x\')</script>" onload="steal()" &amp;'


def test_esc_escapes_markup_and_both_quotes():
    assert esc("<b>R&D</b>") == "&lt;b&gt;R&amp;D&lt;/b&gt;"
    assert esc("\"double\" 'single'") == "&quot;double&quot; &#x27;single&#x27;"
    escaped = esc(HOSTILE)
    assert not any(ch in escaped for ch in "<>\"'")
    assert "&amp;amp;" in escaped  # an entity in the text is shown, not interpreted


def test_esc_renders_none_as_nothing_and_other_values_as_text():
    assert esc(None) == ""
    assert esc(0) == "0" and esc(2.5) == "2.5" and esc(False) == "False"
    assert esc(ValueError("bad <input>")) == "bad &lt;input&gt;"


@pytest.mark.parametrize(
    ("value", "text"), [(None, "–"), (0, "0.0%"), (0.1234, "12.3%"), (1, "100.0%"), (1.5, "150.0%")]
)
def test_pct(value, text):
    assert pct(value) == text


@pytest.mark.parametrize(("value", "text"), [(None, "–"), (0, "0.0 h"), (2.25, "2.2 h"), (36.07, "36.1 h")])
def test_hours_text(value, text):
    assert hours_text(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "–"),
        (0, "0 s"),
        (119.4, "119 s"),  # seconds below two minutes
        (120, "2.0 min"),
        (5400, "90.0 min"),  # minutes below two hours
        (7200, "2.0 h"),
        (90000, "25.0 h"),
    ],
)
def test_duration_text_picks_the_unit(seconds, text):
    assert duration_text(seconds) == text


def test_short_time_of_datetimes_and_iso_strings():
    moment = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert short_time(moment) == "2026-03-04 05:06"
    assert short_time("2026-03-04T05:06:07+00:00") == "2026-03-04 05:06"
    assert short_time("2026-03-04") == "2026-03-04 00:00"


def test_short_time_leaves_other_values_as_text_for_the_caller_to_escape():
    assert short_time(None) == ""
    assert short_time("not a time") == "not a time"
    assert short_time(HOSTILE) == HOSTILE  # not escaped here: the pages pass it through esc()
    assert short_time(42) == "42"


def test_svg_open_is_an_accessible_scalable_chart_with_escaped_id_and_title():
    head = svg_open("chart-x", "Rate <per> agency", 640, 200)
    root = ElementTree.fromstring(head + "</svg>")  # well-formed once closed
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.attrib == {
        "id": "chart-x",
        "class": "chart",
        "role": "img",
        "aria-label": "Rate <per> agency",
        "viewBox": "0 0 640 200",
        "width": "100%",
    }
    [title] = list(root)
    assert title.tag.endswith("title") and title.text == "Rate <per> agency"


def test_svg_open_keeps_hostile_text_inside_its_attributes():
    head = svg_open(HOSTILE, HOSTILE, 10, 10)
    root = ElementTree.fromstring(head + "</svg>")
    assert root.attrib["id"] == HOSTILE and root.attrib["aria-label"] == HOSTILE  # values, not markup
    assert "onload" not in root.attrib and "<script>" not in head
    [title] = list(root)
    assert title.text == HOSTILE


def test_legend_draws_one_swatch_and_label_per_item_left_to_right():
    svg = legend([("ok", "#2e7d32"), ("failed", "#c62828")], y=50)
    root = ElementTree.fromstring(f'<svg xmlns="http://www.w3.org/2000/svg">{svg}</svg>')
    rects = [e for e in root if e.tag.endswith("rect")]
    texts = [e for e in root if e.tag.endswith("text")]
    assert [r.attrib["fill"] for r in rects] == ["#2e7d32", "#c62828"]
    assert [t.text for t in texts] == ["ok", "failed"]
    assert rects[0].attrib["x"] == "10.0" and rects[0].attrib["y"] == "40.0"  # the swatch sits above y
    # the next swatch starts after the first label (width grows with the label's length)
    assert float(rects[1].attrib["x"]) == pytest.approx(10 + 16 + 6.5 * len("ok") + 14)
    assert float(rects[1].attrib["x"]) > float(texts[0].attrib["x"])


def test_legend_escapes_labels_and_is_empty_without_items():
    assert legend([], y=10) == ""
    svg = legend([(HOSTILE, "#000")], y=10, x=0)
    root = ElementTree.fromstring(f'<svg xmlns="http://www.w3.org/2000/svg">{svg}</svg>')
    assert [e.text for e in root if e.tag.endswith("text")] == [HOSTILE]
    assert "<script>" not in svg


def test_css_is_self_contained():
    """The page style loads nothing from elsewhere (no imports, no remote fonts or images)."""
    assert "@import" not in CSS and "url(" not in CSS
    assert "nav.pages" in CSS and ".card" in CSS
