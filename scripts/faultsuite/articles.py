"""The article batches: each fault's uniquely identified articles, published on the local gov.br
site (control API ``POST /_control/publish``) of its own agency, its ``scrape_<agency>`` DAG
triggered through the Airflow REST API (the CLI when the API cannot be reached), and their unique
ids once scraped."""

from __future__ import annotations

import json
import threading
import time
from datetime import date, timedelta

from dgb import topology
from dgb_dev import stack
from dgb_dev.stack import airflow_rest

from .catalogue import Batch
from .context import Context
from .plumbing import Timeout, http_json, log, wait_for

TRIGGER_TRIES = 3
TRIGGER_PAUSE_S = 5.0

# gov.br agencies the batches go to first (any other single-agency scrape DAG after them)
PREFERRED_AGENCIES = (
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


class Articles:
    """The run's batches, one per fault, and what is known of their articles."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.batches: list[Batch] = []

    def agencies(self) -> list[str]:
        from dgb.scraper.dags import EBC_DAG_ID, scrape_specs

        keys = [
            s.agency_key
            for s in scrape_specs(self.ctx.s)
            if len(s.agency_keys) == 1 and s.dag_id != EBC_DAG_ID
        ]
        if len(keys) < 1:
            raise SystemExit("faults: no scrape DAG of a gov.br agency on this stack")
        preferred = [k for k in PREFERRED_AGENCIES if k in keys]
        return preferred + [k for k in keys if k not in preferred]

    def first_queued(self, agencies: list[str]) -> str | None:
        """Of ``agencies``, the one whose scheduled scrape run comes first in Airflow's queue and
        has not started to scrape; None before there is one (or Airflow's database).

        A fresh stack's scheduler creates, as soon as the DAGs are parsed, one run per scrape DAG
        (each schedule's latest tick), and the scrape pool (4 slots) takes them by logical date,
        each scraping the local site's pages under the shared host budget: ~100 s for all. A
        manual run waits behind its DAG's scheduled run (max_active_runs=1), which waits for a
        slot: the first fault's batch waited 83 s for its scraped events. Published before its
        DAG's scheduled run reads the listing, the batch is scraped by that run, in its turn."""
        by_dag = {"scrape_" + a.replace("-", "_"): a for a in agencies}
        try:
            rows = self.ctx.af.query(
                "SELECT dr.dag_id FROM dag_run dr WHERE dr.run_type = 'scheduled'"
                " AND dr.state IN ('queued', 'running') AND dr.dag_id = ANY(%s)"
                " AND NOT EXISTS (SELECT 1 FROM task_instance ti WHERE ti.dag_id = dr.dag_id"
                " AND ti.run_id = dr.run_id AND ti.start_date IS NOT NULL)"
                " ORDER BY dr.logical_date, dr.dag_id LIMIT 1",
                (list(by_dag),),
            )
        except Exception:
            return None  # Airflow's database not migrated yet
        return by_dag[rows[0][0]] if rows else None

    def publish(self, batch: Batch, n: int, start: int) -> None:
        tag, run_id = self.ctx.tag, self.ctx.run_id
        for k in range(n):
            title, body = THEMES[(start + k) % len(THEMES)]
            t = f"{title} ({tag} n{start + k:03d})"
            art = {
                "agency": batch.agency,
                "title": t,
                "subtitle": f"Teste de falhas {run_id}",
                "category": "Notícias",
                "tags": ["teste", tag],
                "content": f"{body}\n\n{title}. Artigo {start + k} da execução {run_id} do teste de "
                "falhas do pipeline, publicado no site local.\n\nMais informações no portal gov.br.",
            }
            resp = http_json(f"{self.ctx.s.mirror_url}/_control/publish", art)
            batch.titles.append(t)
            batch.slugs.append(resp["slug"])
        batch.published_at = time.monotonic()

    def trigger_scrape(self, batch: Batch) -> threading.Thread:
        """A manual run of the batch's scrape DAG, in a thread: through the api-server's REST API
        (milliseconds), or the ``airflow dags trigger`` CLI (5-10 s of Python start-up) when the
        API cannot be reached; the log line says which."""
        dag_id = "scrape_" + batch.agency.replace("-", "_")
        conf = {}
        if len(batch.titles) > 80:  # a regular run reads 3 listing pages; walk back instead
            conf = {"start_date": (date.today() - timedelta(days=1)).isoformat()}
        th = threading.Thread(target=trigger_dag_run, args=(self.ctx.s, dag_id, conf), daemon=True)
        th.start()
        return th

    def refresh_uids(self) -> None:
        rows = self.ctx.db.query(
            "SELECT title, unique_id FROM news WHERE title LIKE %s", (f"%{self.ctx.tag}%",)
        )
        by_title = dict(rows)
        for b in self.batches:
            for t in b.titles:
                if t in by_title:
                    b.uids[t] = by_title[t]

    def all_uids(self) -> list[str]:
        return [u for b in self.batches for u in b.uids.values()]

    def events_published(self, batch: Batch) -> bool:
        self.refresh_uids()
        if len(batch.uids) < len(batch.titles):
            return False
        n = self.ctx.db.query(
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
                150 if self.ctx.quick else 400,
                f"{batch.fault}: scraped events of the batch published",
                every=0.5,
            )
        except Timeout as exc:
            batch.note = "injected_before_publish"
            log(str(exc))


def trigger_dag_run(settings, dag_id: str, conf: dict, sleep=time.sleep) -> str | None:
    """Trigger ``dag_id`` (TRIGGER_TRIES tries): the REST API, else the CLI when the API cannot be
    reached. Returns how it was triggered ("api", "cli"), or None when every try failed."""
    for _attempt in range(TRIGGER_TRIES):
        try:
            run_id = airflow_rest.trigger_dag_run(settings, dag_id, conf)
            log(f"triggered {dag_id} through the REST API ({run_id})")
            return "api"
        except airflow_rest.ApiUnreachable as exc:
            log(f"trigger {dag_id}: REST API unreachable ({exc}); using the airflow CLI")
            argv = ["dags", "trigger", dag_id] + (["-c", json.dumps(conf)] if conf else [])
            try:
                res = stack.airflow_cli(settings, argv, check=False, capture=True)
                if res.returncode == 0:
                    log(f"triggered {dag_id} through the airflow CLI")
                    return "cli"
                log(f"trigger {dag_id} failed (exit {res.returncode}): {(res.stderr or '')[-300:]}")
            except Exception as cli_exc:
                log(f"trigger {dag_id} failed: {cli_exc}")
        except Exception as exc:
            log(f"trigger {dag_id} failed: {exc}")
        sleep(TRIGGER_PAUSE_S)
    log(f"trigger {dag_id} gave up; the schedule (every 10 min) or reconciliation will catch up")
    return None
