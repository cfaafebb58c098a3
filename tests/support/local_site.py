"""The local gov.br site (dgb_dev.mirror) serving a small article list on a free loopback port."""

from __future__ import annotations

import json

from .articles import article_dict


def start_site(articles, folder, **site_options):
    """Serve ``articles`` ((agency, slug, title, published) tuples) on a free loopback port;
    ``site_options``: more arguments of ``Site`` (``journal_base=True``)."""
    from dgb_dev.mirror import Site, start_in_thread  # the dev package: absent in the Astro image

    corpus = folder / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(article_dict(*a), ensure_ascii=False) for a in articles) + "\n")
    site = Site(corpus, extra_dir=None, **site_options)
    server, base = start_in_thread(site)
    return site, server, base
