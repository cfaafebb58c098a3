"""Offline entity extraction: the agency catalogue, shipped gazetteers and a few rules. No model.

What it finds, in the title and the content (markdown images and link targets removed):

* **catalogue and gazetteer names** (case-sensitive, whole words, punctuation between words
  ignored): every agency of ``data/agencies.yaml`` by its name, its name before " - ", and its key
  as an upper-case acronym (``MEC``, ``INSS``; keys that are ordinary words are left out), as ORG
  with the id ``dgb_<agency key>``; and the names of ``data/features/gazetteer_pt.tsv`` (states,
  capitals, biomes, countries, international bodies, federal programmes, laws, events), with a
  Wikidata QID where the file gives one;
* **headed names**: a capitalised name that starts with an institutional head (Ministério,
  Instituto, Universidade ... -> ORG; Programa, Plano, Política ... -> POLICY; Lei, Estatuto,
  Código -> LAW; Conferência, Prêmio, Festival ... -> EVENT), with its acronym when it is defined in
  parentheses right after it (later uses of the acronym count for the same entity);
* **numbered norms** (Lei nº 14.133/2021, Decreto nº 11.000, Medida Provisória nº 1.286, Portaria
  ... nº 12) -> LAW;
* **people** next to a role: "o ministro Camilo Santana", "a ministra da Saúde, Nísia Trindade",
  "Ana Souza, secretária de ..." -> PER (two to five capitalised words).

``count`` is the number of occurrences of any of the entity's surfaces; ``salience`` is 0.4 when
the entity is in the title, plus up to 0.3 the earlier its first occurrence, plus up to 0.3 with
its count (5 or more: all of it). Precision is what it aims at: a capitalised phrase with no head,
no role and no entry is not an entity here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from dgb.features.entities import WORD_KEYS, agency_id

GAZETTEER_PATH = Path(__file__).resolve().parent.parent / "data" / "features" / "gazetteer_pt.tsv"
MAX_NGRAM = 12


def _words(text: str) -> list[str]:
    return text.split()


_HEADS = {
    "ORG": _words(
        "Ministério Secretaria Secretaria-Geral Instituto Agência Universidade Fundação Tribunal "
        "Conselho Comissão Companhia Superintendência Departamento Diretoria Coordenação Banco "
        "Empresa Autoridade Controladoria Advocacia-Geral Procuradoria Procuradoria-Geral "
        "Defensoria Polícia Câmara Assembleia Prefeitura Governo Confederação Federação "
        "Associação Organização Centro Hospital Escola Colégio Serviço Casa Comando Gabinete "
        "Observatório Laboratório Museu Biblioteca Arquivo Embaixada Consulado Frente Fórum Rede "
        "Sindicato Cooperativa"
    ),
    "POLICY": _words("Programa Plano Política Estratégia Pacto Campanha"),
    "LAW": ["Lei", "Estatuto", "Código"],  # numbered norms: _NORM
    "EVENT": _words(
        "Conferência Prêmio Festival Semana Encontro Congresso Seminário Simpósio Feira Olimpíada "
        "Jornada Mostra Cúpula Jogos Copa Campeonato Marcha Bienal"
    ),
}
_HEAD_TYPE = {h: t for t, heads in _HEADS.items() for h in heads}
_ARTICLES = frozenset(_words("a o as os"))
# heads that also start place names: "Centro Histórico de ...", "Casa Forte" (a neighbourhood)
_PLACES = ("Centro Histórico", "Casa Forte", "Casa em ")
_UFS = frozenset(_words("AC AL AP AM BA CE DF ES GO MA MT MS MG PA PB PR PE PI RJ RN RS RO RR SC SP SE TO"))
_HEAD_TYPE["Fórum"] = "EVENT"
_CONNECTORS = frozenset(_words("de da do das dos e para em à às ao aos a o no na nos nas sobre com"))
_ROLES = _words(
    "ministro ministra presidente presidenta vice-presidente secretário secretária "
    "secretário-executivo secretária-executiva diretor diretora diretor-presidente "
    "diretora-presidente governador governadora prefeito prefeita deputado deputada senador "
    "senadora superintendente coordenador coordenadora reitor reitora embaixador embaixadora "
    "chefe ministro-chefe ministra-chefe procurador procuradora procurador-geral defensor "
    "defensora juiz juíza desembargador desembargadora delegado delegada comandante general "
    "almirante brigadeiro pesquisador pesquisadora professor professora gerente assessor "
    "assessora auditor auditora presidente-executivo ouvidor ouvidora vereador vereadora papa "
    "rei rainha"
)
_UP = "A-ZÁÉÍÓÚÂÊÔÃÕÇÀ"
_LOW = "a-záéíóúâêôãõçàü"
_NAME_WORD = rf"[{_UP}][{_LOW}]+(?:-[{_UP}]?[{_LOW}]+)?"
_NAME = rf"{_NAME_WORD}(?:\s+(?:(?:de|da|do|dos|das)\s+)?{_NAME_WORD}){{1,4}}"
_ROLE = "|".join(sorted(map(re.escape, _ROLES), key=len, reverse=True))
_PER_AFTER_ROLE = re.compile(rf"\b(?:{_ROLE})\s+(?:(?:d[aoe]s?|em)\s+[^,.;:()\n]{{1,70}}?,\s+)?({_NAME})")
_PER_BEFORE_ROLE = re.compile(rf"({_NAME}),\s+(?:(?:o|a)\s+)?(?:{_ROLE})\b")
_NORM = re.compile(
    r"\b(Lei Complementar|Lei|Decreto-Lei|Decreto|Medida Provisória|Emenda Constitucional|"
    r"Portaria(?: [A-Z][\w/-]*)?|Instrução Normativa(?: [A-Z][\w/-]*)?)"
    r"\s+(?:n[º°o.]+\s*)?(\d{1,3}(?:\.\d{3})*(?:/\d{2,4})?)"
)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_TOKEN = re.compile(r"\w+(?:[-'’/]\w+|\.(?:\d+|br)\b)*")  # "14.133/2021", "gov.br"; not "fim.Sua"
_NOT_NAMES = frozenset(
    _words(
        "Governo Federal Nacional República Brasil Estado União Estados Ministério Secretaria "
        "Segundo Conforme Janeiro Fevereiro Março Abril Maio Junho Julho Agosto Setembro Outubro "
        "Novembro Dezembro Segunda Terça Quarta Quinta Sexta Sábado Domingo"
    )
)


@dataclass(frozen=True)
class Entry:
    type: str
    canonical: str
    entity_id: str | None  # dgb_<agency key>, a QID, or None (minted by the registry)


@dataclass
class _Found:
    entry: Entry
    surfaces: list[str] = field(default_factory=list)
    count: int = 0
    first: int = 0
    in_title: bool = False


def _key(text: str) -> str:
    return " ".join(t.strip(".") for t in _TOKEN.findall(text))


def _agency_names(name: str) -> list[str]:
    names = [name]
    if " - " in name:
        names.append(name.split(" - ")[0].strip())
    m = re.search(r"\(([^)]+)\)\s*$", name)
    if m:
        names += [name[: m.start()].strip(), m.group(1).strip()]
    return names


@lru_cache(maxsize=1)
def catalogue() -> dict[str, Entry]:
    """Surface key -> entry: the agency catalogue first, then the gazetteer (which does not
    override an agency's surface)."""
    from dgb.agencies import load_agencies

    out: dict[str, Entry] = {}
    for key, agency in sorted(load_agencies().items()):
        entry = Entry("ORG", agency.name, agency_id(key))
        for name in _agency_names(agency.name):
            out.setdefault(_key(name), entry)
        if key.isalpha() and 2 <= len(key) <= 8 and key not in WORD_KEYS:
            out.setdefault(key.upper(), entry)
            if len(key) >= 4:  # "Ibama", "Funarte": long acronyms are written as names
                out.setdefault(key.capitalize(), entry)
    for line in GAZETTEER_PATH.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        etype, names = parts[0], parts[1].split("|")
        qid = next((p.strip() for p in parts[2:] if p.strip()), None)
        entry = Entry(etype, names[0], qid)
        for name in names:
            out.setdefault(_key(name), entry)
    return out


def clean(text: str) -> str:
    """Markdown images dropped, links reduced to their text, emphasis marks removed."""
    text = _IMAGE.sub(" ", text or "")
    return _LINK.sub(r"\1", text).replace("**", "").replace("__", "")


def _headed(tokens: list[re.Match], text: str) -> list[tuple[str, str, str | None]]:
    """(type, name, acronym defined after it) for each name that starts with a head."""
    out = []
    i = 0
    while i < len(tokens):
        head = tokens[i].group()
        etype = _HEAD_TYPE.get(head)
        if etype is None:
            i += 1
            continue
        j, last = i + 1, i
        while j < len(tokens) and j - i < MAX_NGRAM:  # a longer run of words is no name
            gap = text[tokens[j - 1].end() : tokens[j].start()]
            if gap.strip():
                break  # punctuation ends a name ("Política de Cuidados, Laís Abramo")
            word, before = tokens[j].group(), tokens[j - 1].group()
            if word in _HEAD_TYPE and (before in _CONNECTORS or (j > i + 1 and before[:1].isupper())):
                break  # "... e a Secretaria Nacional", "Saúde Ministério": another name starts
            if before == "e" and (word in _ARTICLES or (word.isupper() and len(word) > 1)):
                break  # "Polícia Civil e a Força", "Ministério Público e PF": two names
            if (word[:1].isupper() and not word.isupper()) or (
                word.isupper() and len(word) > 1 and word.isalpha()
            ):
                last = j
            elif word not in _CONNECTORS:
                break
            j += 1
        if last > i:
            name = text[tokens[i].start() : tokens[last].end()]
            rest = text[tokens[last].end() : tokens[last].end() + 16]
            m = re.match(r"\s*\(([A-Z][A-Za-z0-9]{1,11})\)", rest)
            acronym = m.group(1) if m and m.group(1) not in _UFS else None  # "(PR)" is a state
            out.append((etype, " ".join(name.split()), acronym))
            i = last + 1
        else:
            i += 1
    return out


def _local_entries(text: str, tokens: list[re.Match], known: dict[str, Entry]) -> dict[str, Entry]:
    local: dict[str, Entry] = {}
    for etype, name, acronym in _headed(tokens, text):
        key = _key(name)
        words = key.split()
        if all(w in _HEAD_TYPE or w in _CONNECTORS for w in words[1:]) or key.startswith(_PLACES):
            continue  # "Projeto de Lei": heads only, no name; a historic centre is a place
        cut = next((k for k in range(len(words) - 1, 1, -1) if " ".join(words[:k]) in known), None)
        if cut is not None and words[cut] in ("e", "com"):
            continue  # "Ministério da Saúde e Fiocruz": the known name, then another one
        entry = known.get(key) or local.get(key) or Entry(etype, name, None)
        local.setdefault(key, entry)
        if acronym and acronym not in known:
            local.setdefault(acronym, entry)
    for m in _NORM.finditer(text):
        name = f"{m.group(1)} nº {m.group(2)}"
        local.setdefault(_key(m.group(0)), Entry("LAW", name, None))
    for pattern in (_PER_AFTER_ROLE, _PER_BEFORE_ROLE):
        for m in pattern.finditer(text):
            name = " ".join(m.group(1).split())
            words = name.split()
            if words[0] in _NOT_NAMES or words[-1] in _NOT_NAMES or _key(name) in known:
                continue
            if any(w in _HEAD_TYPE for w in words):
                continue
            local.setdefault(_key(name), Entry("PER", name, None))
    return local


def extract(title: str, content: str) -> list[dict]:
    """The entity mentions of an article (production's shape, without ``canonical_id`` unless
    the catalogue or gazetteer gives one), in order of first occurrence."""
    text = f"{clean(title)}\n\n{clean(content)}"
    title_end = len(clean(title))
    tokens = list(_TOKEN.finditer(text))
    known = catalogue()
    local = _local_entries(text, tokens, known)
    found: dict[Entry, _Found] = {}
    i = 0
    while i < len(tokens):
        word = tokens[i].group()
        if not (word[:1].isupper() or word.startswith("gov")):
            i += 1
            continue
        hit = None
        words: list[str] = []
        for j in range(i, min(len(tokens), i + MAX_NGRAM)):
            if j > i and "\n" in text[tokens[j - 1].end() : tokens[j].start()]:
                break
            words.append(tokens[j].group().strip("."))
            key = " ".join(words)
            entry = local.get(key) or known.get(key)
            if entry is not None:
                hit = (j, entry)
        if hit is None:
            i += 1
            continue
        j, entry = hit
        start, end = tokens[i].start(), tokens[j].end()
        f = found.get(entry)
        if f is None:
            f = found[entry] = _Found(entry, first=start)
        f.count += 1
        f.in_title = f.in_title or start < title_end
        surface = text[start:end]
        if surface not in f.surfaces:
            f.surfaces.append(surface)
        i = j + 1
    length = max(1, len(text))
    out = []
    for f in sorted(found.values(), key=lambda f: f.first):
        salience = 0.4 * f.in_title + 0.3 * (1 - f.first / length) + 0.3 * min(1.0, f.count / 5)
        mention = {
            "text": " ".join(f.surfaces[0].split()),
            "type": f.entry.type,
            "count": f.count,
            "forma_canonica": f.entry.canonical,
            "salience": round(min(1.0, salience), 3),
        }
        if f.entry.entity_id:
            mention["canonical_id"] = f.entry.entity_id
        out.append(mention)
    return out
