"""People and places for the offline extractor (:mod:`dgb.features.rules_ner`): rules of Portuguese
and gov.br writing, no model.

* **people**: a capitalised sequence of two to six name words (``de``, ``da``, ``do``, ``dos``,
  ``das`` between them, initials such as "P.") that starts with a common Brazilian given name
  ("Carolina Rodrigues", "CAIO BONFIM") or whose second word is a common surname ("Tácio Melo"),
  from ``data/features/names_pt.txt``; not when it continues a place or institution ("Rua José
  Bonifácio", "São José dos Campos", "Escola Maria Silva"); and the names in photo credits and
  bylines ("Foto: Fulano de Tal/MEC", "Crédito: NCS/CBPF"), whose agency after "/" is an ORG;
* **places**: a capitalised name before a state abbreviation ("Antonina (PR)", "Recife/PE",
  "Olinda-PE": the name and the state, both LOC), after "município de", "cidade de", "distrito
  de" ...; state highways ("BR-116"); "DF" on its own.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

NAMES_PATH = Path(__file__).resolve().parent.parent / "data" / "features" / "names_pt.txt"


def _words(text: str) -> list[str]:
    return text.split()


_UF_ORDER = _words("AC AL AP AM BA CE DF ES GO MA MT MS MG PA PB PR PE PI RJ RN RS RO RR SC SP SE TO")
UFS = frozenset(_UF_ORDER)
_STATES = (
    "Acre|Alagoas|Amapá|Amazonas|Bahia|Ceará|Distrito Federal|Espírito Santo|Goiás|Maranhão|"
    "Mato Grosso|Mato Grosso do Sul|Minas Gerais|Pará|Paraíba|Paraná|Pernambuco|Piauí|"
    "Rio de Janeiro|Rio Grande do Norte|Rio Grande do Sul|Rondônia|Roraima|Santa Catarina|"
    "São Paulo|Sergipe|Tocantins"
)
UF_STATES = dict(
    zip(
        _UF_ORDER,
        _STATES.split("|"),
    )
)
_NAME_LINKS = frozenset(_words("de da do dos das"))
# words that start or continue a place or an institution's name: a given name after one of them
# is part of that name ("São José", "Rua Maria Quitéria", "Escola Estadual João XXIII")
_PLACE_WORDS = frozenset(
    _words(
        "São Santa Santo Dom Dona Nossa Senhora Rua Avenida Av Praça Rodovia Vila Porto Rio Nova Novo "
        "Monte Serra Lagoa Ilha Campo Campos Vale Alto Baixo Bom Boa Grande Jardim Parque Fazenda Sítio "
        "Bairro Aldeia Distrito Estação Ponte Edifício Teatro Cine Auditório Sala Arena Estádio Ginásio "
        "Aeroporto Terminal Escola Colégio Creche Hospital Unidade Policlínica Maternidade Faculdade "
        "Universidade Instituto Fundação Centro Casa Museu Biblioteca Memorial Espaço Complexo Palácio "
        "Solar Residencial Conjunto Condomínio Loteamento Assentamento Quilombo Comunidade Estadual "
        "Municipal Federal Professor Professora Prof Profa Doutor Doutora Dr Dra Padre Frei Irmã "
        "Presidente Governador Marechal General Almirante Coronel Tenente Capitão Sargento Cabo Beato "
        "Lei Prêmio Programa Projeto Operação Medalha Ordem Troféu Bolsa Cátedra Sala Navio"
    )
)
# capitalised words that are no name words (sentence starts, months, days, institutions)
NOT_NAME_WORDS = frozenset(
    _words(
        "Governo Federal Nacional República Brasil Estado União Estados Ministério Secretaria Segundo "
        "Conforme Janeiro Fevereiro Março Abril Maio Junho Julho Agosto Setembro Outubro Novembro "
        "Dezembro Segunda Terça Quarta Quinta Sexta Sábado Domingo Em Para Com Por Sobre Entre Após "
        "Até Desde Como Quando Onde Mas Se Já Também Ainda Além Hoje Ontem Neste Nesta Nesse Nessa "
        "Este Esta Esse Essa Os As Um Uma No Na Nos Nas Do Da Dos Das De Ao Aos À Às Pelo Pela Pelos "
        "Pelas Cada Todo Toda Todos Todas Outro Outra Mais Menos Muito Sem Sob Contra Durante Mesmo "
        "Assim Porém Contudo Entretanto Portanto Logo Então Agora Depois Antes Cerca Apenas Foi Será "
        "Há Tem Seu Sua Seus Suas Nosso Nossa Ele Ela Eles Elas Isso Isto Qual Quais Que Quem Dia Ano "
        "Foto Fotos Crédito Imagem Texto Veja Saiba Leia Confira Acesse Participe Compartilhar O A E"
    )
)
# words before "em" + a subject ("mestrado em Saúde Coletiva", "atua em Educação")
_SUBJECT_BEFORE = frozenset(
    _words(
        "especialização especializações graduação graduado graduada pós-graduação mestrado mestre "
        "doutorado doutor doutora formado formada formação curso cursos residência bacharel "
        "bacharelado licenciatura licenciado licenciada técnico técnica tecnólogo pesquisa pesquisas "
        "pesquisador pesquisadora especialista especialistas atua atuam atuação trabalha trabalham "
        "experiência capacitação qualificação habilitação certificação ênfase concentração "
        "investimento investimentos avanço avanços inovação referência política políticas programa"
    )
)
# credit words that name no one ("Foto: Divulgação/MEC", "Arquivo Pessoal")
_CREDIT_STOP = frozenset(
    _words(
        "Divulgação Arquivo Pessoal Reprodução Acervo Assessoria Imprensa Comunicação Ilustração "
        "Freepik Shutterstock Pexels Unsplash Canva Internet Redes Sociais Banco Imagens Gov.br "
        "Governo Federal Agência"
    )
)
_UP = "A-ZÁÉÍÓÚÂÊÔÃÕÇÀ"
_LOW = "a-záéíóúâêôãõçàüñ"
_WORD = rf"[{_UP}][{_LOW}]+(?:-[{_UP}]?[{_LOW}]+)*"
PLACE_NAME = rf"{_WORD}(?:\s+(?:d[aoe]s?\s+)?{_WORD}){{0,4}}"
_UF = "|".join(sorted(UFS))
_BEFORE_UF = re.compile(rf"({PLACE_NAME})\s*(?:\(\s*({_UF})\s*\)|[/–-]\s?({_UF})\b)")
_UF_MARK = re.compile(rf"\(\s*(?:{_UF})\s*\)|[/–-]\s?(?:{_UF})\b")  # what every _BEFORE_UF match ends with
# "município de X", "municípios de X, Y e Z", "nos campi X e Y"
_AFTER_WORD = re.compile(
    rf"\b(?:(?:município|municípios|cidade|cidades|distrito|localidade|localidades|região|comunidade|"
    rf"comunidades|aldeia|aldeias|ilha|bairro|bairros|povoado|vilarejo)\s+(?:de|do|da|dos|das)|"
    rf"campus|campi|capital)\s+({PLACE_NAME}(?:\s*,\s*{PLACE_NAME})*(?:\s+e\s+{PLACE_NAME})?)"
)
# "em Bangalore e ...", "em Zurique (Suíça)": a capitalised name after "em", then punctuation or a
# lower-case word, at most three words
_AFTER_EM = re.compile(rf"(?<=\w )em\s+({_WORD}(?:\s+(?:d[aoe]s?\s+)?{_WORD}){{0,2}})(?=[\s,.;:)(]|$)")
_HIGHWAY = re.compile(rf"\b(?:BR|{_UF})-\d{{3}}\b")
_CREDIT = re.compile(
    r"(?:^|[\s(\[|])(?:Fotos?|Imagens?|Créditos?|Texto|Textos|Reportagem|Edição|Arte|Vídeo|Por)\s*:\s*"
    r"([^\n|()\[\]]{2,120})"
)


@lru_cache(maxsize=1)
def _name_lists() -> tuple[frozenset[str], frozenset[str]]:
    given, surnames, part = set(), set(), None
    for line in NAMES_PATH.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("["):
            part = line.strip("[] ")
            continue
        (given if part == "given" else surnames).update(line.split())
    return frozenset(given), frozenset(surnames)


def _title(word: str) -> str:
    return word.capitalize() if word.isupper() and len(word) > 1 else word


def _namey(word: str) -> bool:
    """A name word: Capitalised ("Silva", "Ji-Paraná") or in capitals ("BONFIM")."""
    if word in NOT_NAME_WORDS or _title(word) in NOT_NAME_WORDS or not word[:1].isupper():
        return False
    return word.isalpha() or "-" in word


def _initial(tokens: list[re.Match], text: str, j: int) -> bool:
    w = tokens[j].group()
    return len(w) == 1 and w.isupper() and text[tokens[j].end() : tokens[j].end() + 1] == "."


def _gap_ok(tokens: list[re.Match], text: str, j: int) -> bool:
    """Only spaces between token j-1 and j (or the period of an initial)."""
    gap = text[tokens[j - 1].end() : tokens[j].start()]
    if gap.strip() == "." and _initial(tokens, text, j - 1):
        gap = gap.replace(".", " ")
    return bool(gap) and not gap.strip() and "\n" not in gap


def _extend(tokens: list[re.Match], text: str, i: int, heads) -> int:
    """The index of the last word of the name that starts at token i (i if none follows)."""
    last, j = i, i + 1
    while j < len(tokens) and j - i < 8 and _gap_ok(tokens, text, j):
        w = tokens[j].group()
        if w in _NAME_LINKS and j + 1 < len(tokens) and _gap_ok(tokens, text, j + 1):
            nxt = tokens[j + 1].group()
            if _namey(nxt) and nxt not in heads:
                j += 1
                continue
            break
        if _initial(tokens, text, j) or (_namey(w) and w not in heads):
            if tokens[i].group().isupper() != w.isupper() and not _initial(tokens, text, j):
                break  # "CAIO BONFIM Campeão": capitals end where the case changes
            last = j
            j += 1
            continue
        break
    while last > i and _initial(tokens, text, last):
        last -= 1
    return last


def people(text: str, tokens: list[re.Match], heads) -> list[str]:
    """The names of people in ``text`` (module docstring); ``heads``: institutional head words."""
    given, surnames = _name_lists()
    out = []
    i = 0
    while i < len(tokens):
        w = tokens[i].group()
        if not w[:1].isupper() and not w.isupper() and w not in given:
            i += 1  # not capitalised, not in capitals, no given name: no name starts here
            continue
        first = _title(w)
        starts = first in given or (
            _namey(w)
            and first not in heads
            and i + 1 < len(tokens)
            and _title(tokens[i + 1].group()) in surnames
            and _gap_ok(tokens, text, i + 1)
        )
        if not starts or first in _PLACE_WORDS:
            i += 1
            continue
        if i > 0 and _gap_ok(tokens, text, i):
            before = tokens[i - 1].group()
            if before in _NAME_LINKS and i > 1 and _gap_ok(tokens, text, i - 1):
                before = tokens[i - 2].group()
            if before in _PLACE_WORDS or before in heads:
                i += 1  # "Rua José ...", "Instituto Maria ...", "Casa de Maria ..."
                continue
        last = _extend(tokens, text, i, heads)
        if last > i:
            out.append(" ".join(text[tokens[i].start() : tokens[last].end()].split()))
            i = last + 1
        else:
            i += 1
    return out


def credits(text: str) -> tuple[list[str], list[str]]:
    """(people, organisations) of photo credits and bylines: "Foto: Ana Souza/MEC"."""
    names, orgs = [], []
    for m in _CREDIT.finditer(text):
        body = re.split(r"\s[-–]\s|[.;]\s|\s{2,}", m.group(1).strip())[0]
        for part in re.split(r"\s*,\s*|\s+e\s+", body):
            bits = [b.strip(" .") for b in part.split("/")]
            who, agencies = bits[0], bits[1:]
            words = who.split()
            if who.isupper() and 2 <= len(who) <= 10 and who.isalpha():
                agencies.insert(0, who)  # "Crédito: NCS/CBPF": an agency
            elif 2 <= len(words) <= 6 and all(
                w in _NAME_LINKS or (w[:1].isupper() and w not in _CREDIT_STOP and w not in NOT_NAME_WORDS)
                for w in words
            ):
                names.append(who)
            for a in agencies:
                if a and a[:1].isupper() and len(a.split()) <= 5 and not set(a.split()) & _CREDIT_STOP:
                    orgs.append(a)
    return names, orgs


def places(text: str, heads) -> list[tuple[str | None, str | None]]:
    """(place name or None, state abbreviation or None) pairs: "Antonina (PR)" -> ("Antonina",
    "PR"); "município de Betim" -> ("Betim", None); a name that starts with an institutional head
    ("Prefeitura de Antonina (PR)") is left to the headed names (its state still counts)."""
    out: list[tuple[str | None, str | None]] = []
    for m in _BEFORE_UF.finditer(text) if _UF_MARK.search(text) else ():  # most texts name no state
        words = m.group(1).split()
        while words and (words[0] in NOT_NAME_WORDS or words[0] in _NAME_LINKS):
            words = words[1:]  # "Em Antonina": the sentence's first word
        name = " ".join(words)
        start_head = bool(words) and any(w in heads for w in words)
        out.append((None if start_head or not name else name, m.group(2) or m.group(3)))
    for m in _AFTER_WORD.finditer(text):
        for item in re.split(r"\s*,\s*|\s+e\s+", m.group(1)):
            words = item.split()
            if words and not any(w in heads for w in words):
                out.append((" ".join(words), None))
    for m in _AFTER_EM.finditer(text):
        words = m.group(1).split()
        nxt = text[m.end(1) : m.end(1) + 2].strip()
        before = text[max(0, m.start() - 40) : m.start()].split()[-3:]
        if nxt[:1].isupper() or any(w in heads or w in NOT_NAME_WORDS for w in words):
            continue
        if any(w.lower().strip(",") in _SUBJECT_BEFORE for w in before):
            continue  # "graduação em Agronomia": a subject, not a place
        out.append((" ".join(words), None))
    for m in _HIGHWAY.finditer(text):
        out.append((m.group(0), None))
    if re.search(r"\bDF\b", text):
        out.append((None, "DF"))
    return out
