#!/usr/bin/env python
"""Embedding throughput: sentences/s at batch sizes 1, 8, 32, 64, in-process and through the
model service (started here on a free loopback port, stopped at the end), plus the service's
memory. Prints numbers only.

    .venv/bin/python scripts/bench_embed.py [--model NAME] [--sentences N] [--words W]

Sentences are ~W-word Portuguese passages cut from the bundled test corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from dgb.config import settings
from dgb.config.embed import model_threads

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"
BATCH_SIZES = (1, 8, 32, 64)


def sentences(n: int, words: int) -> list[str]:
    pool = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        article = json.loads(line)
        tokens = f"{article['title']} {article.get('subtitle', '')} {article['content']}".split()
        pool.extend(" ".join(tokens[i : i + words]) for i in range(0, len(tokens) - words + 1, words))
    return [pool[i % len(pool)] for i in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> tuple[float, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def rate(encode_batch, texts: list[str], batch: int) -> float:
    encode_batch(texts[:batch])  # warm-up
    t0 = time.perf_counter()
    for start in range(0, len(texts), batch):
        encode_batch(texts[start : start + batch])
    return len(texts) / (time.perf_counter() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=settings().embedding_model)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--words", type=int, default=69)
    args = parser.parse_args()
    texts = sentences(args.sentences, args.words)
    threads = model_threads()
    print(
        f"model={args.model} sentences={len(texts)} words_per_sentence={args.words} "
        f"threads={threads} cpus={os.cpu_count()}"
    )

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    token = secrets.token_urlsafe(24)  # this run's service token (dgb.embed.auth, DGB_MODEL_AUTH=token)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dgb.cli",
            "model",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--model",
            args.model,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        cwd=str(REPO),
        env=dict(os.environ, DGB_MODEL_AUTH="token", DGB_MODEL_TOKEN=token),
        start_new_session=True,
    )
    t_spawn = time.perf_counter()
    try:
        import httpx

        # wait for the service first, so its start-up does not compete with the in-process runs
        client = httpx.Client(
            base_url=url, timeout=120, trust_env=False, headers={"Authorization": f"Bearer {token}"}
        )
        while True:
            if proc.poll() is not None:
                print("service exited during start-up", file=sys.stderr)
                return 1
            try:
                if client.get("/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        print(f"service ready_s={time.perf_counter() - t_spawn:.1f}")
        rss, _ = rss_mb(proc.pid)
        print(f"service rss_mb_idle={rss:.0f}")

        from dgb.embed.model import load_model

        t0 = time.perf_counter()
        model = load_model(args.model)
        print(f"in-process load_s={time.perf_counter() - t0:.1f} dim={model.dim}")
        for batch in BATCH_SIZES:
            per_s = rate(lambda b, batch=batch: model.encode(b, batch_size=batch), texts, batch)
            print(f"in-process batch={batch} sent_per_s={per_s:.1f}")
        own, own_peak = rss_mb(os.getpid())
        print(f"in-process rss_mb={own:.0f} peak_rss_mb={own_peak:.0f}")

        def via_service(batch_texts: list[str], batch: int) -> None:
            resp = client.post("/embed", json={"texts": batch_texts, "batch_size": batch})
            resp.raise_for_status()

        for batch in BATCH_SIZES:
            per_s = rate(lambda b, batch=batch: via_service(b, batch), texts, batch)
            print(f"service batch={batch} sent_per_s={per_s:.1f}")
        rss, peak = rss_mb(proc.pid)
        print(f"service rss_mb={rss:.0f} peak_rss_mb={peak:.0f}")
        client.close()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
