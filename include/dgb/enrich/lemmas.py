"""Portuguese lemmas for the polarity lexicon and the sentiment head: simplemma's dictionary,
compiled to the words they can use.

simplemma (a maintained lemmatiser with its data in the wheel) maps ~927,000 Portuguese word
forms to their lemmas; loading its dictionary takes ~1.2 s and ~100 MB in every process that asks
for one lemma, i.e. in every enrich task. The lexicon and the head only read lemmas they know (a
lexicon term, a word of the head's vocabulary): any other lemma is ignored. So
``scripts/train_sentiment.py`` compiles, from simplemma's dictionary, every form whose lemma is one
of the lemmas the training articles and the lexicon have (:func:`build_table`), into
``data/classifier/lemmas_pt.tsv.gz`` (form, then lemma; both lowercase, accents folded). At run
time :func:`lemma` is a look-up in that table: for those words the same answer as simplemma's
dictionary; a form the table lacks is its own lemma (folded). Training and run time use the same
table, so the head sees the same lemmas in both. simplemma itself is only needed to build it.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from functools import cache, lru_cache
from pathlib import Path

from dgb.textfold import strip_marks

TABLE = Path(__file__).resolve().parent.parent / "data" / "classifier" / "lemmas_pt.tsv.gz"


def fold(word: str) -> str:
    return strip_marks(word).lower()


@cache
def table() -> dict[str, str]:
    """form -> lemma (folded); empty when the file is absent (every word is then its own lemma)."""
    if not TABLE.exists():
        return {}
    out: dict[str, str] = {}
    with gzip.open(TABLE, "rt", encoding="utf-8") as f:
        for line in f:
            form, _, lem = line.rstrip("\n").partition("\t")
            if form:
                out[form] = lem or form
    return out


@lru_cache(maxsize=200_000)
def lemma(word: str) -> str:
    """The folded lemma of one word (the compiled table; else the folded word itself)."""
    folded = fold(word)
    return table().get(folded, folded)


def dictionary_lemma(word: str) -> str:
    """simplemma's own lemma of ``word`` (folded): the build's reference (loads its dictionary)."""
    import simplemma

    return fold(simplemma.lemmatize(word.lower(), lang="pt"))


def build_table(needed: Iterable[str]) -> dict[str, str]:
    """Every form of simplemma's Portuguese dictionary whose lemma is in ``needed`` (folded
    lemmas), and every form in ``needed`` itself, mapped to its folded lemma."""
    from simplemma.strategies.dictionaries.dictionary_factory import DefaultDictionaryFactory

    needed = set(needed)
    out: dict[str, str] = {}
    for form, lem in DefaultDictionaryFactory().get_dictionary("pt").items():
        form_f = fold(form if isinstance(form, str) else form.decode("utf-8"))
        lem_f = fold(lem if isinstance(lem, str) else lem.decode("utf-8"))
        if lem_f in needed or form_f in needed:
            out.setdefault(form_f, lem_f)
    return out


def save_table(entries: dict[str, str], path: Path = TABLE) -> None:
    """Write ``entries`` sorted (deterministic bytes: no timestamp in the gzip header)."""
    body = "".join(f"{form}\t{lem}\n" for form, lem in sorted(entries.items())).encode("utf-8")
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(body)
    table.cache_clear()
    lemma.cache_clear()
