"""`dgb features --json` (dgb.features.offline): one JSON line per valid input with the reading
figures, the sentiment and its method, and the entities in production's mention shape with their
canonical ids; a bad line is reported and loses nothing else; the same input gives the same output.
Through the real bundled model (the local classifier's sentiment head)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest

from dgb.features import offline

pytestmark = pytest.mark.model

LINES = [
    {
        "title": "Enchente deixa 10 mortos em Minas Gerais",
        "content": "A Defesa Civil confirmou dez mortes após as chuvas. O ministro Waldez Góes visitou "
        "Juiz de Fora (MG) nesta segunda-feira. O Ministério da Saúde enviou equipes à região.",
    },
    "not json",
    {"title": "", "content": "sem título"},
    {
        "title": "Governo inaugura hospital e amplia atendimento gratuito",
        "content": "O novo hospital vai beneficiar 500 mil moradores de Belém (PA), que antes viajavam "
        "horas para ter atendimento especializado.",
        "agency": "saude",
    },
]


@pytest.fixture(scope="module")
def classifier():
    from dgb.embed import get_embedder
    from dgb.enrich.local import LocalClassifier

    return LocalClassifier(get_embedder(prefer="local"))


def run(classifier) -> tuple[int, list[dict], str]:
    stdin = io.StringIO("\n".join(x if isinstance(x, str) else json.dumps(x) for x in LINES) + "\n")
    out, err = io.StringIO(), io.StringIO()
    code = offline.run(SimpleNamespace(json=True), stdin, out, err, classifier=classifier)
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def test_one_line_per_valid_input_and_a_clear_error_for_the_bad_ones(classifier):
    code, rows, err = run(classifier)
    assert code == 1
    assert [r["line"] for r in rows] == [1, 4]
    assert "line 2: bad input: invalid JSON" in err and "line 3: bad input: missing or empty 'title'" in err
    for r in rows:
        assert set(r) == {"line", *offline.KEYS, "entities"}
        assert r["sentiment_method"] == "local-head-1"
    flood, hospital = rows
    assert flood["sentiment"]["label"] == "negative" and hospital["sentiment"]["label"] == "positive"
    assert flood["word_count"] == len(LINES[0]["content"].split())
    assert isinstance(flood["readability_flesch_pt"], float)
    mentions = {m["text"]: m for m in flood["entities"]}
    for m in flood["entities"]:
        assert set(m) == {"text", "type", "count", "forma_canonica", "salience", "canonical_id"}
    assert mentions["Ministério da Saúde"]["canonical_id"] == "dgb_saude"  # the agency's id
    assert mentions["Waldez Góes"]["type"] == "PER"
    assert mentions["Waldez Góes"]["canonical_id"] == "dgb_per_waldez-goes"  # minted, per type
    assert mentions["Juiz de Fora"]["type"] == "LOC"


def test_the_same_input_gives_the_same_output(classifier):
    first, second = run(classifier)[1], run(classifier)[1]
    assert first == second


def test_a_proposed_id_of_another_type_is_not_taken():
    mention = {"text": "Saúde", "type": "LOC", "forma_canonica": "Saúde", "canonical_id": "dgb_saude"}
    assert offline.offline_canonical_id(mention) == "dgb_loc_saude"
    assert offline.offline_canonical_id({**mention, "type": "ORG"}) == "dgb_saude"
    assert offline.offline_canonical_id({**mention, "canonical_id": "Q155"}) == "Q155"
