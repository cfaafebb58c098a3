"""`dgb topology`: show, apply and render as Terraform the Pub/Sub topology of :mod:`dgb.topology`.

Apart from the declaration so that :mod:`dgb.deploy.terraform` (which renders the declaration)
and the declaration never import each other.
"""

from __future__ import annotations

import json
import os

from dgb import topology
from dgb.deploy import terraform


def register(sub) -> None:
    p = sub.add_parser("topology", help="Pub/Sub topics, subscriptions and dead-letter topics")
    tsub = p.add_subparsers(dest="topology_command", required=True)
    show = tsub.add_parser("show", help="print the declared topology as JSON")
    show.add_argument("--project", help="GCP project id (default DGB_GCP_PROJECT)")
    show.set_defaults(func=_cmd_show)
    ap = tsub.add_parser(
        "apply",
        help="create/update the topology (emulator when PUBSUB_EMULATOR_HOST "
        "is set, else real GCP with application default credentials)",
    )
    ap.add_argument("--project", help="GCP project id (default DGB_GCP_PROJECT)")
    ap.add_argument("--emulator", action="store_true", help="target the local emulator from settings")
    ap.set_defaults(func=_cmd_apply)
    tf = tsub.add_parser(
        "terraform",
        help="render the topology (and the Pub/Sub service agent's "
        "dead-letter IAM) as Terraform JSON for production",
    )
    terraform.add_arguments(tf)
    tf.set_defaults(func=_cmd_terraform)


def _cmd_show(args) -> int:
    from dgb.config import settings

    print(json.dumps(topology.render(args.project or settings().gcp_project), indent=2))
    return 0


def _cmd_terraform(args) -> int:
    return terraform.run(args)


def _cmd_apply(args) -> int:
    from dgb.config import settings

    s = settings()
    if args.emulator:
        os.environ["PUBSUB_EMULATOR_HOST"] = s.pubsub_emulator_host
    print(json.dumps(topology.apply(args.project or s.gcp_project)))
    return 0
