"""Offline entity extraction: the agency catalogue, shipped gazetteers and a few rules. No model.

What it finds, in the title and the content (markdown images and link targets removed):

* **catalogue and gazetteer names** (case-sensitive, whole words, punctuation between words
  ignored): every agency of ``data/agencies.yaml`` by its name, its name before " - ", and its key
  as an upper-case acronym (``MEC``, ``INSS``; keys that are ordinary words are left out), as ORG
  with the id ``dgb_<agency key>`` (a surface that names a building, "Palácio do Planalto", is left
  to the gazetteer's place); and the names of ``data/features/gazetteer_pt.tsv`` (states, cities,
  regions, biomes, rivers, countries, federal and international bodies, press, programmes, laws,
  events), with a Wikidata QID where the file gives one, else the id minted from the entry's name
  (so "DF" and "Distrito Federal" are one id);
* **headed names**: a capitalised name that starts with an institutional head (Ministério,
  Instituto, Universidade ... -> ORG; Programa, Plano, Política ... -> POLICY; Lei, Estatuto,
  Código -> LAW; Conferência, Prêmio, Festival ... -> EVENT; Campus, Palácio, Praça, Rodovia,
  Estádio ... -> LOC), with its acronym when it is defined in parentheses right after it (later
  uses of the acronym count for the same entity); an ORG name may go on as a comma list ending in
  "e" when an acronym follows ("Secretaria Nacional de Registro, Monitoramento e Pesquisa
  (SERMOP)"); state bodies by abbreviation (PCSP, TJRJ, TRE-MG) -> ORG;
* **numbered norms** (Lei nº 14.133/2021, Decreto nº 11.000, Medida Provisória nº 1.286, Portaria
  ... nº 12) -> LAW;
* **people** next to a role: "o ministro Camilo Santana", "a ministra da Saúde, Nísia Trindade",
  "Ana Souza, secretária de ..." -> PER (two to five capitalised words); and the people and places
  of :mod:`dgb.features.rules_names` (given names and surnames, photo credits, "Antonina (PR)",
  "município de X", "em X", "Zurique (Suíça)");
* nothing inside a short capitalised title in quotes (“Governo do Brasil na Rua”: a programme).

``text`` is the entity's first surface, ``forma_canonica`` its fullest surface in the article
(production's definition). ``count`` is the number of occurrences of any of the entity's surfaces;
``salience`` is 0.4 when the entity is in the title, plus up to 0.3 the earlier its first
occurrence, plus up to 0.3 with its count (5 or more: all of it). Measured on labelled real news
by ``scripts/eval_entities.py`` (evaluation/entities).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from dgb.features import rules_names
from dgb.features.entities import WORD_KEYS, agency_id, mint_id

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
        "Sindicato Cooperativa Pontifícia Pró-Reitoria Reitoria Divisão Núcleo Grupo Coordenadoria "
        "Gerência Ouvidoria Corregedoria Assessoria Subsecretaria Diretório Comitê Consórcio Partido"
    ),
    "POLICY": _words("Programa Plano Política Estratégia Pacto Campanha"),
    "LAW": ["Lei", "Estatuto", "Código"],  # numbered norms: _NORM
    "EVENT": _words(
        "Conferência Prêmio Festival Semana Encontro Congresso Seminário Simpósio Feira Olimpíada "
        "Jornada Mostra Cúpula Jogos Copa Campeonato Marcha Bienal"
    ),
    # named places: buildings, campuses, parks, roads, ports, indigenous lands
    "LOC": _words(
        "Campus Auditório Palácio Esplanada Edifício Arena Estádio Ginásio Aldeia Quilombo Praça Avenida "
        "Rua Rodovia Aeroporto Cais Armazém Docas Refinaria Usina Ilha Serra Lagoa Baía Praia Parque "
        "Reserva Bairro Assentamento Estação Teatro Terra Porto Ponte Complexo Vila Estrada Contorno "
        "Anel Viaduto Túnel Marina"
    ),
}
_HEAD_TYPE = {h: t for t, heads in _HEADS.items() for h in heads}
# heads that name an organisation only with "de" after them ("Divisão de Nutrição", "Grupo de
# Pesquisa"), not "General de Divisão Alexandre ..."
_HEADS_OF = frozenset(_words("Divisão Grupo Núcleo Rede Frente Comando Casa Centro Serviço"))
_ARTICLES = frozenset(_words("a o as os"))
# heads that also start place names: "Centro Histórico de ...", "Casa Forte" (a neighbourhood)
_PLACES = ("Centro Histórico", "Casa Forte", "Casa em ")
_UFS = frozenset(_words("AC AL AP AM BA CE DF ES GO MA MT MS MG PA PB PR PE PI RJ RN RS RO RR SC SP SE TO"))
_HEAD_TYPE["Fórum"] = "EVENT"
_CONNECTORS = frozenset(_words("de da do das dos e para em à às ao aos a o no na nos nas sobre com junto"))
# heads that continue an ORG name after "de": "Conselho Nacional de Política Energética"
_IN_ORG = frozenset(_words("Política Políticas Estratégia Planejamento Plano"))
_ROLES = _words(
    "ministro ministra presidente presidenta vice-presidente secretário secretária "
    "secretário-executivo secretária-executiva diretor diretora diretor-presidente "
    "diretora-presidente governador governadora prefeito prefeita deputado deputada senador "
    "senadora superintendente coordenador coordenadora reitor reitora embaixador embaixadora "
    "chefe ministro-chefe ministra-chefe procurador procuradora procurador-geral defensor "
    "defensora juiz juíza desembargador desembargadora delegado delegada comandante general "
    "almirante brigadeiro pesquisador pesquisadora professor professora gerente assessor "
    "assessora auditor auditora presidente-executivo ouvidor ouvidora vereador vereadora papa "
    "rei rainha repórter jornalista fotógrafo fotógrafa atleta jogador jogadora técnico técnica "
    "treinador treinadora cacique líder liderança artista cantor cantora escritor escritora autor autora "
    "estudante aluno aluna servidor servidora agricultor agricultora produtor produtora médico médica "
    "enfermeiro enfermeira engenheiro engenheira analista especialista consultor consultora "
    "economista advogado advogada operador operadora empresário empresária vice-governador "
    "vice-governadora vice-prefeito vice-prefeita subsecretário subsecretária porta-voz pastor padre "
    "bispo cardeal aiatolá premiê primeiro-ministro primeira-ministra chanceler morador moradora "
    "beneficiário beneficiária paciente voluntário voluntária ator atriz diretor-geral diretora-geral "
    "coordenador-geral coordenadora-geral secretário-adjunto secretária-adjunta secretário-geral "
    "secretária-geral gestor gestora capitão coronel tenente sargento major soldado perito perita "
    "agente auditor-fiscal fiscal vice-reitor vice-reitora pró-reitor pró-reitora fundador fundadora "
    "curador curadora historiador historiadora antropólogo antropóloga cientista doutor doutora "
    "deputado-federal chefe-geral cineasta músico música poeta poetisa empreendedor empreendedora "
    "líder-supremo presidente-eleito candidato candidata tenista nadador nadadora velocista "
    "maratonista ginasta judoca lutador lutadora boxeador medalhista campeão campeã"
)
_UP = "A-ZÁÉÍÓÚÂÊÔÃÕÇÀ"
_LOW = "a-záéíóúâêôãõçàü"
_NAME_WORD = rf"[{_UP}][{_LOW}]+(?:-[{_UP}]?[{_LOW}]+)?"
_NAME = rf"{_NAME_WORD}(?:\s+(?:(?:de|da|do|dos|das)\s+)?{_NAME_WORD}){{1,4}}"


def word_trie(words: list[str]) -> str:
    """A regular expression of ``words`` as a trie (auditor, auditora, auditor-fiscal:
    ``auditor(?:(?:\\-fiscal|a))?``): the same strings as the alternation of the words longest
    first, tried in the same order (the words that match at one place are prefixes of each other,
    and a greedy optional tail tries the longer first), but a character is compared once per
    level instead of once per word (about 4x faster over news than the 250-word alternation it
    replaced)."""
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}  # a word ends here

    def emit(node: dict) -> str:
        alts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(trie)


_ROLE = word_trie(_ROLES)
_PER_AFTER_ROLE = re.compile(rf"\b(?:{_ROLE})\s+(?:(?:d[aoe]s?|em)\s+[^,.;:()\n]{{1,70}}?,\s+)?({_NAME})")
_PER_BEFORE_ROLE = re.compile(rf"({_NAME}),\s+(?:(?:o|a)\s+)?(?:{_ROLE})\b")
_NORM = re.compile(
    r"\b(Lei Complementar|Lei|Decreto-Lei|Decreto|Medida Provisória|Emenda Constitucional|"
    r"Portaria(?: [A-Z][\w/-]*)?|Instrução Normativa(?: [A-Z][\w/-]*)?)"
    r"\s+(?:n[º°o.]+\s*)?(\d{1,3}(?:\.\d{3})*(?:/\d{2,4})?)"
)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
# "14.133/2021", "gov.br", "e/ou"; not "fim.Sua", not "Silva/MEC" (a credit: two names)
_TOKEN = re.compile(r"\w+(?:[-'’]\w+|/(?=[\d\w])(?![A-ZÁÉÍÓÚÂÊÔÃÕÇ])\w+|\.(?:\d+|br)\b)*")
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
    gazetteer: bool = False  # a catalogue or gazetteer entry (not a name found in this article)


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
            if _HEAD_TYPE.get(name.split()[0]) != "LOC":  # "Palácio do Planalto" is a building
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
        entry = Entry(etype, names[0], qid, gazetteer=True)
        for name in names:
            out.setdefault(_key(name), entry)
    return out


def _reach(keys) -> dict[str, int]:
    """First word -> the most words of a key of ``keys`` that starts with it."""
    out: dict[str, int] = {}
    for key in keys:
        words = key.split(" ")
        if len(words) > out.get(words[0], 0):
            out[words[0]] = len(words)
    return out


@lru_cache(maxsize=1)
def _catalogue_reach() -> dict[str, int]:
    return _reach(catalogue())


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
            inside = (etype == "ORG" and word in _IN_ORG) or (etype == "LOC" == _HEAD_TYPE.get(word))
            if (
                word in _HEAD_TYPE
                and not inside
                and (before in _CONNECTORS or (j > i + 1 and before[:1].isupper()))
            ):
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
        if last > i and head in _HEADS_OF and tokens[i + 1].group() not in _CONNECTORS:
            last = i  # "Divisão Alexandre": no name
        if last > i and etype == "ORG":
            last = _listed(tokens, text, last)
        if last > i:
            name = text[tokens[i].start() : tokens[last].end()]
            rest = text[tokens[last].end() : tokens[last].end() + 20]
            m = re.match(r"\s*\(([A-Z][A-Za-z0-9-]{1,11}(?:/[A-Z][A-Za-z]{1,11})?)\)", rest)
            acronym = m.group(1) if m and m.group(1) not in _UFS else None  # "(PR)" is a state
            out.append((etype, " ".join(name.split()), acronym))
            i = last + 1
        else:
            i += 1
    return out


_LIST_WORD = r"(?:[A-ZÁÉÍÓÚÂÊÔÃÕÇ][\w-]*|d[aoe]s?|à|às|ao|aos|a|e)"
_LIST_TAIL = re.compile(rf",[ \t]+({_LIST_WORD}(?:[ \t]+{_LIST_WORD}){{0,9}})")


def _listed(tokens: list[re.Match], text: str, last: int) -> int:
    """A name that goes on after a comma as a list ending in "e": "Secretaria Nacional de Registro,
    Monitoramento e Pesquisa (SERMOP)", "Instituto Federal de Educação, Ciência e Tecnologia de
    Rondônia": extended when an acronym in parentheses follows the list, or the list is "Ciência e
    Tecnologia" (every federal institute's name). Returns the new last token."""
    m = _LIST_TAIL.match(text, tokens[last].end())
    if not m:
        return last
    words = list(re.finditer(r"\S+", m.group(1)))
    while words and not words[-1].group()[:1].isupper():
        words.pop()
    listed = [w.group() for w in words]
    if "e" not in listed or not listed[listed.index("e") + 1 :]:
        return last
    end = m.start(1) + words[-1].end()
    acronym = re.match(r"\s*\([A-Z][A-Za-z0-9-]{1,11}\)", text[end:])
    if not acronym and listed[:3] != ["Ciência", "e", "Tecnologia"]:
        return last
    return next((k for k in range(last + 1, len(tokens)) if tokens[k].end() == end), last)


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
    names = [m.group(1) for p in (_PER_AFTER_ROLE, _PER_BEFORE_ROLE) for m in p.finditer(text)]
    names += rules_names.people(text, tokens, _HEAD_TYPE)
    credited, agencies = rules_names.credits(text)
    for name in names + credited:
        name = " ".join(name.split())
        words = name.split()
        if words[0] in _NOT_NAMES or words[-1] in _NOT_NAMES or _key(name) in known:
            continue
        if any(w in _HEAD_TYPE for w in words):
            continue
        local.setdefault(_key(name), Entry("PER", name, None))
    for org in agencies:
        local.setdefault(_key(org), known.get(_key(org)) or Entry("ORG", org, None))
    for m in _STATE_BODY.finditer(text):
        local.setdefault(_key(m.group(0)), Entry("ORG", m.group(0), None))
    # "Zurique (Suíça)", "Los Angeles (Estados Unidos)": a name before a known place in parentheses
    for m in re.finditer(rf"({rules_names.PLACE_NAME})\s*\(([^()\n]{{2,40}})\)", text):
        inner = known.get(_key(m.group(2)))
        name = m.group(1).split()
        while name and (name[0] in _NOT_NAMES or name[0] in rules_names.NOT_NAME_WORDS):
            name = name[1:]
        key = _key(" ".join(name))
        if (
            inner is not None
            and inner.type == "LOC"
            and name
            and key not in known
            and name[0] not in _HEAD_TYPE
        ):
            local.setdefault(key, Entry("LOC", " ".join(name), None))
    for place, uf in rules_names.places(text, _HEAD_TYPE):
        if place and _key(place) not in local:
            local[_key(place)] = known.get(_key(place)) or Entry("LOC", place, None)
        if uf:
            state = rules_names.UF_STATES[uf]
            local.setdefault(uf, Entry("LOC", uf, mint_id(state, "LOC")))
    return local


# a short capitalised title in quotes ("Governo do Brasil na Rua", a programme or campaign): no
# ORG, PER or LOC inside it
_QUOTED_TITLE = re.compile(r"[“\"]([A-ZÁÉÍÓÚÂÊÔÃÕÇ][^”\"\n.!?:;]{2,80})[”\"]")
# state bodies by abbreviation: PCSP (Polícia Civil de SP), PMDF, TJRJ, TRE-MG, MPPA, Detran-RJ
_STATE_BODY = re.compile(
    rf"\b(?:PC|PM|CBM|TJ|TRE|TRT|MP|DPE|SSP|SES|Detran|DETRAN|Seduc|SEDUC)-?(?:{'|'.join(sorted(_UFS))})\b"
)


def _titles(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _QUOTED_TITLE.finditer(text):
        if len(m.group(1).split()) <= 8:
            spans.append((m.start(1), m.end(1)))
    return spans


def extract(title: str, content: str) -> list[dict]:
    """The entity mentions of an article (production's shape, without ``canonical_id`` unless
    the catalogue or gazetteer gives one), in order of first occurrence."""
    title = clean(title)
    text = f"{title}\n\n{clean(content)}"
    title_end = len(title)
    tokens = list(_TOKEN.finditer(text))
    known = catalogue()
    local = _local_entries(text, tokens, known)
    titles = _titles(text)
    reach_known, reach_local = _catalogue_reach(), _reach(local)
    found: dict[Entry, _Found] = {}
    i = 0
    while i < len(tokens):
        word = tokens[i].group()
        if not (word[:1].isupper() or word.startswith("gov")):
            i += 1
            continue
        span = next((s for s in titles if s[0] <= tokens[i].start() < s[1]), None) if titles else None
        if span is not None:
            hit = known.get(_key(text[span[0] : span[1]])) or local.get(_key(text[span[0] : span[1]]))
            if hit is None or hit.type not in ("ORG", "PER", "LOC"):
                while i < len(tokens) and tokens[i].start() < span[1]:
                    i += 1  # a quoted title: nothing inside it
                continue
        hit = None
        words: list[str] = []
        # a key of n words matches only n words that start with its first: scan no further
        first = word.strip(".")
        longest = max(reach_known.get(first, 0), reach_local.get(first, 0))
        for j in range(i, min(len(tokens), i + min(MAX_NGRAM, longest))):
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
        surfaces = [" ".join(s.split()) for s in f.surfaces]
        mention = {
            "text": surfaces[0],
            "type": f.entry.type,
            "count": f.count,
            "forma_canonica": max(surfaces, key=len),  # the fullest name in the article
            "salience": round(min(1.0, salience), 3),
        }
        if f.entry.entity_id:
            mention["canonical_id"] = f.entry.entity_id
        elif f.entry.gazetteer:  # one id for every surface of the entry ("DF", "Distrito Federal")
            mention["canonical_id"] = mint_id(f.entry.canonical, f.entry.type)
        out.append(mention)
    return out
