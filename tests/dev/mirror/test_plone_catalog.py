"""The local site's Plone 6 ``@search`` as a change signal: ``sort_on=modified`` both ways and the
``modified`` column, which agrees with the item's JSON and the page's ``Last-Modified`` after an edit."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

ARTICLES = [
    (
        "mulheres",
        "casa-da-mulher",
        "Nova Casa da Mulher Brasileira é inaugurada",
        "2026-11-19T14:00:00-03:00",
    ),
    ("mulheres", "ligue-180", "Ligue 180 amplia atendimento por mensagem", "2026-11-10T10:00:00-03:00"),
    ("mulheres", "pacto-nacional", "Pacto nacional ganha novas adesões", "2026-11-01T09:00:00-03:00"),
]


def _search(client, base, site, **query):
    ag = site.agency_for("mulheres")
    url = f"{base}/www.gov.br/mulheres/++api++/{ag.path}/@search"
    params = {"portal_type": "News Item", "b_size": "25", **query}
    resp = client.get(url, params=params)
    assert resp.status_code == 200
    return resp.json()["items"]


def test_search_sorted_on_modified_reports_the_same_modified_as_the_item_and_the_page(mirror):
    site, server, base = mirror(ARTICLES)
    with httpx.Client(timeout=10) as client:
        by_modified = _search(
            client, base, site, sort_on="modified", sort_order="descending", metadata_fields="modified"
        )
        assert [i["@id"].rsplit("/", 1)[1] for i in by_modified] == [
            "casa-da-mulher",
            "ligue-180",
            "pacto-nacional",
        ]
        assert all(datetime.fromisoformat(i["modified"]).tzinfo is not None for i in by_modified)
        assert "blocks" not in by_modified[0]  # still a summary: one column more, not the object

        site.clock = lambda: datetime(2026, 11, 25, 12, 0, 5, tzinfo=UTC)
        site.edit("mulheres", "pacto-nacional", title="Pacto nacional ganha novas adesões (corrigido)")
        newest = _search(
            client, base, site, sort_on="modified", sort_order="descending", metadata_fields="modified"
        )
        assert newest[0]["@id"].endswith("/pacto-nacional")
        assert newest[0]["modified"] == "2026-11-25T12:00:05+00:00"
        oldest = _search(
            client, base, site, sort_on="modified", sort_order="ascending", metadata_fields="modified"
        )
        assert [i["@id"] for i in oldest] == [i["@id"] for i in newest][::-1]

        item = client.get(newest[0]["@id"].replace("/mulheres/", "/mulheres/++api++/", 1)).json()
        assert item["modified"] == newest[0]["modified"]
        page = client.get(newest[0]["@id"])
        assert parsedate_to_datetime(page.headers["last-modified"]) == datetime.fromisoformat(
            item["modified"]
        )

        # without sort_on the order stays the site's own (publication, newest first)
        plain = _search(client, base, site)
        assert plain[0]["@id"].endswith("/casa-da-mulher") and "modified" not in plain[0]
        every = _search(client, base, site, metadata_fields="_all")
        assert {"modified", "effective", "UID"} <= set(every[0])
