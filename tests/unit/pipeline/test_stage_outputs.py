"""The stage tasks' per-article outputs are pinned: what the enrich, embed and index stages produce
for 159 real articles and a few hand-made edge cases (themes, confidence, summary, sentiment, the
classifier's model inputs, every feature key, entity mentions with their canonical ids, the
embedded text, the Typesense document) equals, digest for digest, what the code at 1fef556 (before
issue 40's CPU work) produced. Work done to make these stages cheaper must leave them unchanged.

The outputs come from :func:`dgb_dev.stagework.run` (the production stage code, the model stood in
for by a deterministic embedder named as the shipped heads' model, PostgreSQL by a dumping cursor).
``tests/fixtures/pipeline/stage_outputs.json`` holds the digests; it was written by this module
run as a script against that commit's ``include/``:

    git archive 1fef556 include plugins | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base/include:dev:/tmp/base/plugins .venv/bin/python \\
        tests/unit/pipeline/test_stage_outputs.py --write
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GOLDEN = FIXTURES / "pipeline" / "stage_outputs.json"
PARTS = ("classification", "features", "units", "embed_text", "document")

# hand-made rows for the edges of the text cleaning: a page header or a "Leia também" in the
# subtitle, blank lines around the parts, CR LF and U+2028, a table, emphasis, invisible
# characters, a body past the model's text budget, an article with a title only
_EDGES = [
    {
        "title": "Ministério da Saúde amplia vacinação",
        "subtitle": "Compartilhe:\n[Facebook](https://f.com/x)",
        "content": "Publicado em\n03/02/2026 10h00\n\n"
        "O Ministério da Saúde ampliou hoje a vacinação em São Paulo (SP).",
    },
    {
        "title": "Governo anuncia obras",
        "subtitle": "Leia também",
        "editorial_lead": "O lead não chega ao leitor.",
        "content": "A ministra Ana Souza, secretária de Obras, disse que as obras começam em Recife/PE.",
    },
    {
        "title": "Boletim",
        "subtitle": "Primeira linha\n  \n",
        "editorial_lead": "\n\nlead em minúsculas\n",
        "content": "\n\n## Destaques\n\n- item um\n- item dois\n\n| a | b |\n|---|---|\n\n"
        "Texto **forte** e _fraco_ com\u200b invisíveis e https://www.gov.br/link solto.\r\n"
        "Segunda linha\u2028com separador.\n\nConteúdo relacionado\n\nNada daqui.",
    },
    {
        "title": "Relatório longo do Instituto Nacional de Pesquisas Espaciais (INPE)",
        "content": "O Instituto Nacional de Pesquisas Espaciais (INPE) publicou o relatório. " * 400,
    },
    {"title": "Só o título da Lei nº 14.133/2021", "content": ""},
]


def sample_rows() -> list[dict]:
    from dgb_dev.stagework import load_rows

    paths = [
        FIXTURES / "classifier" / f for f in ("real_news.jsonl", "short_news.jsonl", "archive_sample.jsonl")
    ]
    rows = load_rows([FIXTURES.parents[1] / "include" / "dgb" / "data" / "corpus" / "articles.jsonl", *paths])
    for i, edge in enumerate(_EDGES):
        row = dict(rows[0], unique_id=f"edge{i}", subtitle=None, editorial_lead=None)
        rows.append({**row, **edge})
    return rows


def digests() -> dict[str, dict[str, str]]:
    from dgb_dev.stagework import digest, run

    out = run(sample_rows())
    return {
        uid: {part: digest(item.get(part)) for part in PARTS} for uid, item in out.items() if uid != "_model"
    }


def test_the_stages_outputs_are_those_of_the_code_before_the_cpu_work():
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = digests()
    assert set(got) == set(want)
    differ = [f"{uid}: {part}" for uid in want for part in PARTS if got[uid][part] != want[uid][part]]
    assert not differ, f"{len(differ)} output(s) changed, e.g. {differ[:10]}"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
