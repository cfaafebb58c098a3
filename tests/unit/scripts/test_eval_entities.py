"""scripts/eval_entities.py: the matching rule (normalised surfaces, same type, one form enough for
recall), the halves, and a planted wrong type or wrong span lowering precision."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def load_script():
    spec = importlib.util.spec_from_file_location("eval_entities", REPO / "scripts" / "eval_entities.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


ev = load_script()
GOLD = {
    "a1": [
        {"type": "ORG", "forms": ["Tribunal de Contas da União", "TCU"]},
        {"type": "PER", "forms": ["Marina Silva"]},
        {"type": "LOC", "forms": ["São Paulo"]},
    ]
}
ARTICLES = [{"id": "a1", "text": "Título do TCU\n\nA ministra Marina Silva foi a São Paulo."}]


def _score(mentions):
    return ev.evaluate(ARTICLES, GOLD, lambda title, content: mentions)


def _m(text, etype, canonical=None):
    return {"text": text, "type": etype, "count": 1, "forma_canonica": canonical or text, "salience": 0.5}


def test_normalisation_drops_accents_case_and_any_whitespace():
    assert ev.normalise("  SÃO\u00a0 Paulo\n") == "sao paulo" == ev.normalise("Sao paulo")


def test_all_correct_then_a_wrong_type_and_a_wrong_span_lower_precision():
    right = [
        _m("TCU", "ORG", "Tribunal de Contas da União"),
        _m("Marina Silva", "PER"),
        _m("sao  PAULO", "LOC"),
    ]
    s = _score(right)
    assert [(s[t].precision, s[t].recall) for t in ev.TYPES] == [(1.0, 1.0)] * 3
    assert (s["ORG"].correct, s["ORG"].predicted, s["ORG"].found, s["ORG"].gold) == (2, 2, 1, 1)

    wrong_type = _score([*right, _m("Marina Silva", "ORG")])  # a person called an organisation
    assert wrong_type["ORG"].precision == 2 / 3 and wrong_type["ORG"].false_positives == [
        ("marina silva", "a1")
    ]
    assert wrong_type["PER"].precision == 1.0

    wrong_span = _score([_m("TCU", "ORG"), _m("ministra Marina Silva", "PER"), _m("São Paulo", "LOC")])
    assert wrong_span["PER"].precision == 0.0 and wrong_span["PER"].recall == 0.0
    assert wrong_span["PER"].false_negatives == [(["Marina Silva"], "a1")]

    # a forma_canonica that is not in the text is a prediction too, and a wrong one
    catalogue_name = _score([_m("TCU", "ORG", "Tribunal de Contas da União (órgão)")])
    assert catalogue_name["ORG"].precision == 0.5 and catalogue_name["ORG"].recall == 1.0


def test_other_types_are_not_predictions_and_title_content_split_at_the_blank_line():
    seen = []

    def extract(title, content):
        seen.append((title, content))
        return [_m("Programa X", "POLICY"), _m("TCU", "ORG")]

    s = ev.evaluate(ARTICLES, GOLD, extract)
    assert seen == [("Título do TCU", "A ministra Marina Silva foi a São Paulo.")]
    assert s["ORG"].predicted == 1 and s["PER"].recall == 0.0 and s["LOC"].gold == 1


def test_halves_are_stable_and_about_even(tmp_path, capsys):
    ids = [f"id-{i}" for i in range(400)]
    halves = [ev.split_of(i) for i in ids]
    assert halves == [ev.split_of(i) for i in ids] and 160 < halves.count("dev") < 240
    (tmp_path / "articles.jsonl").write_text("\n".join(json.dumps(a) for a in ARTICLES))
    (tmp_path / "gold.jsonl").write_text(json.dumps({"id": "a1", "entities": GOLD["a1"]}))
    assert ev.main(["--data", str(tmp_path), "--errors", "PER"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 articles (all)") and "false negatives" in out
