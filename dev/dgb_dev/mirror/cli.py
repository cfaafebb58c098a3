"""``dgb mirror serve|agencies``: run the local gov.br-like site, list the agencies it serves."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import signal
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from dgb.config import Settings
from dgb_dev.mirror.content import DEFAULT_CORPUS
from dgb_dev.mirror.server import Faults, MirrorServer, start_in_thread, start_ticker
from dgb_dev.mirror.site import Site

__all__ = ["register", "start_in_thread"]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("mirror", help="local gov.br-like site for tests and the offline stack")
    sub = parser.add_subparsers(dest="mirror_command", metavar="ACTION")
    parser.set_defaults(func=lambda args: (parser.print_help(sys.stderr), 2)[1])

    serve = sub.add_parser("serve", help="serve the mirror on a loopback port")
    serve.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default: DGB_MIRROR_PORT, 8090)")
    serve.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="articles JSONL")
    serve.add_argument(
        "--tick",
        type=float,
        default=None,
        metavar="SECONDS",
        help="publish a held-back article and edit one every SECONDS (off by default)",
    )
    serve.add_argument("--seed", type=int, default=0, help="seed of the --tick edits")
    serve.add_argument(
        "--synthetic",
        type=int,
        default=0,
        metavar="N",
        help="also serve N synthetic articles over 5 years for every agency, with edits at known"
        " times (dgb_dev.mirror.synthetic; e.g. 300000)",
    )
    serve.add_argument(
        "--synthetic-end",
        default=None,
        metavar="ISO",
        help="the synthetic corpus's end (ISO 8601, default now): its 5 years lead up to this instant",
    )
    serve.add_argument(
        "--synthetic-extra-days",
        type=float,
        default=0.0,
        metavar="D",
        help="keep publishing synthetic articles at the final rate (~500/day) for D days after the end",
    )
    serve.add_argument(
        "--synthetic-office",
        type=int,
        default=0,
        metavar="N",
        help="the extra days publish as a busy office day instead: at least N new articles in any 60"
        " minutes, by the publication model's agency shares and bursts (PublicationModel.office_hours)",
    )
    serve.add_argument(
        "--faults", type=Path, default=None, metavar="FILE", help="JSON list of startup faults"
    )
    serve.add_argument(
        "--removed-status",
        type=int,
        choices=(404, 410),
        default=404,
        help="status of removed articles (default 404)",
    )
    serve.add_argument(
        "--journal-base",
        action="store_true",
        help="journal every corpus article once at start, besides the changes (the chaos oracle's truth:"
        " GET /_control/journal)",
    )
    serve.add_argument(
        "--base-newest-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="move each agency's corpus in time so its newest article is this old at start"
        " (default: the corpus's own dates)",
    )
    serve.set_defaults(func=_serve)

    agencies = sub.add_parser("agencies", help="print the agency keys the mirror serves")
    agencies.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="articles JSONL")
    agencies.add_argument(
        "--unknown", action="store_true", help="only keys missing from the agency catalogue"
    )
    agencies.set_defaults(func=_agencies)


def _serve(args: argparse.Namespace) -> int:
    if not _loopback(args.host):
        print(
            f"dgb mirror: refusing to serve on non-loopback host {args.host!r}; use 127.0.0.1",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    port = args.port if args.port is not None else Settings.from_env().mirror_port
    try:
        faults = Faults.from_file(args.faults) if args.faults else Faults()
    except (OSError, ValueError) as exc:
        print(f"dgb mirror: bad --faults file {args.faults}: {exc}", file=sys.stderr)
        return 2
    synthetic = None
    if args.synthetic:
        from dgb_dev.mirror.synthetic import SyntheticCorpus

        try:
            end = datetime.fromisoformat(args.synthetic_end) if args.synthetic_end else None
        except ValueError:
            print(f"dgb mirror: --synthetic-end {args.synthetic_end!r} is not ISO 8601", file=sys.stderr)
            return 2
        if end is not None and end.tzinfo is None:
            end = end.replace(tzinfo=UTC)
        synthetic = SyntheticCorpus(
            args.synthetic, end=end, extra_days=args.synthetic_extra_days, office=args.synthetic_office
        )
        logging.info("dgb mirror: synthetic corpus %s", synthetic.summary())
    site = Site(
        args.corpus,
        removed_status=args.removed_status,
        hold_back=0.1 if args.tick else 0.0,
        seed=args.seed,
        synthetic=synthetic,
        journal_base=args.journal_base,
        base_newest_age_s=args.base_newest_age,
    )
    try:
        server = MirrorServer((args.host, port), site, faults)
    except OSError as exc:
        print(f"dgb mirror: cannot listen on {args.host}:{port}: {exc}", file=sys.stderr)
        return 1
    stop_tick = start_ticker(site, args.tick) if args.tick else None
    state = site.state()
    logging.info(
        "dgb mirror on %s: %d articles, %d agencies%s",
        server.base_url,
        state["articles"],
        len(state["agencies"]),
        f", tick every {args.tick}s" if args.tick else "",
    )
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if stop_tick:
            stop_tick.set()
        server.server_close()
    return 0


def _agencies(args: argparse.Namespace) -> int:
    site = Site(args.corpus)
    site.refresh_extra()
    for key in site.unknown_agency_keys() if args.unknown else site.agency_keys():
        print(key)
    return 0
