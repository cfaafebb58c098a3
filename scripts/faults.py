#!/usr/bin/env python
"""Fault injection on the real local stack: nothing lost, duplicated or dead-lettered; time to recover.

    .venv/bin/python scripts/faults.py [--quick] [--articles N] [--only F1,F2] [--keep]
                                       [--outage-s S] [--bedrock-classifier bedrock|hybrid]
    make faults [QUICK=1] [ARGS="--only typesense_down"]

Uses the running local stack (``make up``) or starts it. For each fault, one at a time, a batch of
uniquely identified articles (titles carry the run id) is published on the local gov.br site
(control API ``POST /_control/publish``) of its own agency, ``scrape_<agency>`` is triggered through
the Airflow CLI, and while the batch is on its way scrape -> enrich -> embed -> index the fault is
injected:

* ``kill_triggerer``  kill -9 of the triggerer (just as the batch's events are pulled), restarted
* ``kill_scheduler``  kill -9 of the scheduler's process group (its LocalExecutor workers too), restarted
* ``kill_task``       kill -9 of a running stage task process (enrich/embed/index; else the scrape)
* ``kill_model``      kill -9 of the embedding model service, restarted
* ``stop_typesense``  Typesense stopped for 60 s (``--quick``: 15 s), started again
* ``restart_emulator`` the Pub/Sub emulator restarted: it keeps no state, so in-flight messages
                       are LOST (the topology is re-applied at once, as ``make up`` does); this is
                       exactly what reconciliation must repair
* ``restart_postgres`` ``pg_ctlcluster <ver> <name> restart``

then the long outages, each while a batch is in flight, each 10 min. ``--quick``: longer than a stage
task's whole Airflow retry budget: at least the budget read from the scheduler's serialized stage
DAGs (retries x the largest retry delay Airflow can pick, ~20 s a try, 30 s for the batch to reach
the stage: 140 s with today's 3 retries of 10 s), and for Typesense, the model service and Bedrock
also until a stage task failed its last try, or every article of the batch failed as many tries as
a stage task has (``news.attempts``) or was dead-lettered, since a try can take far longer than
20 s (the Typesense client's own retries), or the dependency's circuit breaker holds the work (open
at its longest cool-down, and a stage run started after that ended deferring it: every later run
does the same until the dependency is back); at most 5 min. ``--outage-s`` sets a fixed length for both modes.

* ``typesense_down``   Typesense stopped
* ``model_down``       the model service stopped (the local classifier's and the embed stage's
                       service); the tasks run with ``DGB_EMBEDDER=service`` as in production, so
                       they cannot fall back to loading the model themselves
* ``bedrock_throttle`` ``DGB_CLASSIFIER=bedrock`` (``--bedrock-classifier hybrid``: hybrid with
                       threshold 1.0, every article routed on) against the Bedrock fake
                       (``dgb_dev.bedrock_fake``, loopback, reached through an AWS connection whose
                       ``endpoint_url`` points at it), which answers every call with HTTP 429
                       ``ThrottlingException`` from the moment the batch is published
* ``emulator_down``    the Pub/Sub emulator stopped (its messages are lost), then started and the
                       topology re-applied

A fault's settings (model_down, bedrock_throttle) reach the stage tasks through the scheduler's
environment: it is restarted with them before the batch, once no stage task runs, and restarted
with the stack's own settings afterwards (also on failure or Ctrl-C).

All along: every event the pipeline publishes is delivered 3 times (each outbox event of the run's
articles is published twice more, straight to its topic) and ~5% poison messages (malformed JSON,
missing attributes, unsupported version, bad payload, unknown article) are published to the topics.
While a batch is incomplete, reconciliation runs (dgb.reconcile.repair.run with a short threshold, then the
outbox relay: what ``dgb reconcile`` does), as the ``reconcile_sweep`` DAG would.

The diff, once every batch is complete (or the deadline passed):

* lost: an article published on the site that is not, exactly once, in PostgreSQL enriched,
  embedded with the current model and indexed at its version, and in Typesense with that version,
  ``theme_1_level_1_code`` and a ``content_embedding`` of the model's dimension;
* duplicated: an article with more than one PostgreSQL row or Typesense document (by its unique
  title), or enriched/embedded more than once per version: more ``dgb.news.enriched`` (or
  ``.embedded``) events written by the stages than ``dgb.news.scraped`` events written by the
  scraper for it (re-sends by reconcile/redrive/replay carry ``dgb_source`` and are legitimate);
* dead_lettered_healthy: a run article (well formed, never poison) that was dead-lettered at any
  point: a ``dead_letters`` row, ``news.problem = 'dead_letter'`` (polled every 10 s, also during
  the outages: a later success may clear it), an event on a dead-letter topic in the outbox, or a
  message for it on a dead-letter topic. Outages are not poison: this must stay 0;
* recovery_s: from the fault's injection (long outages: from the dependency's recovery) until its
  whole batch was complete and Airflow no longer counted a killed pipeline task as running (until
  Airflow notices, after ``[scheduler] task_instance_heartbeat_timeout``, such runs hold the stage
  DAGs' max_active_runs). A long outage's batch must be complete within 5 min of the recovery.

Output (stdout): one line per fault, then exactly ``faults: lost=<n> duplicated=<n>
dead_lettered_healthy=<n> worst_recovery_s=<x>``; progress on stderr. Exit 0 only when nothing was
lost, duplicated or dead-lettered and every long outage's batch was complete within 5 min of the
recovery (else a ``late:`` line names them).
Bounded: every wait has a timeout; whatever the script stopped is started again (and any stack
component found down is restarted) even on failure or Ctrl-C. Only loopback traffic. Unless
``--keep``, the run's articles are taken down afterwards (removed from the site and Typesense,
marked removed in PostgreSQL so late copies of their events are skipped, not dead-lettered) and its
dead letters discarded; the next run deletes what earlier runs left.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO / "dev")]

from dgb import events, outbox, topology  # noqa: E402
from dgb.config import Settings  # noqa: E402
from dgb.pipeline import resilience  # noqa: E402
from dgb.reconcile import repair, stuck  # noqa: E402
from dgb_dev import stack  # noqa: E402

FAULTS = (
    "kill_triggerer",
    "kill_scheduler",
    "kill_task",
    "kill_model",
    "stop_typesense",
    "restart_emulator",
    "restart_postgres",
    "typesense_down",
    "model_down",
    "bedrock_throttle",
    "emulator_down",
)
# long outages: the dependency stays unavailable for OUTAGE_S (--quick: longer than every stage
# task's Airflow retry budget, see Run.quick_outage_s); recovery is measured from its end
LONG_OUTAGES = ("typesense_down", "model_down", "bedrock_throttle", "emulator_down")
OUTAGE_S = 600.0
QUICK_OUTAGE_CAP_S = 300.0  # --quick: the outage ends by then even if the retries are not spent
# --quick: faults whose batch must have spent a stage task's Airflow retries before recovery
SPENDS_RETRIES = ("typesense_down", "model_down", "bedrock_throttle")
RECOVERY_LIMIT_S = 300.0  # every batch indexed within 5 min of its dependency's recovery
BEDROCK_CONN_ID = "dgb_bedrock_fake"
# the contract of the last stdout line
LAST_LINE = (
    r"faults: lost=(?P<lost>\d+) duplicated=(?P<duplicated>\d+)"
    r" dead_lettered_healthy=(?P<dead_lettered_healthy>\d+) worst_recovery_s=(?P<worst>[0-9.]+)"
)
STAGE_DAGS = ("enrich_news", "embed_news", "index_news")
MAIN_TOPICS = topology.TOPICS
# a value of the right JSON type for each payload field of dgb.events' contracts (others: "x")
POISON_VALUES = {
    "published_at": None,
    "most_specific_theme_code": None,
    "has_summary": False,
    "embedding_dim": 1,
}
RUN_TITLE = r"\(falha-[0-9a-f]{6} n[0-9]{3}\)$"  # the title suffix of a run's articles
RUN_UID = r"falha-[0-9a-f]{6}-(n[0-9]{3}_|poison-)"  # in their unique_ids (and poison ids)

THEMES = [
    (
        "Ministério amplia campanha de vacinação contra a gripe em todo o país",
        "A campanha de imunização contra influenza chega a novos postos de saúde. Profissionais de saúde, "
        "idosos e crianças são o público prioritário. "
        "As doses estão disponíveis nas unidades básicas do SUS.",
    ),
    (
        "Governo anuncia novas vagas em escolas técnicas federais",
        "O programa amplia a oferta de cursos técnicos integrados ao ensino médio. As matrículas começam no "
        "próximo mês e os estudantes da rede pública terão prioridade nas vagas dos institutos federais.",
    ),
    (
        "Plano Safra libera crédito para pequenos produtores rurais",
        "Agricultores familiares terão acesso a linhas de financiamento com juros reduzidos para custeio e "
        "investimento. O crédito rural será operado pelos bancos públicos a partir desta semana.",
    ),
    (
        "Receita Federal abre consulta a lote de restituição do Imposto de Renda",
        "O lote contempla contribuintes com prioridade legal. "
        "O crédito bancário será feito no fim do mês e a "
        "consulta pode ser feita no site da Receita ou pelo aplicativo.",
    ),
    (
        "Operação combate desmatamento ilegal na Amazônia",
        "Fiscais ambientais embargaram áreas desmatadas e apreenderam equipamentos. "
        "A ação integra o plano de "
        "prevenção e controle do desmatamento e conta com apoio das forças de segurança.",
    ),
    (
        "Programa habitacional entrega mil moradias a famílias de baixa renda",
        "As unidades fazem parte do programa de habitação popular e contam com infraestrutura de saneamento, "
        "transporte e equipamentos públicos. As famílias foram selecionadas pelas prefeituras.",
    ),
    (
        "Polícia Federal deflagra operação contra fraudes em benefícios",
        "Foram cumpridos mandados de busca e apreensão em três estados. A investigação apura desvios de "
        "recursos públicos e conta com apoio da Controladoria-Geral da União.",
    ),
    (
        "Novo edital financia pesquisa científica em inteligência artificial",
        "Universidades e institutos de pesquisa podem apresentar projetos até o fim do semestre. Os recursos "
        "apoiam bolsas, laboratórios e a formação de pesquisadores em tecnologia e inovação.",
    ),
]


def log(msg: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Timeout(RuntimeError):
    pass


def wait_for(check, timeout: float, what: str, every: float = 1.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except Exception as exc:
            value = None
            last = exc
        else:
            last = None
        if value:
            return value
        if time.monotonic() >= deadline:
            raise Timeout(
                f"{what}: not reached within {timeout:.0f}s" + (f" (last error: {last})" if last else "")
            )
        time.sleep(every)


def retry_budget(tasks: list[tuple[str, dict]]) -> dict:
    """The longest retry schedule among ``(dag_id, serialized task)``: retries, and the sum over
    them of the largest delay Airflow 3's ``TaskInstance.next_retry_datetime`` can pick
    (``retry_exponential_backoff`` is a multiplier there: True is 1.0, a flat delay; otherwise
    ``ceil(delay * m ** (try - 1))`` plus a hash of up to as much again, capped by ``max_retry_delay``)."""
    worst = {"delays_s": 0.0, "retries": 0, "where": ""}
    for dag_id, t in tasks:
        retries = int(t.get("retries") or 0)
        delay = t.get("retry_delay", 300.0)
        delay = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        cap = t.get("max_retry_delay")
        cap = cap.total_seconds() if isinstance(cap, timedelta) else (float(cap) if cap else None)
        mult = t.get("retry_exponential_backoff") or 1.0
        mult = float(mult) if float(mult) > 0 else 1.0  # True is 1.0 (Airflow 3: a multiplier)
        total = 0.0
        for k in range(1, retries + 1):
            if mult != 1.0:
                low = max(1, math.ceil(delay * mult ** (k - 1)))
                d = 2 * low - 1
            else:
                d = delay
            total += min(d, cap) if cap else d
        if (total, retries) > (worst["delays_s"], worst["retries"]):
            worst = {"delays_s": total, "retries": retries, "where": f"{dag_id}.{t.get('task_id', '?')}"}
    return worst


def last_line(lost: int, duplicated: int, dead_lettered_healthy: int, worst_recovery_s: float) -> str:
    return (
        f"faults: lost={lost} duplicated={duplicated} dead_lettered_healthy={dead_lettered_healthy}"
        f" worst_recovery_s={worst_recovery_s:.1f}"
    )


# --------------------------------------------------------------------------- plumbing


class Db:
    """A PostgreSQL connection that reconnects (PostgreSQL is restarted during the run)."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.conn = None

    def get(self):
        from dgb import db

        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = db.connect(self.dsn, connect_timeout=5)
        return self.conn

    def query(self, sql: str, params=None) -> list[tuple]:
        for attempt in range(3):
            conn = self.get()
            try:
                with conn.cursor() as cur:
                    cur.execute(sql, params)
                    rows = cur.fetchall() if cur.description else []
                conn.commit()
                return rows
            except Exception:
                try:
                    conn.close()
                except Exception:
                    pass
                self.conn = None
                if attempt == 2:
                    raise
                time.sleep(1.0)
        return []

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass


def http_json(url: str, body: dict | None = None, timeout: float = 10.0) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url,
        data=data,
        method="POST" if body is not None else "GET",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


@dataclass
class Batch:
    fault: str
    agency: str
    titles: list[str]
    slugs: list[str] = field(default_factory=list)
    published_at: float = 0.0
    fault_at: float | None = None
    fault_end: float | None = None
    done_at: float | None = None
    note: str = ""
    uids: dict[str, str] = field(default_factory=dict)  # title -> unique_id, once scraped

    @property
    def long(self) -> bool:
        return self.fault in LONG_OUTAGES

    @property
    def recovery_s(self) -> float | None:
        """Short faults: from the injection; long outages: from the dependency's recovery."""
        if self.done_at is None:
            return None
        start = self.fault_end if self.long and self.fault_end else (self.fault_at or self.published_at)
        return self.done_at - start


# --------------------------------------------------------------------------- the run


class Run:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.run_id = uuid.uuid4().hex[:6]
        self.tag = f"falha-{self.run_id}"
        self.settings = stack.ensure_secrets(Settings.from_env())
        self.s = self.settings
        os.environ["PUBSUB_EMULATOR_HOST"] = self.s.pubsub_emulator_host
        self.db = Db(self.s.pg_dsn())
        self.af = Db(self.s.pg_dsn(self.s.pg_airflow_db))
        self.batches: list[Batch] = []
        self.stopped: set[str] = set()  # components we stopped and must start again
        self.restarted_by_supervisor: list[str] = []
        self.poison_sent: dict[str, str] = {}  # poison id -> kind
        self.poison_seen: set[str] = set()
        self.duplicated_rows: set[str] = set()  # outbox ids published twice more
        self.dup_published = 0
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.ts = None
        self.last_reconcile = 0.0
        self.reconcile_runs = 0
        self.older_than = 20.0 if self.quick else 45.0
        self.reconcile_every = 20.0 if self.quick else 45.0
        # dead_lettered_healthy: run article -> where it was seen dead-lettered (table, flag, topic)
        self.dead_lettered: dict[str, set[str]] = {}
        self.holding = False  # during a long outage: the supervisor must not "repair" it
        self.env_saved: dict[str, str | None] = {}  # os.environ values a fault's settings replaced
        self.env_applied: dict[str, str] = {}  # the settings the scheduler runs with now
        self.bedrock = None  # the Bedrock fake (dgb_dev.bedrock_fake), started for bedrock_throttle
        self.retry_budget: dict | None = None

    # -- stack ---------------------------------------------------------------------------

    def components(self) -> list[str]:
        return [n for n in stack.SERVICES if stack.available(n)] + [
            f"airflow-{p}" for p in stack.AIRFLOW_PARTS
        ]

    def ensure_stack(self) -> None:
        down = [n for n in self.components() if not stack.component(self.s, n).healthy()]
        if down:
            log(f"stack components down: {down}; starting the stack (python -m dgb_dev.stack up)")
            stack.up(with_airflow=True)
        else:
            log("reusing the running stack; bootstrap (idempotent: migrations, topology, collection)")
            stack.bootstrap(self.s)
        from dgb.search import schema

        self.ts = schema.client(self.s, timeout=10.0)

    def supervise(self) -> list[str]:
        """Like a process supervisor: start any component that is down (PostgreSQL first)."""
        fixed = []
        if self.holding:
            return fixed
        for name in self.components():
            comp = stack.component(self.s, name)
            try:
                healthy = comp.healthy()
            except Exception:
                healthy = False
            if healthy:
                continue
            log(f"supervisor: {name} is down; starting it")
            try:
                comp.up()
                if name == "pubsub":
                    topology.apply_to_emulator(self.s)
                fixed.append(name)
            except Exception as exc:
                log(f"supervisor: {name} failed to start: {exc}")
        self.restarted_by_supervisor += fixed
        return fixed

    def start_again(self, name: str) -> None:
        comp = stack.component(self.s, name)
        try:
            comp.up()
            if name == "pubsub":
                topology.apply_to_emulator(self.s)
        finally:
            self.stopped.discard(name)

    def kill9(self, name: str) -> int | None:
        proc = stack.Proc(name, self.s)
        pid = proc.pid()
        if pid is None:
            return None
        self.stopped.add(name)
        try:
            os.killpg(pid, signal.SIGKILL)  # started with start_new_session: pgid == pid
        except ProcessLookupError:
            pass
        wait_for(lambda: not stack._group_alive(pid), 20, f"{name} gone", every=0.2)
        return pid

    # -- articles ------------------------------------------------------------------------

    def agencies(self) -> list[str]:
        from dgb.scraper.dags import EBC_DAG_ID, scrape_specs

        keys = [
            s.agency_key for s in scrape_specs(self.s) if len(s.agency_keys) == 1 and s.dag_id != EBC_DAG_ID
        ]
        if len(keys) < 1:
            raise SystemExit("faults: no scrape DAG of a gov.br agency on this stack")
        preferred = [
            k
            for k in (
                "agricultura",
                "cidades",
                "mcti",
                "mds",
                "fazenda",
                "mj",
                "mec",
                "mma",
                "saude",
                "turismo",
            )
            if k in keys
        ]
        return preferred + [k for k in keys if k not in preferred]

    def publish(self, batch: Batch, n: int, start: int) -> None:
        for k in range(n):
            title, body = THEMES[(start + k) % len(THEMES)]
            t = f"{title} ({self.tag} n{start + k:03d})"
            art = {
                "agency": batch.agency,
                "title": t,
                "subtitle": f"Teste de falhas {self.run_id}",
                "category": "Notícias",
                "tags": ["teste", self.tag],
                "content": f"{body}\n\n{title}. Artigo {start + k} da execução {self.run_id} do teste de "
                "falhas do pipeline, publicado no site local.\n\nMais informações no portal gov.br.",
            }
            resp = http_json(f"{self.s.mirror_url}/_control/publish", art)
            batch.titles.append(t)
            batch.slugs.append(resp["slug"])
        batch.published_at = time.monotonic()

    def trigger_scrape(self, batch: Batch) -> threading.Thread:
        dag_id = "scrape_" + batch.agency.replace("-", "_")
        conf = {}
        if len(batch.titles) > 80:  # a regular run reads 3 listing pages; walk back instead
            conf = {"start_date": (date.today() - timedelta(days=1)).isoformat()}
        argv = ["dags", "trigger", dag_id] + (["-c", json.dumps(conf)] if conf else [])

        def go():
            for _attempt in range(3):
                try:
                    res = stack.airflow_cli(self.s, argv, check=False, capture=True)
                    if res.returncode == 0:
                        return
                    log(f"trigger {dag_id} failed (exit {res.returncode}): {(res.stderr or '')[-300:]}")
                except Exception as exc:
                    log(f"trigger {dag_id} failed: {exc}")
                time.sleep(5)
            log(f"trigger {dag_id} gave up; the schedule (every 10 min) or reconciliation will catch up")

        th = threading.Thread(target=go, daemon=True)
        th.start()
        return th

    def refresh_uids(self) -> None:
        rows = self.db.query("SELECT title, unique_id FROM news WHERE title LIKE %s", (f"%{self.tag}%",))
        by_title = dict(rows)
        for b in self.batches:
            for t in b.titles:
                if t in by_title:
                    b.uids[t] = by_title[t]

    def all_uids(self) -> list[str]:
        return [u for b in self.batches for u in b.uids.values()]

    # -- completeness --------------------------------------------------------------------

    def complete(self, uids: list[str]) -> set[str]:
        """The uids that are done end to end (PostgreSQL and Typesense)."""
        if not uids:
            return set()
        rows = self.db.query(
            "SELECT unique_id, version FROM news WHERE unique_id = ANY(%s) AND removed_at IS NULL"
            " AND enriched_at IS NOT NULL AND embedded_at IS NOT NULL"
            " AND embedding_model = %s AND indexed_version = version",
            (uids, self.s.embedding_model),
        )
        pg_done = dict(rows)
        if not pg_done:
            return set()
        docs = self.ts_docs(list(pg_done), "id,version,theme_1_level_1_code,content_embedding")
        ok = set()
        for uid, version in pg_done.items():
            d = docs.get(uid)
            if (
                d
                and d.get("version") == version
                and d.get("theme_1_level_1_code")
                and len(d.get("content_embedding") or ()) == self.s.embedding_dim
            ):
                ok.add(uid)
        return ok

    def ts_docs(self, uids: list[str], fields: str) -> dict[str, dict]:
        out = {}
        docs = self.ts.collections[self.s.typesense_collection].documents
        for i in range(0, len(uids), 50):
            part = uids[i : i + 50]
            raw = docs.export(
                {
                    "include_fields": fields,
                    "filter_by": "unique_id:=[" + ",".join(f"`{u}`" for u in part) + "]",
                }
            )
            for line in raw.splitlines():
                if line.strip():
                    d = json.loads(line)
                    out[d["id"]] = d
        return out

    def check_batches(self) -> None:
        try:
            self.refresh_uids()
            pending = [b for b in self.batches if b.done_at is None and b.published_at]
            uids = [u for b in pending for u in b.uids.values()]
            done = self.complete(uids) if uids else set()
        except Exception as exc:
            log(f"check: {type(exc).__name__}: {str(exc)[:160]}")
            return
        now = time.monotonic()
        for b in pending:
            if len(b.uids) == len(b.titles) and set(b.uids.values()) <= done:
                # fully recovered also means Airflow let go of tasks the fault killed: until it
                # notices (task_instance_heartbeat_timeout) their runs count against max_active_runs
                orphans = self.orphaned_tasks()
                if orphans:
                    if not b.note or "orphans" not in b.note:
                        b.note = (b.note + " " if b.note else "") + f"orphans={len(orphans)}"
                        log(
                            f"{b.fault}: batch complete, but Airflow still counts"
                            f" {len(orphans)} killed task(s) as "
                            f"running ({', '.join(orphans[:4])}); waiting for it to let go"
                        )
                    continue
                b.done_at = now
                log(f"{b.fault}: batch of {len(b.titles)} complete, recovery {b.recovery_s:.1f}s")

    # -- reconciliation, duplicates, poison -----------------------------------------------

    def reconcile_now(self) -> None:
        from google.cloud import pubsub_v1

        try:
            conn = self.db.get()
            t = stuck.Thresholds.from_env().with_age(self.older_than)
            rep = repair.run(
                conn,
                mode="manual",
                ts=self.ts,
                alias=self.s.typesense_collection,
                thresholds=t,
                model=self.s.embedding_model,
            )
            res = outbox.relay(
                conn, pubsub_v1.PublisherClient(), self.s.gcp_project, timeout=10.0, max_batches=5
            )
            self.reconcile_runs += 1
            log(f"{rep.line()}; relay {res}")
        except Exception as exc:
            self.db.conn = None
            log(f"reconcile: {type(exc).__name__}: {str(exc)[:200]}")
        self.last_reconcile = time.monotonic()

    def duplicator(self) -> None:
        """Publish every outbox event of the run's articles twice more: each is delivered 3x."""
        from google.cloud import pubsub_v1

        publisher = pubsub_v1.PublisherClient()
        db = Db(self.s.pg_dsn())
        while not self.stop_event.is_set():
            try:
                uids = self.all_uids()
                if uids:
                    rows = db.query(
                        "SELECT id::text, topic, payload, attributes FROM outbox WHERE published_at IS NOT"
                        " NULL AND topic = ANY(%s) AND aggregate_id = ANY(%s)",
                        (list(MAIN_TOPICS), uids),
                    )
                    for row_id, topic, payload, attributes in rows:
                        if row_id in self.duplicated_rows:
                            continue
                        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
                        attrs = {k: str(v) for k, v in (attributes or {}).items()}
                        path = f"projects/{self.s.gcp_project}/topics/{topic}"
                        futures = [publisher.publish(path, data, **attrs) for _ in range(2)]
                        for f in futures:
                            f.result(timeout=10)
                        self.duplicated_rows.add(row_id)
                        self.dup_published += 2
            except Exception as exc:
                log(f"duplicator: {type(exc).__name__}: {str(exc)[:120]}")
                time.sleep(2)
            self.stop_event.wait(1.0)
        db.close()

    def send_poison(self, count: int) -> None:
        from google.cloud import pubsub_v1

        publisher = pubsub_v1.PublisherClient()
        kinds = (
            "malformed_json",
            "missing_attributes",
            "unsupported_version",
            "malformed_payload",
            "unknown_id",
        )
        for _ in range(count):
            pid = f"{self.tag}-poison-{len(self.poison_sent):03d}"
            kind = kinds[len(self.poison_sent) % len(kinds)]
            topic = MAIN_TOPICS[len(self.poison_sent) % len(MAIN_TOPICS)]
            attrs = {
                "trace_id": str(uuid.uuid4()),
                "event_version": topology.EVENT_VERSION,
                "unique_id": pid,
                "dgb_fault_run": self.run_id,
                "dgb_poison_id": pid,
            }
            # every field of the topic's contract, well typed (an "unknown_id" poison passes validation)
            fields = {f: POISON_VALUES.get(f, "x") for f in events.PAYLOAD_FIELDS[topic]}
            data = json.dumps({**fields, "unique_id": pid}).encode()
            if kind == "malformed_json":
                data = b'{"unique_id": "' + pid.encode() + b'", oops'
            elif kind == "missing_attributes":
                attrs.pop("trace_id")
            elif kind == "unsupported_version":
                attrs["event_version"] = "9.9"
            elif kind == "malformed_payload":
                data = json.dumps({"unique_id": pid}).encode()  # the topic's other fields missing
            try:
                publisher.publish(f"projects/{self.s.gcp_project}/topics/{topic}", data, **attrs).result(
                    timeout=10
                )
                self.poison_sent[pid] = kind
            except Exception as exc:
                log(f"poison publish failed: {exc}")

    def await_poison(self, timeout: float) -> None:
        try:
            wait_for(
                lambda: (self.collect_dead_letters() or True) and set(self.poison_sent) <= self.poison_seen,
                timeout,
                "every poison message dead-lettered",
                every=3,
            )
        except Timeout as exc:
            missing = sorted(set(self.poison_sent) - self.poison_seen)
            log(f"{exc}: {[(p, self.poison_sent[p]) for p in missing[:10]]}")

    def collect_dead_letters(self) -> None:
        """Poison seen dead-lettered: on the dead-letter topics (inspect subscriptions; others'
        messages are released at once) or in the dead_letters table."""
        from google.api_core import exceptions
        from google.cloud import pubsub_v1

        ours = set(self.all_uids())
        if not self.poison_sent and not ours:
            return
        try:
            rows = self.db.query(
                "SELECT coalesce(attributes->>'dgb_poison_id', unique_id) FROM dead_letters"
                " WHERE attributes->>'dgb_fault_run' = %s OR unique_id LIKE %s",
                (self.run_id, f"{self.tag}-poison-%"),
            )
            self.poison_seen |= {r[0] for r in rows if r[0]}
            sub = pubsub_v1.SubscriberClient()
            for s in topology.SUBSCRIPTIONS:
                path = f"projects/{self.s.gcp_project}/subscriptions/{s.dead_letter_subscription}"
                try:
                    resp = sub.pull(request={"subscription": path, "max_messages": 100}, timeout=2)
                except exceptions.DeadlineExceeded:
                    continue
                mine, others = [], []
                for m in resp.received_messages:
                    article = m.message.attributes.get("unique_id")
                    if article not in ours:
                        try:
                            body = json.loads(m.message.data)
                            article = body.get("unique_id") if isinstance(body, dict) else None
                        except ValueError:
                            article = None
                    if article in ours:  # one of the run's healthy articles, dead-lettered
                        self.dead_lettered.setdefault(article, set()).add("topic")
                    pid = (
                        m.message.attributes.get("dgb_poison_id")
                        if m.message.attributes.get("dgb_fault_run") == self.run_id
                        else None
                    )
                    if pid is None:  # a dead letter written by a stage: the article id is in the body
                        try:
                            body = json.loads(m.message.data)
                            uid = body.get("unique_id") if isinstance(body, dict) else None
                        except ValueError:
                            uid = None
                        pid = uid if isinstance(uid, str) and uid.startswith(f"{self.tag}-poison-") else None
                    if pid and article not in ours:
                        self.poison_seen.add(pid)
                        mine.append(m.ack_id)
                    else:
                        others.append(m.ack_id)
                if mine:
                    sub.acknowledge(request={"subscription": path, "ack_ids": mine})
                if others:
                    sub.modify_ack_deadline(
                        request={"subscription": path, "ack_ids": others, "ack_deadline_seconds": 0}
                    )
        except Exception as exc:
            log(f"dead-letter check: {type(exc).__name__}: {str(exc)[:120]}")

    def observe_dead_letters(self) -> None:
        """The run's own (well-formed, healthy) articles dead-lettered at any point: a
        ``dead_letters`` row, ``news.problem = 'dead_letter'`` (polled: a later success may clear
        it), an event on a dead-letter topic in the outbox, or (collect_dead_letters) a message on
        a dead-letter topic. Outages must never put an article there."""
        try:
            self.refresh_uids()
            uids = self.all_uids()
            if not uids:
                return
            dlq_topics = sorted({s.dead_letter_topic for s in topology.SUBSCRIPTIONS})
            found = [
                (
                    "table",
                    "SELECT DISTINCT coalesce(unique_id, message_key) FROM dead_letters"
                    " WHERE unique_id = ANY(%(u)s) OR message_key = ANY(%(u)s)",
                ),
                (
                    "flag",
                    "SELECT unique_id FROM news WHERE unique_id = ANY(%(u)s) AND problem = 'dead_letter'",
                ),
                (
                    "outbox",
                    "SELECT DISTINCT aggregate_id FROM outbox WHERE aggregate_id = ANY(%(u)s)"
                    " AND topic = ANY(%(t)s)",
                ),
            ]
            for source, sql in found:
                for (uid,) in self.db.query(sql, {"u": uids, "t": dlq_topics}):
                    if uid in uids and source not in self.dead_lettered.get(uid, ()):
                        self.dead_lettered.setdefault(uid, set()).add(source)
                        log(f"healthy article {uid} dead-lettered ({source})")
        except Exception as exc:
            log(f"dead-letter observation: {type(exc).__name__}: {str(exc)[:160]}")

    # -- faults --------------------------------------------------------------------------

    def events_published(self, batch: Batch) -> bool:
        self.refresh_uids()
        if len(batch.uids) < len(batch.titles):
            return False
        n = self.db.query(
            "SELECT count(DISTINCT aggregate_id) FROM outbox WHERE topic = %s AND published_at IS NOT NULL"
            " AND aggregate_id = ANY(%s)",
            (topology.TOPIC_SCRAPED, list(batch.uids.values())),
        )[0][0]
        return n >= len(batch.titles)

    def await_in_flight(self, batch: Batch) -> None:
        """Until the batch's scraped events are published (the scrape ran, the relay sent them)."""
        try:
            wait_for(
                lambda: self.events_published(batch),
                150 if self.quick else 400,
                f"{batch.fault}: scraped events of the batch published",
                every=0.5,
            )
        except Timeout as exc:
            batch.note = "injected_before_publish"
            log(str(exc))

    # -- long outages -------------------------------------------------------------------

    def stage_retry_budget(self) -> dict:
        """The stage tasks' Airflow retry settings, as the scheduler has them (serialized DAGs),
        and the longest time from a task's first failure to its last try's start: sum over the
        retries of the largest delay Airflow's ``next_retry_datetime`` can pick."""
        if self.retry_budget is not None:
            return self.retry_budget
        tasks = []
        try:
            for dag_id, data in self.af.query(
                "SELECT DISTINCT ON (dag_id) dag_id, data FROM serialized_dag WHERE dag_id = ANY(%s)"
                " ORDER BY dag_id, created_at DESC",
                (list(STAGE_DAGS),),
            ):
                for t in (data or {}).get("dag", {}).get("tasks", []):
                    t = t.get("__var", t)
                    tasks.append((dag_id, t))
        except Exception as exc:
            log(f"stage retry settings from the serialized DAGs: {exc}")
        if not tasks:  # not parsed yet: what dags/pipeline_stages.py sets
            from dgb.dags_meta import DEFAULT_ARGS

            tasks = [("stage DAGs", {**DEFAULT_ARGS, "retry_delay": 10.0, "max_retry_delay": 600.0})]
        worst = retry_budget(tasks)
        self.retry_budget = worst
        log(
            f"stage retry budget: {worst['retries']} retries, at most {worst['delays_s']:.0f}s of retry"
            f" delays ({worst['where']})"
        )
        return worst

    def outage_s(self, batch: Batch) -> float:
        """Full: OUTAGE_S (10 min). --quick: longer than a stage task's whole Airflow retry budget
        (every try failing, ~20 s per try on 2 shared cores, Bedrock's own 1+2+4 s backoff per
        article in each try of the bedrock fault), plus 30 s for the batch to reach the stage."""
        if self.args.outage_s:
            return self.args.outage_s
        if not self.quick:
            return OUTAGE_S
        b = self.stage_retry_budget()
        per_try = 20.0
        if batch.fault == "bedrock_throttle":
            per_try += 9.0 * math.ceil(len(batch.titles) / 4)  # DGB_BEDROCK_CONCURRENCY=4
        return max(120.0, b["delays_s"] + (b["retries"] + 1) * per_try + 30.0)

    def fault_env(self, fault: str | None) -> dict[str, str]:
        """Settings the stage tasks need for a fault (they inherit the scheduler's environment)."""
        if fault == "model_down":
            # what production runs: the stages use the model service and never load the model
            # themselves (DGB_EMBEDDER=auto would load it in every task while the service is down)
            return {"DGB_EMBEDDER": "service"}
        if fault == "bedrock_throttle":
            env = {
                "DGB_CLASSIFIER": self.args.bedrock_classifier,
                "DGB_AWS_CONN_ID": BEDROCK_CONN_ID,
                f"AIRFLOW_CONN_{BEDROCK_CONN_ID.upper()}": json.dumps(self.bedrock.aws_conn()),
                "DGB_BEDROCK_CONCURRENCY": "4",
            }
            if self.args.bedrock_classifier == "hybrid":
                env["DGB_HYBRID_THRESHOLD"] = "1.0"  # every article goes on to Bedrock
            return env
        return {}

    def apply_env(self, env: dict[str, str]) -> None:
        """Run the scheduler (and so every task) with ``env`` on top of the stack's own settings;
        {} restores them. A restart, once no stage task runs (bounded wait)."""
        if env == self.env_applied:
            return
        for k, v in self.env_saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self.env_saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        self.env_applied = dict(env)
        try:
            wait_for(
                lambda: not self.running_task(STAGE_DAGS, datetime.now(UTC) - timedelta(hours=1)),
                90,
                "no stage task running",
                every=1,
            )
        except Timeout as exc:
            log(f"{exc}; restarting the scheduler anyway")
        what = ", ".join(f"{k}={v}" for k, v in env.items() if not k.startswith("AIRFLOW_CONN"))
        log(f"restarting the scheduler with {what or 'the stack defaults'}")
        comp = stack.component(self.s, "airflow-scheduler")
        comp.down()
        comp.up()

    def retries_spent(self, batch: Batch, since: datetime) -> bool:
        """The Airflow retry budget is spent against the outage, whatever each try took (the
        Typesense client's retries, Bedrock's backoff): a stage task instance ended its last try
        since the outage began (failed: a failure of the whole task before any article is handled;
        or succeeded with the work left pending, as the stages end a last try in an outage), or
        every article of the batch failed as many tries as a stage task has (``news.attempts``
        counts a stage's transient failures) or was dead-lettered."""
        tries = self.stage_retry_budget()["retries"] + 1
        if self.breaker_holds(batch, since):
            return True
        failed = self.af.query(
            "SELECT count(*) FROM task_instance WHERE dag_id = ANY(%s) AND state IN ('failed', 'success')"
            " AND try_number >= %s AND end_date >= %s",
            (list(STAGE_DAGS), tries, since),
        )[0][0]
        if failed:
            return True
        uids = list(batch.uids.values())
        if len(uids) < len(batch.titles):
            return False
        n = self.db.query(
            "SELECT count(*) FROM news WHERE unique_id = ANY(%s)"
            " AND (attempts >= %s OR problem = 'dead_letter')",
            (uids, tries),
        )[0][0]
        return n >= len(uids)

    def breaker_holds(self, batch: Batch, since: datetime) -> bool:
        """The stage stopped spending its tries on the outage: the dependency's circuit breaker
        is open at its longest cool-down (it re-opened up to ``DGB_BREAKER_MAX_COOLDOWN_S``), and
        a run of the stage DAG that started after that ended successfully (it deferred the batch
        rather than fail or dead-letter it). From then on every run does the same until the
        dependency answers again, so a longer outage would test nothing more; this is what ends
        ``--quick``'s outage when the breakers, not the Airflow retries, hold the work."""
        dep, dag_ids = {
            "typesense_down": (resilience.TYPESENSE, ["index_news"]),
            "model_down": (resilience.MODEL_SERVICE, ["enrich_news", "embed_news"]),
            "bedrock_throttle": (resilience.BEDROCK, ["enrich_news"]),
        }.get(batch.fault, (None, None))
        if dep is None:
            return False
        b = resilience.Breakers(self.db.get(), [dep])
        self.db.get().commit()
        state = b.states[dep]
        at_cap = b.cooldown(state.opens) >= b.max_cooldown_s
        if b.state(dep) == resilience.CLOSED or not at_cap or state.open_until is None:
            return False
        opened = state.open_until - timedelta(seconds=b.cooldown(state.opens))  # its latest opening
        if opened < since:
            return False
        n = self.af.query(
            "SELECT count(*) FROM task_instance WHERE dag_id = ANY(%s) AND state = 'success'"
            " AND start_date >= %s",
            (dag_ids, opened),
        )[0][0]
        if n:
            batch.note += f" held_by_breaker={dep}"
        return bool(n)

    def hold(self, batch: Batch, seconds: float) -> None:
        """Keep the dependency down for ``seconds`` (--quick, faults of SPENDS_RETRIES: and then
        until the batch spent a stage task's retries, at most QUICK_OUTAGE_CAP_S in all), watching
        for healthy articles dead-lettered."""
        self.holding = True
        adaptive = self.quick and not self.args.outage_s and batch.fault in SPENDS_RETRIES
        try:
            t0 = time.monotonic()
            since = datetime.now(UTC)
            end = t0 + seconds
            cap = t0 + max(seconds, QUICK_OUTAGE_CAP_S)
            last_log = 0.0
            while True:
                self.observe_dead_letters()
                now = time.monotonic()
                if now >= cap:
                    if adaptive:
                        batch.note += " retries_not_spent_by_cap"
                    break
                if now >= end:
                    try:
                        spent = not adaptive or self.retries_spent(batch, since)
                    except Exception as exc:
                        log(f"{batch.fault}: retries spent? {exc}")
                        spent = False
                    if spent:
                        break
                if now - last_log >= 60:
                    left = max(0.0, end - now)
                    more = " (then until the batch spent its stage retries)" if adaptive else ""
                    log(f"{batch.fault}: {left:.0f}s of outage left{more}")
                    last_log = now
                time.sleep(min(10.0, max(1.0, (end if now < end else cap) - now)))
        finally:
            self.holding = False
            batch.note = batch.note.replace(
                f"outage_s={seconds:.0f}", f"outage_s={time.monotonic() - t0:.0f}"
            )

    def long_outage(self, batch: Batch) -> None:
        f = batch.fault
        seconds = self.outage_s(batch)
        batch.note = (batch.note + " " if batch.note else "") + f"outage_s={seconds:.0f}"
        if f == "bedrock_throttle":
            # throttled from the moment the batch is on its way (scrape -> enrich), so no article
            # is classified before the outage starts
            self.note_pending(batch)
            batch.fault_at = time.monotonic()
            self.bedrock.throttle(max(seconds, QUICK_OUTAGE_CAP_S) + 60)  # switched off below
            log(f"bedrock fake throttling every call (429 ThrottlingException) for {seconds:.0f}s")
            try:
                self.hold(batch, seconds)
            finally:
                self.bedrock.throttle(None)
            log(f"bedrock fake answering again ({self.bedrock.throttled} calls throttled)")
            return
        self.await_in_flight(batch)
        self.note_pending(batch)
        name = {"typesense_down": "typesense", "model_down": "model", "emulator_down": "pubsub"}[f]
        batch.fault_at = time.monotonic()
        self.stopped.add(name)
        stack.component(self.s, name).down()
        log(f"{name} stopped for {seconds:.0f}s")
        self.hold(batch, seconds)
        self.start_again(name)

    def inject(self, batch: Batch) -> None:
        f = batch.fault
        if f == "kill_task":
            return self.kill_task(batch)
        if f in LONG_OUTAGES:
            self.long_outage(batch)
            batch.fault_end = time.monotonic()
            log(f"{f}: restored after {batch.fault_end - batch.fault_at:.1f}s")
            return
        self.await_in_flight(batch)
        self.note_pending(batch)
        batch.fault_at = time.monotonic()
        if f == "kill_triggerer":
            pid = self.kill9("airflow-triggerer")
            log(f"kill -9 triggerer (pid {pid})")
            time.sleep(2)
            self.start_again("airflow-triggerer")
        elif f == "kill_scheduler":
            pid = self.kill9("airflow-scheduler")
            log(f"kill -9 scheduler process group (pid {pid})")
            time.sleep(2)
            self.start_again("airflow-scheduler")
        elif f == "kill_model":
            pid = self.kill9("model")
            log(f"kill -9 model service (pid {pid})")
            time.sleep(5)
            self.start_again("model")
        elif f == "stop_typesense":
            seconds = 15 if self.quick else 60
            self.stopped.add("typesense")
            stack.component(self.s, "typesense").down()
            log(f"typesense stopped for {seconds}s")
            time.sleep(seconds)
            self.start_again("typesense")
        elif f == "restart_emulator":
            self.stopped.add("pubsub")
            stack.component(self.s, "pubsub").down()
            log("pubsub emulator stopped (its messages are gone); starting it, re-applying the topology")
            self.start_again("pubsub")
        elif f == "restart_postgres":
            ver, name = stack.Postgres(self.s)._cluster()
            self.stopped.add("postgres")
            log(f"pg_ctlcluster {ver} {name} restart")
            try:
                subprocess.run(
                    ["pg_ctlcluster", ver, name, "restart"], capture_output=True, text=True, timeout=120
                )
            finally:
                wait_for(lambda: stack.component(self.s, "postgres").healthy(), 60, "postgres back")
                self.stopped.discard("postgres")
        batch.fault_end = time.monotonic()
        log(f"{f}: restored after {batch.fault_end - batch.fault_at:.1f}s")

    def orphaned_tasks(self) -> list[str]:
        """Pipeline task instances Airflow has as running whose process is gone (killed)."""
        try:
            rows = self.af.query(
                "SELECT dag_id, task_id, pid FROM task_instance WHERE state = 'running'"
                " AND (dag_id = ANY(%s) OR dag_id LIKE 'scrape\\_%%' OR dag_id = 'outbox_relay')",
                (list(STAGE_DAGS),),
            )
        except Exception:
            return []
        out = []
        for dag_id, task_id, pid in rows:
            if pid is None:
                continue
            try:
                alive = "airflow" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                alive = False
            if not alive:
                out.append(f"{dag_id}.{task_id}")
        return out

    def note_pending(self, batch: Batch) -> None:
        """How many of the batch's articles were still on their way when the fault hit."""
        try:
            pending = len(batch.titles) - len(self.complete(list(batch.uids.values())))
        except Exception:
            return
        batch.note = (batch.note + " " if batch.note else "") + f"in_flight_at_fault={pending}"

    def running_task(self, dags: tuple[str, ...], since: datetime) -> tuple[int, str] | None:
        rows = self.af.query(
            "SELECT pid, dag_id, task_id, id::text FROM task_instance WHERE state = 'running'"
            " AND dag_id = ANY(%s) AND start_date >= %s AND pid IS NOT NULL"
            " ORDER BY start_date DESC",
            (list(dags), since),
        )
        for pid, dag_id, task_id, _ti in rows:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "airflow" in cmd:
                return pid, f"{dag_id}.{task_id}"
        return None

    def kill_task(self, batch: Batch) -> None:
        since = datetime.now(UTC) - timedelta(seconds=5)
        scrape_dag = "scrape_" + batch.agency.replace("-", "_")
        deadline = time.monotonic() + (120 if self.quick else 400)
        victim = None
        while time.monotonic() < deadline and victim is None:
            try:
                victim = self.running_task(STAGE_DAGS, since)
                if victim is None and time.monotonic() > deadline - 60:
                    victim = self.running_task((scrape_dag,), since)
            except Exception as exc:
                log(f"kill_task: {exc}")
            if victim is None:
                time.sleep(0.2)
        batch.fault_at = time.monotonic()
        if victim is not None:
            try:
                os.kill(victim[0], signal.SIGKILL)
            except ProcessLookupError:
                victim = (None, victim[1])
        self.note_pending(batch)
        if victim is None:
            batch.note += " no_running_task_found"
            log("kill_task: no running task found to kill")
        else:
            pid, what = victim
            if pid is None:
                batch.note += f" finished_before_kill={what}"
            else:
                batch.note += f" killed={what}"
                log(f"kill -9 running task {what} (pid {pid})")
        batch.fault_end = time.monotonic()

    # -- phases --------------------------------------------------------------------------

    def monitor_until(self, deadline: float, stop_when) -> None:
        next_dlq = 0.0
        while time.monotonic() < deadline and not stop_when():
            self.check_batches()
            now = time.monotonic()
            incomplete = [b for b in self.batches if b.done_at is None and b.fault_end is not None]
            if (
                incomplete
                and now - self.last_reconcile >= self.reconcile_every
                and now - min(b.fault_end for b in incomplete) >= self.older_than
            ):
                self.reconcile_now()
            if now >= next_dlq:
                self.collect_dead_letters()
                self.observe_dead_letters()
                # a process supervisor's job (systemd, Kubernetes): a component that crashed
                # because of the fault (the triggerer exits when PostgreSQL restarts) is started
                fixed = self.supervise()
                if fixed and self.batches:
                    b = self.batches[-1]
                    b.note = (b.note + " " if b.note else "") + "supervisor_restarted=" + ",".join(fixed)
                next_dlq = now + 10
            if self.stopped:
                for name in list(self.stopped):
                    log(f"{name} still stopped: starting it")
                    self.start_again(name)
            time.sleep(2)

    def run(self) -> int:
        self.ensure_stack()
        self.purge_previous()
        faults = [f for f in FAULTS if not self.args.only or f in self.args.only]
        total = self.args.articles or (44 if self.quick else 500)
        per = [total // len(faults) + (1 if i < total % len(faults) else 0) for i in range(len(faults))]
        agencies = self.agencies()
        log(
            f"run {self.run_id}: {total} articles over {len(faults)} faults {per}, "
            f"agencies {agencies[: len(faults)]}, poison ~5%, every event delivered 3x"
        )
        if "bedrock_throttle" in faults:
            from dgb_dev.bedrock_fake import FakeBedrockServer

            self.bedrock = FakeBedrockServer(0).start()
            log(f"bedrock fake on {self.bedrock.url} (DGB_CLASSIFIER={self.args.bedrock_classifier})")
        dup = threading.Thread(target=self.duplicator, daemon=True)
        dup.start()
        phase_cap = 100 if self.quick else 360
        start = 0
        for i, fault in enumerate(faults):
            self.apply_env(self.fault_env(fault))
            if fault in ("restart_emulator", "emulator_down"):
                self.await_poison(60)  # dead-letter copies on the emulator would go with it
            batch = Batch(fault, agencies[i % len(agencies)], [])
            self.publish(batch, per[i], start)
            start += per[i]
            self.batches.append(batch)
            log(f"{fault}: published {len(batch.titles)} articles on {batch.agency}; triggering its scrape")
            self.trigger_scrape(batch)
            try:
                self.inject(batch)
            except Exception as exc:
                batch.note = f"inject_error={type(exc).__name__}"
                batch.fault_end = batch.fault_end or time.monotonic()
                log(f"{fault}: injection failed: {exc}")
            for name in list(self.stopped):
                self.start_again(name)
            # ~5% poison (of the batch's 3 events per article), sent once the fault is over: the
            # emulator restart would otherwise swallow some of them before anyone saw them
            self.send_poison(max(1, math.ceil(0.05 * 3 * len(batch.titles))))
            fixed = self.supervise()
            if fixed:
                batch.note = (
                    (batch.note + " " if batch.note else "") + "supervisor_restarted=" + ",".join(fixed)
                )
            cap = RECOVERY_LIMIT_S + 30 if batch.long else phase_cap
            self.monitor_until(time.monotonic() + cap, lambda b=batch: b.done_at is not None)
        self.apply_env({})
        drain = 240 if self.quick else 900
        log(f"all faults injected; waiting up to {drain}s for every batch")
        self.monitor_until(time.monotonic() + drain, lambda: all(b.done_at is not None for b in self.batches))
        self.await_poison(60)
        return self.report()

    # -- the diff --------------------------------------------------------------------------

    def report(self) -> int:
        self.refresh_uids()
        self.collect_dead_letters()
        self.observe_dead_letters()
        titles = [t for b in self.batches for t in b.titles]
        pg_rows: dict[str, int] = {}
        for title, n in self.db.query(
            "SELECT title, count(*) FROM news WHERE title LIKE %s GROUP BY 1", (f"%{self.tag}%",)
        ):
            pg_rows[title] = n
        ts_count: dict[str, int] = {}
        raw = self.ts.collections[self.s.typesense_collection].documents.export(
            {"include_fields": "id,title"}
        )
        for line in raw.splitlines():
            if self.tag in line:
                t = json.loads(line).get("title")
                ts_count[t] = ts_count.get(t, 0) + 1
        uids = self.all_uids()
        done = self.complete(uids)
        counts: dict[str, dict[str, int]] = {}
        for uid, topic, n in self.db.query(
            "SELECT aggregate_id, topic, count(*) FROM outbox WHERE aggregate_id = ANY(%s)"
            " AND NOT (attributes ? 'dgb_source') GROUP BY 1, 2",
            (uids,),
        ):
            counts.setdefault(uid, {})[topic] = n
        total_lost = total_dup = total_dlh = 0
        late = []
        worst = 0.0
        lines = []
        for b in self.batches:
            lost = dup = 0
            for t in b.titles:
                uid = b.uids.get(t)
                if uid is None or uid not in done or ts_count.get(t, 0) == 0:
                    lost += 1
                c = counts.get(uid, {}) if uid else {}
                scraped = c.get(topology.TOPIC_SCRAPED, 0)
                if (
                    pg_rows.get(t, 0) > 1
                    or ts_count.get(t, 0) > 1
                    or c.get(topology.TOPIC_ENRICHED, 0) > max(scraped, 1)
                    or c.get(topology.TOPIC_EMBEDDED, 0) > max(scraped, 1)
                ):
                    dup += 1
            dlh = sum(1 for t in b.titles if b.uids.get(t) in self.dead_lettered)
            total_dlh += dlh
            rec = b.recovery_s
            if b.long and (rec is None or rec > RECOVERY_LIMIT_S):
                late.append(b.fault)
            if rec is None:
                rec_txt = "timeout"
                worst = max(worst, time.monotonic() - (b.fault_at or b.published_at))
            else:
                rec_txt = f"{rec:.1f}"
                worst = max(worst, rec)
            total_lost += lost
            total_dup += dup
            line = (
                f"fault={b.fault} lost={lost} duplicated={dup} dead_lettered_healthy={dlh}"
                f" recovery_s={rec_txt} articles={len(b.titles)}"
            )
            if dlh:
                seen = sorted({src for t in b.titles for src in self.dead_lettered.get(b.uids.get(t), ())})
                line += f" dead_lettered_via={','.join(seen)}"
            if b.note:
                line += f" note={b.note.replace(' ', ';')}"
            lines.append(line)
        poison_line = (
            f"deliveries: extra_copies={self.dup_published} (every event 3x)"
            f" poison_sent={len(self.poison_sent)}"
            f" poison_dead_lettered={len(self.poison_seen & set(self.poison_sent))}"
            f" reconcile_runs={self.reconcile_runs} articles={len(titles)}"
        )
        for line in lines:
            print(line, flush=True)
        print(poison_line, flush=True)
        if late:
            print(
                f"late: {','.join(late)} not indexed within {RECOVERY_LIMIT_S:.0f}s of the recovery",
                flush=True,
            )
        print(last_line(total_lost, total_dup, total_dlh, worst), flush=True)
        return 0 if total_lost == 0 and total_dup == 0 and total_dlh == 0 and not late else 1

    # -- cleanup ---------------------------------------------------------------------------

    def cleanup(self) -> None:
        self.stop_event.set()
        self.holding = False
        if self.bedrock is not None:
            self.bedrock.throttle(None)
        try:
            self.apply_env({})  # the scheduler back on the stack's own settings
        except Exception as exc:
            log(f"cleanup: restoring the scheduler's settings: {exc}")
        for name in list(self.stopped):
            try:
                log(f"cleanup: starting {name} again")
                self.start_again(name)
            except Exception as exc:
                log(f"cleanup: {name}: {exc}")
        try:
            self.supervise()
        except Exception as exc:
            log(f"cleanup: supervisor: {exc}")
        if self.args.keep:
            log(f"--keep: the run's articles stay (titles contain {self.tag!r})")
        else:
            self.remove_articles()
        if self.bedrock is not None:
            self.bedrock.stop()
        self.db.close()
        self.af.close()

    def remove_articles(self) -> None:
        """Take the run's articles down everywhere. In PostgreSQL they are marked removed (and
        their index entry settled) rather than deleted: copies of their events may still be on
        their way (a killed triggerer's messages come back after their ack deadline) and must
        find the row (skipped as done) instead of dead-lettering as unknown ids. The next run
        deletes the rows of earlier runs (:meth:`purge_previous`)."""
        try:
            for b in self.batches:
                for slug in b.slugs:
                    try:
                        http_json(f"{self.s.mirror_url}/_control/remove", {"agency": b.agency, "slug": slug})
                    except Exception:
                        pass
            rows = self.db.query("SELECT unique_id FROM news WHERE title LIKE %s", (f"%{self.tag}%",))
            uids = sorted({r[0] for r in rows} | set(self.all_uids()))
            self.db.query(
                "UPDATE news SET removed_at = now(), version = version + 1, indexed_version = version + 1,"
                " indexed_at = NULL, updated_at = now() WHERE unique_id = ANY(%s) RETURNING 1",
                (uids,),
            )
            if self.ts is not None:
                docs = self.ts.collections[self.s.typesense_collection].documents
                for uid in uids:
                    try:
                        docs[uid].delete()
                    except Exception:
                        pass
            self.db.query(
                "UPDATE dead_letters SET status = 'discarded', resolved_at = now(),"
                " resolution = %s WHERE status = 'open' AND (unique_id = ANY(%s)"
                " OR attributes->>'dgb_fault_run' = %s OR unique_id LIKE %s) RETURNING 1",
                (f"fault-injection run {self.run_id}: cleanup", uids, self.run_id, f"{self.tag}-poison-%"),
            )
            log(
                f"cleanup: took down {len(uids)} articles of run {self.run_id} (site, Typesense; removed in "
                "PostgreSQL, deleted by the next run)"
            )
        except Exception as exc:
            log(f"cleanup: removing the run's articles failed: {exc}")

    def purge_previous(self) -> None:
        """Delete what earlier fault runs left: their (removed) articles, outbox rows, dead letters."""
        try:
            rows = self.db.query(
                "SELECT unique_id FROM news WHERE title ~ %s AND removed_at IS NOT NULL"
                " AND removed_at < now() - interval '10 minutes'",
                (RUN_TITLE,),
            )
            uids = [r[0] for r in rows]
            if uids:
                self.db.query("DELETE FROM outbox WHERE aggregate_id = ANY(%s) RETURNING 1", (uids,))
                self.db.query("DELETE FROM news WHERE unique_id = ANY(%s) RETURNING 1", (uids,))
            gone = self.db.query(
                "DELETE FROM dead_letters d WHERE (d.unique_id ~ %s OR d.attributes ? 'dgb_fault_run')"
                " AND d.last_seen < now() - interval '10 minutes'"
                " AND NOT EXISTS (SELECT 1 FROM news n WHERE n.unique_id = d.unique_id) RETURNING 1",
                (RUN_UID,),
            )
            if uids or gone:
                log(f"purged {len(uids)} articles and {len(gone)} dead letters of earlier fault runs")
        except Exception as exc:
            log(f"purging earlier runs failed: {exc}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="reduced run for CI (~44 articles, shorter outages)")
    p.add_argument("--articles", type=int, help="articles in total (default 500; --quick 44)")
    p.add_argument(
        "--only",
        type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
        help=f"only these faults (comma-separated): {', '.join(FAULTS)}",
    )
    p.add_argument("--keep", action="store_true", help="leave the run's articles in place")
    p.add_argument(
        "--outage-s",
        type=float,
        help=f"length of each long outage (default {OUTAGE_S:.0f}; --quick: the stage retry budget + margin)",
    )
    p.add_argument(
        "--bedrock-classifier",
        choices=("bedrock", "hybrid"),
        default="bedrock",
        help="DGB_CLASSIFIER during bedrock_throttle (hybrid: threshold 1.0, every article routed)",
    )
    args = p.parse_args(argv)
    if args.only and set(args.only) - set(FAULTS):
        p.error(f"unknown faults {sorted(set(args.only) - set(FAULTS))}")

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    run = Run(args)
    t0 = time.monotonic()
    code = 2
    try:
        code = run.run()
    except KeyboardInterrupt as exc:
        log(f"interrupted ({exc}); restoring the stack")
        code = 130
    except Exception as exc:
        import traceback

        traceback.print_exc()
        log(f"failed: {exc}; restoring the stack")
        if run.batches:
            try:
                run.report()
            except Exception:
                pass
        code = 2
    finally:
        run.cleanup()
        log(f"done in {time.monotonic() - t0:.0f}s")
    return code


if __name__ == "__main__":
    sys.exit(main())
