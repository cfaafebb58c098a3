"""Scrape benchmark on the local gov.br site: parse throughput and where the time goes.

Starts the mirror in-process on a free loopback port with the shipped corpus, then for every
agency it serves walks the listing and fetches + parses every article with the production
fetcher (politeness on: one request at a time per host, DGB_FETCH_MIN_INTERVAL apart) and
parsers. Nothing is stored. Prints pages/s of pure parsing, and the share of wall time spent
waiting on politeness vs on the network vs parsing.

    .venv/bin/python scripts/bench_scrape.py [--min-interval 1.0] [--agencies mec,saude]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / d) for d in ("include", "dev")]

from dgb.agencies import load_agencies  # noqa: E402
from dgb.fetch import Fetcher, FetchPolicy  # noqa: E402
from dgb.scraper.run import _fetch_article, _parse_listing, listing_url  # noqa: E402
from dgb_dev.mirror.server import start_in_thread  # noqa: E402
from dgb_dev.mirror.site import Site  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-interval", type=float, default=1.0, help="politeness interval per host (s)")
    ap.add_argument("--agencies", default="", help="comma-separated keys (default: all the site serves)")
    args = ap.parse_args()
    site = Site(CORPUS, extra_dir=None)
    server, base = start_in_thread(site)
    # the fetcher's URL guard allows the local site as the configured mirror
    os.environ.update(DGB_SOURCE_MODE="mirror", DGB_MIRROR_URL=base)
    catalogue = load_agencies(base_url=base)
    keys = [k for k in (args.agencies.split(",") if args.agencies else site.agency_keys()) if k in catalogue]
    parse_s, pages = 0.0, 0
    t0 = time.monotonic()
    with Fetcher(FetchPolicy(min_interval=args.min_interval)) as fetcher:
        for key in keys:
            agency = catalogue[key]
            url = listing_url(agency)
            while url:
                resp = fetcher.get(url)
                t = time.perf_counter()
                page = _parse_listing(agency, resp)
                parse_s += time.perf_counter() - t
                pages += 1
                for item in page.items:
                    if item.content is None:
                        t = time.perf_counter()
                        # fetch inside, so subtract the fetcher's own time afterwards
                        before = fetcher.stats.request_s + fetcher.stats.polite_wait_s
                        _fetch_article(agency, item, fetcher)
                        spent = time.perf_counter() - t
                        parse_s += spent - (fetcher.stats.request_s + fetcher.stats.polite_wait_s - before)
                    pages += 1
                url = page.next_url
        stats = fetcher.stats
    wall = time.monotonic() - t0
    server.shutdown()
    server.server_close()
    other = max(0.0, wall - stats.polite_wait_s - stats.request_s - parse_s)
    print(
        f"agencies={len(keys)} pages={pages} requests={stats.requests} bytes={stats.bytes} wall_s={wall:.2f}"
    )
    print(f"parse_pages_per_s={pages / parse_s:.1f} (pure parsing, {parse_s:.2f}s)")
    print(
        f"share_polite_wait={stats.polite_wait_s / wall:.3f} share_network={stats.request_s / wall:.3f} "
        f"share_parse={parse_s / wall:.3f} share_other={other / wall:.3f} (min_interval={args.min_interval}s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
