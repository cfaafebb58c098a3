"""`dgb classify --json` end to end: a real process, the configured (local) backend, the bundled
model in-process, 5 corpus articles and one bad line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dgb.enrich.summary import SUMMARY_MAX_CHARS
from dgb.taxonomy import load_taxonomy

pytestmark = pytest.mark.model

CORPUS = Path(__file__).resolve().parents[3] / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"


def test_classify_json_end_to_end(tmp_path):
    arts = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()[:5]]
    lines = [
        json.dumps(
            {"title": a["title"], "subtitle": a["subtitle"], "content": a["content"]}, ensure_ascii=False
        )
        for a in arts
    ]
    lines.insert(2, '{"title": "Notícia sem fim de JSON", "content": ')  # line 3 is bad
    env = dict(os.environ, DGB_CLASSIFIER="local", DGB_EMBEDDER="local")
    proc = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "classify", "--json"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert proc.returncode != 0, proc.stderr
    assert "line 3" in proc.stderr and "invalid JSON" in proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(out) == 5, proc.stdout + proc.stderr
    assert [o["line"] for o in out] == [1, 2, 4, 5, 6]

    taxonomy = load_taxonomy()
    for o, _a in zip(out, arts):
        assert set(o) == {"line", "l1", "l2", "l3", "most_specific", "summary", "confidence"}
        assert taxonomy.is_valid_path(o["l1"], o["l2"], o["l3"])
        assert o["most_specific"] == (o["l3"] or o["l2"] or o["l1"])
        assert o["summary"] and 0 < o["confidence"] <= 1
    # the corpus's first articles are easy ones: the editor's level-1 theme comes out
    assert sum(o["l1"] == a["theme_l1"] for o, a in zip(out, arts)) >= 4


def test_classify_reports_non_object_and_missing_title():
    env = dict(os.environ, DGB_CLASSIFIER="local", DGB_EMBEDDER="local")
    proc = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "classify", "--json"],
        input='[1, 2]\n\n{"content": "sem título"}\n',
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "line 1: bad input: expected a JSON object" in proc.stderr
    assert "line 3: bad input: missing or empty 'title'" in proc.stderr


def test_classify_hostile_lines_are_bounded_and_do_not_fail_the_others():
    """The lines that once took `dgb classify` to 18 GB RSS or failed its batch: 2 MB of text
    without punctuation, a 1 MB title, a lone surrogate (JSON escape) in one line. Every line
    gets its classification, in the same batch, with a short summary of valid UTF-8."""
    art = json.loads(CORPUS.read_text(encoding="utf-8").splitlines()[0])
    lines = [
        json.dumps({"title": "Boletim do dia", "content": "palavra " * 260_000}),  # 2.1 MB
        json.dumps({"title": "Título " * 150_000, "content": art["content"]}),  # 1.05 MB title
        json.dumps({"title": "Vacina\ud800ção contra a gripe", "content": art["content"]}),
        json.dumps({"title": art["title"], "subtitle": art["subtitle"], "content": art["content"]}),
    ]
    env = dict(os.environ, DGB_CLASSIFIER="local", DGB_EMBEDDER="local")
    proc = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "classify", "--json"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o["line"] for o in out] == [1, 2, 3, 4]
    taxonomy = load_taxonomy()
    for o in out:
        assert taxonomy.is_valid_path(o["l1"], o["l2"], o["l3"])
        assert o["summary"] and len(o["summary"]) <= SUMMARY_MAX_CHARS
        o["summary"].encode("utf-8")  # no lone surrogate made it through
    assert out[3]["l1"] == art["theme_l1"]  # the ordinary article, classified as usual
