"""Commands: ``dgb model serve`` (the resident model service) and ``dgb embed`` (texts on
stdin -> one JSON vector per line on stdout)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator

CHUNK = 256  # texts embedded per round trip by `dgb embed`


def register(subparsers) -> None:
    model = subparsers.add_parser("model", help="the embedding model service")
    model_sub = model.add_subparsers(dest="model_command", metavar="SUBCOMMAND")
    model.set_defaults(func=lambda args: (model.print_help(sys.stderr), 2)[1])

    serve = model_sub.add_parser(
        "serve", help="load the embedding model once and serve it over HTTP (GET /health, POST /embed)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default DGB_MODEL_PORT, 8091)")
    serve.add_argument(
        "--model",
        default=None,
        help="model name or local folder (default DGB_EMBEDDING_MODEL, use-multilingual-v3)",
    )
    serve.add_argument(
        "--dim",
        type=int,
        default=None,
        help="expected dimension, checked at load (default DGB_EMBEDDING_DIM, 512)",
    )
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback address such as 0.0.0.0 (containers; keep DGB_MODEL_AUTH on)",
    )
    serve.set_defaults(func=_serve)

    embed = subparsers.add_parser(
        "embed", help="embed texts from stdin (one per line) and print one JSON vector per line"
    )
    embed.add_argument(
        "--json", action="store_true", help='read JSON lines with a "text" field instead of plain lines'
    )
    embed.add_argument(
        "--embedder",
        choices=("auto", "service", "local"),
        default=None,
        help="where the model runs (default DGB_EMBEDDER or auto: the service if it answers)",
    )
    embed.add_argument("--batch-size", type=int, default=32, help="texts per model call")
    embed.set_defaults(func=_embed)


def _serve(args: argparse.Namespace) -> int:
    from dgb.config import Settings
    from dgb.embed.service import ServiceConfigError, serve

    s = Settings.from_env()
    try:
        return serve(
            args.host,
            args.port if args.port is not None else s.model_port,
            args.model or s.embedding_model,
            args.dim if args.dim is not None else s.embedding_dim,
            allow_remote=args.allow_remote,
        )
    except ServiceConfigError as exc:
        print(f"dgb model serve: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. address already in use
        print(f"dgb model serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1


def _read_texts(stream, as_json: bool) -> Iterator[str]:
    for lineno, line in enumerate(stream, 1):
        line = line.rstrip("\r\n")
        if not as_json:
            yield line
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {lineno}: not JSON ({exc})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise ValueError(f'line {lineno}: expected an object with a string "text" field')
        yield obj["text"]


def _embed(args: argparse.Namespace) -> int:
    from dgb.embed import get_embedder

    embedder = None
    out = sys.stdout
    try:
        chunk: list[str] = []
        texts = _read_texts(sys.stdin, args.json)
        while True:
            chunk.clear()
            for text in texts:
                chunk.append(text)
                if len(chunk) >= CHUNK:
                    break
            if not chunk:
                break
            if embedder is None:
                embedder = get_embedder(prefer=args.embedder)
            for row in embedder.encode(chunk, batch_size=args.batch_size):
                out.write(json.dumps(row.tolist()) + "\n")
            out.flush()
    except ValueError as exc:
        print(f"dgb embed: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"dgb embed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0
