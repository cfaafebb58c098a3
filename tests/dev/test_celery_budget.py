"""The host budget holds across two Celery workers on a real broker (the stack runner's Redis
component, Debian's redis-server): tasks on both workers fetch one loopback host at once; the
server's records and the database's grant times stay within the budget."""

from __future__ import annotations

import gc
import itertools
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from dgb_dev.stack.broker import Redis
from tests.support.processes import stop_process_group
from tests.support.recorder import Recorder

pytestmark = pytest.mark.stack

HERE = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis(pg_server, tmp_path, monkeypatch):
    if not (shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin:/usr/sbin")):
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run tries to)")
    monkeypatch.setenv("DGB_REDIS_PORT", str(_free_port()))
    monkeypatch.setenv("DGB_REDIS_PASSWORD", secrets.token_urlsafe(12))
    comp = Redis(replace(pg_server, state_dir=tmp_path))
    comp.up()
    yield f"redis://:{os.environ['DGB_REDIS_PASSWORD']}@127.0.0.1:{comp.port}/0"
    comp.down()


@pytest.fixture
def workers(redis, tmp_path):
    env = dict(os.environ, DGB_TEST_CELERY_BROKER=redis)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    procs = []
    for i in (1, 2):
        log = open(tmp_path / f"worker{i}.log", "wb")  # noqa: SIM115 - closed below
        procs.append(
            (
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "celery_budget_app",
                        "worker",
                        "-Q",
                        f"q{i}",
                        "-n",
                        f"w{i}@%h",
                        "-c",
                        "2",
                        "--without-mingle",
                        "--without-gossip",
                        "-l",
                        "warning",
                    ],
                    env={**env, "DGB_TEST_WORKER": f"w{i}"},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                ),
                log,
            )
        )
    sys.path.insert(0, str(HERE))
    os.environ["DGB_TEST_CELERY_BROKER"] = redis
    import celery_budget_app

    app = celery_budget_app.app
    app.conf.broker_url = app.conf.result_backend = redis
    deadline = time.monotonic() + 90
    while len(app.control.ping(timeout=1.0)) < 2:
        assert time.monotonic() < deadline, [
            (tmp_path / f"worker{i}.log").read_text()[-2000:] for i in (1, 2)
        ]
        assert all(p.poll() is None for p, _ in procs), "a celery worker exited"
    yield app
    # The test's AsyncResults sit in reference cycles: collected later, each one's finaliser
    # unsubscribes from the result backend, and with Redis gone it retries for minutes (seen: a
    # later test took 134 s). Collect them now, while Redis still answers.
    gc.collect()
    for proc, log in procs:
        stop_process_group(proc)
        log.close()
    sys.path.remove(str(HERE))
    os.environ.pop("DGB_TEST_CELERY_BROKER", None)


def test_budget_holds_across_two_celery_workers(pg, workers):
    rps, cap, tasks_per_worker, n = 4.0, 2, 4, 4
    srv = Recorder(delay=0.3)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        results = [
            workers.send_task(
                "fetch_many", args=(f"{srv.base}/slow", f"t{q}-{k}", n, rps, cap), queue=f"q{q}"
            )
            for q in (1, 2)
            for k in range(tasks_per_worker)
        ]
        out = [r.get(timeout=120) for r in results]
    finally:
        srv.shutdown()
        srv.server_close()
    total = 2 * tasks_per_worker * n
    assert {o["worker"] for o in out} == {"w1", "w2"}
    assert all(s == 200 for o in out for s in o["statuses"]) and len(srv.hits) == total
    assert srv.max_overlap() <= cap
    assert srv.max_in_window(2.0) <= rps * 2 + 2
    with pg.cursor() as cur:
        cur.execute(
            "SELECT extract(epoch FROM at)::float8 FROM host_grants WHERE host = %s ORDER BY at", (srv.host,)
        )
        grants = [r[0] for r in cur.fetchall()]
    pg.commit()
    gaps = [b - a for a, b in itertools.pairwise(grants)]
    assert len(grants) == total and min(gaps) >= 0.99 / rps
    print(
        f"\ncelery: {total} requests from 2 workers x 2 processes; max in 2 s window {srv.max_in_window(2.0)}"
        f" (budget {rps}/s), max overlap {srv.max_overlap()} (cap {cap}), min grant gap {min(gaps):.3f}s"
    )
