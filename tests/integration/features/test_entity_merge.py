"""``dgb features entities merge FROM INTO`` on the real PostgreSQL: aliases, news_entities rows and
the articles' mentions move to INTO (versions bumped), FROM's names resolve to INTO from then on,
refusals exit 2, a second run changes nothing, --dry-run changes nothing."""

from __future__ import annotations

import pytest

from dgb import cli, db
from dgb.features import compute, registry
from dgb.features.store import read_features
from tests.support import news

pytestmark = pytest.mark.stack


def _rows(pg, sql, *args):
    with pg.cursor() as cur:
        cur.execute(sql, args or None)
        return cur.fetchall()


def _write(pg, uid, mentions):
    with db.transaction(pg) as cur:
        compute.write(cur, uid, compute.ArticleFeatures({"word_count": 10}, mentions))


@pytest.fixture
def two_spellings(pg):
    """Two ORG entities that are one (a spelling the registry took for another), a LOC of the same
    name, in three articles; article a2 names both ORGs."""
    for uid in ("a1", "a2", "a3"):
        news.add(pg, uid)
    fiocruz = {"text": "Fiocruz", "type": "ORG", "count": 2, "forma_canonica": "Fiocruz", "salience": 0.4}
    fio = {"text": "FioCruz RJ", "type": "ORG", "count": 1, "forma_canonica": "FioCruz RJ", "salience": 0.7}
    place = {"text": "FioCruz RJ", "type": "LOC", "count": 1, "forma_canonica": "FioCruz RJ", "salience": 0.1}
    _write(pg, "a1", [fiocruz])
    _write(pg, "a2", [fiocruz, fio, place])
    _write(pg, "a3", [fio])
    return "dgb_org_fiocruz", "dgb_org_fiocruz-rj"


def test_merge_moves_everything_to_into_and_is_idempotent(pg, two_spellings, capsys):
    into, gone = two_spellings
    versions = dict(_rows(pg, "SELECT unique_id, version FROM news"))

    assert cli.main(["features", "entities", "merge", gone, into]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        f"entities merge: {gone} -> {into} (ORG); moved: aliases 1, news_entities rows 2,"
        " articles (re-indexed) 2"
    ]
    # news_entities: a2 keeps one row for INTO (counts added, the higher salience), a3 moved
    assert _rows(pg, "SELECT unique_id, entity_id, count, salience FROM news_entities ORDER BY 1, 2") == [
        ("a1", into, 2, pytest.approx(0.4)),
        ("a2", "dgb_loc_fiocruz-rj", 1, pytest.approx(0.1)),
        ("a2", into, 3, pytest.approx(0.7)),
        ("a3", into, 1, pytest.approx(0.7)),
    ]
    # the articles' mentions now carry INTO; the LOC of the same name is untouched; versions bumped
    with pg.cursor() as cur:
        feats = read_features(cur, ["a1", "a2", "a3"])
    assert [m["canonical_id"] for m in feats["a2"]["entities"]] == [into, into, "dgb_loc_fiocruz-rj"]
    assert [m["canonical_id"] for m in feats["a3"]["entities"]] == [into]
    after = dict(_rows(pg, "SELECT unique_id, version FROM news"))
    assert after == {"a1": versions["a1"], "a2": versions["a2"] + 1, "a3": versions["a3"] + 1}
    # FROM's names resolve to INTO; FROM stays as a marker with nothing attached
    assert _rows(pg, "SELECT entity_id FROM entity_alias WHERE alias_norm = 'fiocruz rj' ORDER BY type") == [
        ("dgb_loc_fiocruz-rj",),
        (into,),
    ]
    with db.transaction(pg) as cur:
        again = registry.resolve(cur, [{"text": "FioCruz RJ", "type": "ORG", "forma_canonica": "FioCruz RJ"}])
        # an extractor proposing the merged id gets INTO too
        proposed = registry.resolve(cur, [{"text": "F. RJ", "type": "ORG", "canonical_id": gone}])
    assert again[0]["canonical_id"] == into and proposed[0]["canonical_id"] == into
    assert _rows(pg, "SELECT extra->>'merged_into' FROM entity_registry WHERE entity_id = %s", gone) == [
        (into,)
    ]
    assert _rows(pg, "SELECT count(*) FROM entity_alias WHERE entity_id = %s", gone) == [(0,)]
    assert _rows(
        pg, "SELECT aliases, extra->'merged_from' FROM entity_registry WHERE entity_id = %s", into
    ) == [(["Fiocruz", "FioCruz RJ"], [gone])]

    # twice: nothing left to move, nothing bumped
    assert cli.main(["features", "entities", "merge", gone, into]) == 0
    assert capsys.readouterr().out == (
        f"entities merge: {gone} -> {into} (ORG); already merged; moved: aliases 0, news_entities rows 0,"
        " articles (re-indexed) 0\n"
    )
    assert dict(_rows(pg, "SELECT unique_id, version FROM news")) == after


def test_dry_run_changes_nothing(pg, two_spellings, capsys):
    into, gone = two_spellings
    before = (
        _rows(pg, "SELECT * FROM entity_alias ORDER BY 1, 2"),
        _rows(pg, "SELECT * FROM news_entities ORDER BY 1, 2"),
        _rows(pg, "SELECT unique_id, version FROM news ORDER BY 1"),
        _rows(pg, "SELECT entity_id, extra FROM entity_registry ORDER BY 1"),
    )
    assert cli.main(["features", "entities", "merge", gone, into, "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith(
        f"entities merge (dry run): {gone} -> {into} (ORG); would move: aliases 1, news_entities rows 2"
    )
    assert before == (
        _rows(pg, "SELECT * FROM entity_alias ORDER BY 1, 2"),
        _rows(pg, "SELECT * FROM news_entities ORDER BY 1, 2"),
        _rows(pg, "SELECT unique_id, version FROM news ORDER BY 1"),
        _rows(pg, "SELECT entity_id, extra FROM entity_registry ORDER BY 1"),
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dgb_org_nao-existe", "dgb_org_fiocruz"], "no entity 'dgb_org_nao-existe' in entity_registry"),
        (["dgb_org_fiocruz", "dgb_org_nao-existe"], "no entity 'dgb_org_nao-existe' in entity_registry"),
        (["dgb_loc_fiocruz-rj", "dgb_org_fiocruz"], "dgb_loc_fiocruz-rj is LOC and dgb_org_fiocruz is ORG"),
        (["dgb_org_fiocruz", "dgb_org_fiocruz"], "FROM and INTO are the same id"),
    ],
)
def test_refusals_exit_2_and_change_nothing(pg, two_spellings, capsys, args, message):
    before = _rows(pg, "SELECT * FROM entity_alias ORDER BY 1, 2")
    assert cli.main(["features", "entities", "merge", *args]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
    assert _rows(pg, "SELECT * FROM entity_alias ORDER BY 1, 2") == before


def test_a_merged_entity_is_no_target_and_merges_once(pg, two_spellings, capsys):
    into, gone = two_spellings
    assert cli.main(["features", "entities", "merge", gone, into]) == 0
    assert cli.main(["features", "entities", "merge", into, gone]) == 2
    assert f"{gone} was merged into {into}: merge into {into} instead" in capsys.readouterr().err
