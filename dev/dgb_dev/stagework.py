"""The stage tasks' per-article work in one process, without a server: what
``scripts/bench_stage_cpu.py`` times and ``tests/unit/pipeline/test_stage_outputs.py`` pins.

:func:`run` takes article rows through what the enrich, embed and index stages run for them in a
task, through the production code, with only the servers stood in for:

* **the model**: :class:`StandInEmbedder`, a deterministic bag of hashed words of the shipped
  classifier and sentiment heads' dimension (both given to the classifier, so they run), reached through
  the real :class:`~dgb.embed.client.ServiceEmbedder` over an in-process ``httpx`` transport that
  answers as the model service does (base64 vectors). Its own CPU is counted apart
  (:attr:`StandInEmbedder.cpu_s`): it is not the pipeline's;
* **PostgreSQL**: :class:`DumpingCursor` turns every statement's parameters into the bytes
  psycopg would send (its own adapters: JSON, ``real[]``), answers the themes and the entity
  registry's look-ups from what the run registered, and says every ``UPDATE`` hit its row;
* **Typesense**: the index stage's documents are built from the row the index stage's
  ``SELECT`` would return (:func:`index_row`) and written as the import body's lines.

The enrich and embed chunks go through :mod:`dgb.pipeline.chunks` (process, triage, one commit:
the row updates, features, registry, outbox events, cleared flags), as in a stage run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"


class StandInEmbedder:
    """A deterministic embedder: each text a bag of its words hashed into ``dim`` buckets (CRC-32,
    the same in every process), L2-normalised. ``cpu_s``: the CPU seconds it spent."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, int(dim)
        self.cpu_s = 0.0

    def encode(self, texts, batch_size: int = 32) -> np.ndarray:
        c = time.process_time()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, zlib.crc32(word.encode("utf-8", "surrogatepass")) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.where(norms == 0, 1.0, norms)
        self.cpu_s += time.process_time() - c
        return out


def service_embedder(model: StandInEmbedder):
    """A :class:`~dgb.embed.client.ServiceEmbedder` whose HTTP calls reach ``model`` in process,
    answered as ``POST /embed`` answers (base64 float32, ``model``, ``dim``, ``shape``)."""
    import httpx

    from dgb.embed.client import ServiceEmbedder

    def answer(request: httpx.Request) -> httpx.Response:
        c = time.process_time()
        texts = json.loads(request.content)["texts"]
        spent = time.process_time() - c
        vectors = model.encode(texts)
        c = time.process_time()
        body = {
            "model": model.name,
            "dim": model.dim,
            "vectors_b64": base64.b64encode(vectors.astype("<f4").tobytes()).decode("ascii"),
            "shape": list(vectors.shape),
        }
        response = httpx.Response(200, json=body)
        model.cpu_s += spent + time.process_time() - c  # the service's side: not the task's
        return response

    client = ServiceEmbedder("http://model.invalid")
    client._client = httpx.Client(base_url=client.base_url, transport=httpx.MockTransport(answer))
    client._name, client._dim = model.name, model.dim
    return client


class DumpingCursor:
    """A cursor that sends nothing: each statement's parameters are dumped as psycopg dumps them
    (the client's share of a write); the themes and the entity registry answer from memory."""

    def __init__(self, theme_ids: dict[str, int]) -> None:
        import psycopg
        from psycopg.adapt import AdaptersMap, PyFormat, Transformer

        from dgb.agencies import load_agencies

        self.adapters = AdaptersMap(psycopg.adapters)
        self.connection = None  # what psycopg's dumpers read of it: no server
        self._transformer = lambda: Transformer(self)
        self._auto = PyFormat.AUTO
        self.theme_ids = theme_ids
        self.agency_ids = {f"dgb_{key}": key for key in load_agencies()}
        self.aliases: dict[tuple[str, str], str] = {}
        self.statements = 0
        self.rowcount = 1
        self._rows: list = []

    def _dump(self, params) -> None:
        values = list(params.values()) if isinstance(params, dict) else list(params or ())
        self._transformer().dump_sequence(values, [self._auto] * len(values))

    def execute(self, sql: str, params=None) -> None:
        from dgb.features import registry

        self.statements += 1
        self._dump(params)
        self.rowcount, self._rows = 1, []
        if sql.startswith("SELECT code, id FROM themes"):
            self._rows = list(self.theme_ids.items())
        elif sql == registry._LOOKUP:
            keys = zip(params[0], params[1])
            self._rows = [(a, t, self.aliases[(a, t)]) for a, t in keys if (a, t) in self.aliases]
        elif sql == registry._PROPOSED:
            self._rows = [(i, self.agency_ids.get(i), None) for i in params[0]]

    def executemany(self, sql: str, seq) -> None:
        from dgb.features import registry

        for params in seq:
            self.statements += 1
            self._dump(params)
            if sql == registry._ALIAS:
                self.aliases.setdefault((params[0], params[1]), params[2])

    def fetchall(self) -> list:
        return self._rows

    def fetchone(self):
        return self._rows[0] if self._rows else None

    def __enter__(self) -> DumpingCursor:
        return self

    def __exit__(self, *exc) -> None:
        return None


class DumpingConnection:
    """What :func:`dgb.db.transaction` needs of a connection: one :class:`DumpingCursor`."""

    def __init__(self, cursor: DumpingCursor) -> None:
        self._cursor = cursor

    def cursor(self) -> DumpingCursor:
        return self._cursor

    def commit(self) -> None:
        return None

    def rollback(self) -> None:
        return None


def load_rows(paths: list[Path] | None = None, n: int | None = None, *, label: str = "x") -> list[dict]:
    """Article rows as the enrich stage loads them: the JSON lines of ``paths`` (default: the
    shipped corpus, what ``scripts/bench_backlog.py`` queues), repeated up to ``n`` rows, each
    title suffixed as the backlog's are (`` (lote <label>-<i>)``). A repeated row's content ends
    with a paragraph of its own (``Lote <label>-<i>.``), so that no text is found again in a cache
    as it would be in the backlog (whose contents repeat every 106 articles) and not in
    production."""
    sources = []
    for path in paths or [CORPUS]:
        for line in Path(path).read_text(encoding="utf-8").split("\n"):  # not splitlines: U+2028
            if line.strip():
                sources.append(json.loads(line))
    n = len(sources) if n is None else n
    published = datetime(2026, 3, 2, 12, tzinfo=UTC)
    rows = []
    for i in range(n):
        a = {k: v for k, v in sources[i % len(sources)].items() if isinstance(v, (str, list))}  # not NaN
        rows.append(
            {
                "unique_id": f"bench{i:06d}",
                "version": 1,
                "trace_id": None,
                "attempts": 0,
                "last_error": None,
                "hold_stage": None,
                "title": f"{a.get('title') or ''} (lote {label}-{i})",
                "subtitle": a.get("subtitle"),
                "editorial_lead": a.get("editorial_lead"),
                "content": (a.get("content") or "") + (f"\n\nLote {label}-{i}." if i >= len(sources) else ""),
                "agency_key": a.get("agency"),
                "published_at": published - timedelta(minutes=i),
                "enriched_at": None,
                "removed_at": None,
                "url": f"https://www.gov.br/{a.get('agency')}/bench/{i}",
                "image_url": a.get("image_url"),
                "category": a.get("category"),
                "tags": list(a.get("tags") or []),
            }
        )
    return rows


def _pg_real_array(vector: np.ndarray) -> str:
    """A vector as PostgreSQL prints a ``real[]`` (shortest float4 digits): what the index reads."""
    return "{" + ",".join(str(np.float32(x)) for x in vector) + "}"


def index_row(row: dict, themes: dict[str, tuple[str, str]], features: dict, vector) -> tuple:
    """The tuple :data:`dgb.search.documents._SELECT` returns for ``row`` once enriched (its
    ``summary`` and ``theme_*`` codes set) and embedded. ``themes``: code -> (code, label)."""
    from dgb.search.documents import CONTENT_CAP

    def theme(code):
        return themes.get(code, (None, None)) if code else (None, None)

    return (
        row["unique_id"],
        row["title"],
        row["subtitle"],
        row["editorial_lead"],
        row.get("summary"),
        row["content"][:CONTENT_CAP],
        row["url"],
        row["image_url"],
        None,
        row["agency_key"],
        row["agency_key"],
        row["category"],
        row["tags"],
        row["published_at"],
        row["published_at"],
        f"hash-{row['unique_id']}",
        False,
        row["version"],
        False,
        row["published_at"],
        *theme(row.get("theme_l1")),
        *theme(row.get("theme_l2")),
        *theme(row.get("theme_l3")),
        *theme(row.get("most_specific")),
        None if vector is None else _pg_real_array(vector),
        features,
    )


@contextmanager
def _nothing(_part: str) -> Iterator[None]:
    yield


def run(rows: list[dict], clock: Callable[[str], object] | None = None, *, chunk_size: int = 25) -> dict:
    """The rows through enrich, embed and index (module docstring), ``chunk_size`` a chunk.
    ``clock(part)`` is entered around each part (``enrich``, ``embed``, ``index.documents``) to
    time it. Returns, per unique_id, what the stages produced: ``classification``, ``features``
    (the keys written, canonical ids resolved), ``mentions``, ``units`` (the classifier's model
    inputs), ``embed_text``, ``document`` (the import line); and under ``"_model"`` the stand-in
    model's CPU seconds in each part (``cpu_s``) and the statements sent (``statements``)."""
    from dgb.embed.model import prepare_text
    from dgb.enrich.features import article_layout
    from dgb.enrich.head import load_default_head
    from dgb.enrich.local import LocalClassifier
    from dgb.enrich.sentiment import load_default as load_default_sentiment
    from dgb.features import compute
    from dgb.features.compute import FeatureComputer
    from dgb.pipeline import chunks
    from dgb.pipeline.messages import Work
    from dgb.pipeline.report import StageReport
    from dgb.pipeline.stage import Failure
    from dgb.pipeline.stages import EmbedStage, EnrichStage
    from dgb.search.documents import _row_to_document, jsonl_line
    from dgb.taxonomy import load_taxonomy

    clock = clock or _nothing
    head, sentiment_head = load_default_head(), load_default_sentiment()
    # a name of its own: the prototype vectors it makes never stand in for the real model's
    model = StandInEmbedder("stand-in", head.dim)
    taxonomy = load_taxonomy()
    themes = {t.code: (t.code, t.label) for level in (1, 2, 3) for t in taxonomy.level(level)}
    cursor = DumpingCursor({code: i for i, code in enumerate(sorted(themes), start=1)})
    conn = DumpingConnection(cursor)
    embedder = service_embedder(model)
    classifier = LocalClassifier(embedder, taxonomy, head=head, sentiment_head=sentiment_head).warm()
    model.cpu_s = 0.0  # the prototypes' encoding is the task's start-up, not per-article work
    out: dict = {r["unique_id"]: {} for r in rows}
    model_by_part: dict[str, float] = {}

    @contextmanager
    def part(name: str) -> Iterator[None]:
        before = model.cpu_s
        with clock(name):
            yield
        model_by_part[name] = model_by_part.get(name, 0.0) + model.cpu_s - before

    written: dict[str, dict] = {}
    real_write = compute.write_many

    def keep(cur, articles):  # the keys write_many merged, canonical ids resolved
        merged = real_write(cur, articles)
        written.update(merged)
        return merged

    try:  # the stage task's BLAS threads (dgb.pipeline.threads), where the code under test has them
        from dgb.config.pipeline import stage_blas_threads
        from dgb.pipeline.threads import blas_threads

        limit = blas_threads(stage_blas_threads())
    except ImportError:
        limit = nullcontext()
    enrich = EnrichStage(classifier, features=FeatureComputer())
    embed = EmbedStage(embedder, model.name)
    vectors: dict[str, np.ndarray] = {}
    with ExitStack() as stack:  # the task's BLAS threads; write_many put back whatever happens
        stack.enter_context(limit)
        stack.callback(setattr, compute, "write_many", real_write)
        compute.write_many = keep
        for start in range(0, len(rows), chunk_size):
            chunk = [
                Work(r["unique_id"], None, enrich.subscriptions[0], row=r)
                for r in rows[start : start + chunk_size]
            ]
            with part("enrich"):
                results = chunks.process(enrich, chunk, StageReport("enrich"))
                triaged = chunks.triage(enrich, chunk, results)
                chunks.commit(conn, enrich, triaged, results, 3)
            for w in chunk:
                res = results[w.unique_id]
                if isinstance(res, Failure):
                    out[w.unique_id]["classification"] = {"failure": res.reason}
                    continue
                w.row.update(
                    summary=res.summary,
                    theme_l1=res.theme_l1,
                    theme_l2=res.theme_l2,
                    theme_l3=res.theme_l3,
                    most_specific=res.most_specific,
                    enriched_at=res.enriched_at,
                )
                out[w.unique_id]["classification"] = {
                    "themes": [res.theme_l1, res.theme_l2, res.theme_l3, res.most_specific],
                    "summary": res.summary,
                    "confidence": res.confidence,
                    "sentiment": res.sentiment,
                }
            with part("embed"):
                results = chunks.process(embed, chunk, StageReport("embed"))
                triaged = chunks.triage(embed, chunk, results)
                chunks.commit(conn, embed, triaged, results, 3)
            for w in chunk:
                vectors[w.unique_id] = results[w.unique_id]
                row = w.row  # the embed stage's text (as EmbedStage._texts makes it), not timed
                text = prepare_text(row["title"] or "", row.get("summary"), row["content"])
                out[w.unique_id]["embed_text"] = text
    index_rows = [
        index_row(r, themes, written.get(r["unique_id"], {}), vectors.get(r["unique_id"])) for r in rows
    ]
    with part("index.documents"):
        lines = [jsonl_line(_row_to_document(row, raw_vector=True)) for row in index_rows]
    for r, line in zip(rows, lines):
        item = out[r["unique_id"]]
        keys = dict(written.get(r["unique_id"], {}))
        keys.pop("features_computed_at", None)
        item["features"] = keys
        item["document"] = line
        texts: list[str] = []
        article_layout(EnrichStage._items([r])[0], texts)
        item["units"] = texts
    out["_model"] = {"cpu_s": model_by_part, "statements": cursor.statements}
    return out


def digest(value) -> str:
    """A short, stable digest of a JSON-able value (floats as Python prints them)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def clocked() -> tuple[dict[str, float], Callable[[str], object]]:
    """(CPU seconds per part, a ``clock`` for :func:`run` that adds to it)."""
    spent: dict[str, float] = {}

    @contextmanager
    def clock(part: str) -> Iterator[None]:
        c = time.process_time()
        try:
            yield
        finally:
            spent[part] = spent.get(part, 0.0) + time.process_time() - c

    return spent, clock
