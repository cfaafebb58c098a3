#!/usr/bin/env python
"""Fault injection on the real local stack: nothing lost, duplicated or dead-lettered; time to recover.

    .venv/bin/python scripts/faults.py [--quick] [--articles N] [--only F1,F2] [--keep]
                                       [--outage-s S] [--bedrock-classifier bedrock|hybrid]
    make faults [QUICK=1] [ARGS="--only typesense_down"]

Uses the running local stack (``make up``) or starts it. For each fault, one at a time, a batch of
uniquely identified articles (titles carry the run id) is published on the local gov.br site
(control API ``POST /_control/publish``) of its own agency, ``scrape_<agency>`` is triggered through
the Airflow REST API (the CLI if the API cannot be reached), and while the batch is on its way
scrape -> enrich -> embed -> index the fault is injected:

* ``kill_triggerer``  kill -9 of the triggerer (just as the batch's events are pulled), restarted
* ``kill_scheduler``  kill -9 of the scheduler's process group (its LocalExecutor workers too), restarted
* ``kill_task``       kill -9 of a running stage task process (enrich/embed/index; else the scrape)
* ``kill_model``      kill -9 of the embedding model service, restarted
* ``stop_typesense``  Typesense stopped for 60 s (``--quick``: 15 s), started again
* ``restart_emulator`` the Pub/Sub emulator restarted: it keeps no state, so in-flight messages
                       are LOST (the topology is re-applied at once, as ``make up`` does); this is
                       exactly what reconciliation must repair
* ``restart_postgres`` ``pg_ctlcluster <ver> <name> restart``

then the long outages, each while a batch is in flight, each 10 min. ``--quick``: for Typesense,
the model service and Bedrock, until the batch has spent a stage task's whole Airflow retry budget
(a stage task failed its last try, or every article of the batch failed as many tries as a stage
task has, ``news.attempts``, or was dead-lettered; the retries come from the scheduler's serialized
stage DAGs) or the dependency's circuit breaker holds the work (open at its longest cool-down, and a
stage run started after that ended deferring it: every later run does the same until the
dependency is back); checked from 60 s on, at most 5 min. The emulator's: 90 s, since no stage task
fails on it (events wait in the outbox): three times the Pub/Sub trigger's pull backoff
cap. ``--outage-s`` sets a fixed length for both modes.

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

A component found running again during its outage (started by something else: another session's
test fixtures on a shared machine) is stopped again at once (``restarted_elsewhere=<n>`` in the note).

The faults' settings (model_down: ``DGB_EMBEDDER=service``; bedrock_throttle: the Bedrock fake
behind ``DGB_CLASSIFIER``) reach the stage tasks through the scheduler's environment. The run's
faults' settings together are applied once, before the first batch: a stack that is down is
started with them, a running scheduler is restarted with them once no stage task runs. Every batch
runs on them (what production runs: the model service, Bedrock); the scheduler is restarted with
the stack's own settings at the end (also on failure or Ctrl-C).

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
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the domain and dev packages, and this script's own package (faultsuite) when loaded by path
sys.path[:0] = [str(REPO / "include"), str(REPO / "dev"), str(REPO / "scripts")]

from faultsuite.catalogue import FAULTS, OUTAGE_S  # noqa: E402
from faultsuite.driver import Run  # noqa: E402
from faultsuite.plumbing import log  # noqa: E402


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
