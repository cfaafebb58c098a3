"""Shared test helpers: a fast fetch policy and a local gov.br site built from a small article list."""

from __future__ import annotations

import json

from dgb.fetch import FetchPolicy

FAST = FetchPolicy(
    min_interval=0.0,
    retries=2,
    backoff_base=0.05,
    backoff_max=0.2,
    read_timeout=3.0,
    total_timeout=2.0,
    connect_timeout=2.0,
)


def article_dict(agency: str, slug: str, title: str, published: str) -> dict:
    return {
        "agency": agency,
        "url_slug": slug,
        "title": title,
        "published_at": published,
        "subtitle": f"Linha fina de {title.lower()}",
        "category": "Notícias",
        "tags": ["governo", agency],
        "content": f"{title}. Primeiro parágrafo com detalhes do anúncio.\n\n"
        "Segundo parágrafo com números e uma declaração do ministério.",
        "image_url": f"imagens/{slug}.jpg",
    }


def start_site(articles, folder):
    """Serve ``articles`` ((agency, slug, title, published) tuples) on a free loopback port."""
    from dgb_dev.mirror import Site, start_in_thread  # the dev package: absent in the Astro image

    corpus = folder / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(article_dict(*a), ensure_ascii=False) for a in articles) + "\n")
    site = Site(corpus, extra_dir=None)
    server, base = start_in_thread(site)
    return site, server, base


def stop_process_group(proc) -> None:
    """Stop a server started with ``start_new_session=True``: SIGTERM to its group, SIGKILL after 15 s."""
    import os
    import signal
    import subprocess

    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
