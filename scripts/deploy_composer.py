#!/usr/bin/env python3
"""Deploy dgb-pipeline to a Cloud Composer 3 environment (stdlib only; needs the gcloud CLI).

    python3 scripts/deploy_composer.py --environment ENV --location REGION --project PROJECT \
        [--set KEY=VALUE ...] [--env-file FILE] [--dry-run]
    make deploy-composer ENV=... LOCATION=... PROJECT=... [DRY_RUN=1] [ARGS='--set ...']

Every gcloud command goes to stdout, one per line, in the order it runs (``--dry-run`` prints
them and runs nothing, so its output is a shell script); progress notes go to stderr. The steps:

1. PyPI packages: ``environments update --update-pypi-packages-from-file`` with
   requirements.txt minus what Composer's image already provides or what only the local stack
   needs (see SKIP below; pins are exact, names lowercase as Composer requires).
2. Environment variables: ``--update-env-variables`` with the production DGB_* settings
   (PRODUCTION_ENV, DGB_GCP_PROJECT = --project, plus --set / --env-file, e.g.
   DGB_BEDROCK_MODEL_ID or DGB_MODEL_URL for `dgb embed` runs on a worker).
3. Airflow configuration: connections from Secret Manager (``secrets-backend``).
4. Pools (``environments run ... pools -- set``, idempotent) from dgb.dags_meta.POOLS.
5. Code, into the bucket folders Composer syncs to every Airflow component:
   plugins/ (``storage plugins import``), then into dags/: an ``.airflowignore``, the ``dgb``
   package, then the DAG files (``storage dags import``), so a DAG never lands before what it
   imports.

Why the ``dgb`` package goes into the bucket's ``dags/`` folder: Composer puts ``dags/`` (and
``plugins/``) on every component's ``sys.path``, so ``dags/dgb/`` is importable as ``dgb``
exactly as ``include/`` is locally and on Astro, with its data files (migrations, agency and
taxonomy YAML, model folder) beside the code, and a deploy updates code and data in one step.
A wheel installed as a PyPI package would instead need a package index Composer can reach
(Artifact Registry or another repository) and an environment update, which rebuilds the
environment's image, for every code change. ``.airflowignore`` (``dgb/``) keeps the
DAG processor from parsing the package's modules as DAG files.

Connections are NOT created by this script (they hold secrets): it prints, as comments at the
end, the ``gcloud secrets create`` commands to run once with real values. Composer's own
``google_cloud_default`` already uses the environment's service account.

Re-running is safe: uploads overwrite, and an update that changes nothing ("No change") is
reported and skipped. Files removed from the repository are not removed from the bucket.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# dgb.config (the deploy target's settings) and dgb.dags_meta (the pools): both stdlib only
sys.path.insert(0, str(REPO_ROOT / "include"))

from dgb.config.composer import ComposerTarget  # noqa: E402

DEFAULT_STAGE = REPO_ROOT / "build" / "composer"
PACKAGE = "dgb"
IGNORE_FILE = ".airflowignore"
IGNORE_PATTERNS = ("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", "*.egg-info")

# requirements.txt entries not sent to Composer, and why. (requirements.txt never names Airflow
# itself, the model's packages or the local/test tools: those are in requirements-model.txt and
# requirements-dev.txt, which Composer never gets.)
SKIP = {
    "apache-airflow-providers-google": "preinstalled and pinned by the Composer image",
    "apache-airflow-providers-standard": "preinstalled (part of Airflow 3)",
    "apache-airflow-providers-postgres": "preinstalled by the Composer image",
    "httpx": "an Airflow dependency: the image pins it",
    "python-dateutil": "an Airflow dependency: the image pins it",
    "pyyaml": "an Airflow dependency: the image pins it",
}

# Production settings (docs/configuration.md); --set / --env-file add or override, and
# DGB_GCP_PROJECT is the --project. Tasks reach PostgreSQL, Typesense, the model service and
# Bedrock through connections (Secret Manager), not through DGB_* host settings.
PRODUCTION_ENV = {
    "DGB_SOURCE_MODE": "live",
    "DGB_CLASSIFIER": "bedrock",
    "DGB_EMBEDDER": "service",
    "DGB_EMBEDDING_MODEL": "sentence-transformers/paraphrase-multilingual-mpnet-base-v2",
    "DGB_EMBEDDING_DIM": "768",
    "DGB_TYPESENSE_COLLECTION": "news",
    "DGB_STATE_DIR": "/tmp/dgb-state",
}

SECRETS_BACKEND = "airflow.providers.google.cloud.secrets.secret_manager.CloudSecretManagerBackend"
CONNECTIONS_PREFIX = "airflow-connections"
VARIABLES_PREFIX = "airflow-variables"

# The connections the DAGs use (airflow_settings.yaml has the same ids), with placeholder values.
CONNECTION_PLACEHOLDERS = {
    "dgb_db": {
        "conn_type": "postgres",
        "host": "PLACEHOLDER_PG_HOST",
        "port": 5432,
        "login": "dgb",
        "password": "PLACEHOLDER_PG_PASSWORD",
        "schema": "dgb",
    },
    "typesense_default": {
        "conn_type": "http",
        "host": "PLACEHOLDER_TYPESENSE_HOST",
        "port": 443,
        "schema": "https",
        "password": "PLACEHOLDER_TYPESENSE_API_KEY",
    },
    # the Cloud Run service (deployed --no-allow-unauthenticated): called with a Google ID token
    # for its URL from the environment's service account, which needs roles/run.invoker on it
    "dgb_model_service": {
        "conn_type": "http",
        "host": "PLACEHOLDER_MODEL_SERVICE_HOST",
        "port": 443,
        "schema": "https",
        "extra": {"auth": "google_id"},
    },
    "aws_default": {
        "conn_type": "aws",
        "login": "PLACEHOLDER_AWS_ACCESS_KEY_ID",
        "password": "PLACEHOLDER_AWS_SECRET_ACCESS_KEY",
        "extra": {"region_name": "us-east-1"},
    },
}


class DeployError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"[deploy-composer] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- inputs


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def composer_requirements(requirements: Path = REPO_ROOT / "requirements.txt") -> list[str]:
    """requirements.txt lines for Composer: SKIP removed, names lowercase."""
    out = []
    for raw in requirements.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$", line)
        if not m:
            raise DeployError(f"cannot read requirement {raw!r} in {requirements}")
        name, extras, spec = m.group(1), m.group(2) or "", m.group(3).replace(" ", "")
        if _norm(name) in SKIP:
            continue
        out.append(f"{_norm(name)}{extras.lower()}{spec}")
    return out


def read_env_file(path: Path) -> dict[str, str]:
    env = {}
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise DeployError(f"{path}:{lineno}: expected KEY=VALUE")
        key, _, value = line.partition("=")
        env[key.strip()] = value.strip()
    return env


def production_env(project: str, overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The DGB_* environment Composer gets."""
    env = dict(PRODUCTION_ENV)
    env["DGB_GCP_PROJECT"] = project
    for key, value in (overrides or {}).items():
        if not re.fullmatch(r"DGB_[A-Z0-9_]+", key):
            raise DeployError(
                f"{key}: only DGB_* settings are set here (Airflow settings go in --update-airflow-configs)"
            )
        env[key] = value
    return dict(sorted(env.items()))


def _gcloud_dict(items: dict[str, str]) -> str:
    """KEY=VALUE,... for a gcloud dict flag, with gcloud's alternate-delimiter escape when a
    value holds a comma (`^|^K=V|K2=V2`)."""
    for delim in (",", "|", "#", "@", "~"):
        if not any(delim in k or delim in v for k, v in items.items()):
            joined = delim.join(f"{k}={v}" for k, v in items.items())
            return joined if delim == "," else f"^{delim}^{joined}"
    raise DeployError("cannot find a delimiter for gcloud's dict flag")


# --------------------------------------------------------------------------- staging


def stage(stage_dir: Path, repo: Path = REPO_ROOT) -> dict:
    """Lay out exactly what goes to the bucket under stage_dir (a local, git-ignored folder)."""
    marker = stage_dir / ".dgb-composer-stage"
    if stage_dir.exists() and any(stage_dir.iterdir()):
        if not marker.exists():  # never wipe a folder this script did not create
            raise DeployError(f"--stage-dir {stage_dir} is not empty and not a previous stage folder")
        shutil.rmtree(stage_dir)
    stage_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text("laid out by scripts/deploy_composer.py; deleted and rebuilt on every run\n")
    ignore = shutil.ignore_patterns(*IGNORE_PATTERNS)
    dags, plugins = stage_dir / "dags", stage_dir / "plugins"
    shutil.copytree(repo / "dags", dags, ignore=ignore)
    shutil.copytree(repo / "include" / PACKAGE, dags / PACKAGE, ignore=ignore)
    shutil.copytree(repo / "plugins", plugins, ignore=ignore)
    existing = repo / "dags" / IGNORE_FILE
    lines = existing.read_text(encoding="utf-8").splitlines() if existing.exists() else []
    lines += [
        "# the dgb package (copied here by scripts/deploy_composer.py) holds no DAG files",
        f"{PACKAGE}/",
    ]
    (dags / IGNORE_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    reqs = stage_dir / "requirements-composer.txt"
    reqs.write_text("\n".join(composer_requirements(repo / "requirements.txt")) + "\n", encoding="utf-8")
    dag_entries = sorted(p for p in dags.iterdir() if p.name not in (IGNORE_FILE, PACKAGE))
    return {
        "dags": dags,
        "plugins": plugins,
        "requirements": reqs,
        "plugin_entries": sorted(plugins.iterdir()),
        "dag_entries": [dags / IGNORE_FILE, dags / PACKAGE, *dag_entries],
    }


# --------------------------------------------------------------------------- commands


def commands(
    environment: str, location: str, project: str, env: dict[str, str], staged: dict
) -> list[list[str]]:
    """Every gcloud command of a deploy, in order."""
    where = [f"--location={location}", f"--project={project}"]
    update = ["gcloud", "composer", "environments", "update", environment, *where]
    storage = ["--environment=" + environment, *where]
    kwargs = {
        "project_id": project,
        "connections_prefix": CONNECTIONS_PREFIX,
        "variables_prefix": VARIABLES_PREFIX,
        "sep": "-",
    }
    configs = {"secrets-backend": SECRETS_BACKEND, "secrets-backend_kwargs": json.dumps(kwargs)}
    cmds = [
        [*update, f"--update-pypi-packages-from-file={staged['requirements']}"],
        [*update, f"--update-env-variables={_gcloud_dict(env)}"],
        [*update, f"--update-airflow-configs={_gcloud_dict(configs)}"],
    ]
    from dgb.dags_meta import POOLS

    for pool, (slots, description) in POOLS.items():
        cmds.append(
            [
                "gcloud",
                "composer",
                "environments",
                "run",
                environment,
                *where,
                "pools",
                "--",
                "set",
                pool,
                str(slots),
                description,
            ]
        )
    for entry in staged["plugin_entries"]:
        cmds.append(
            [
                "gcloud",
                "composer",
                "environments",
                "storage",
                "plugins",
                "import",
                *storage,
                f"--source={entry}",
            ]
        )
    for entry in staged["dag_entries"]:
        cmds.append(
            ["gcloud", "composer", "environments", "storage", "dags", "import", *storage, f"--source={entry}"]
        )
    return cmds


def secret_commands(project: str) -> list[str]:
    """Shell lines (not run) that create each connection secret with placeholder values."""
    lines = []
    for conn_id, value in CONNECTION_PLACEHOLDERS.items():
        secret = f"{CONNECTIONS_PREFIX}-{conn_id}"
        lines.append(
            f"printf '%s' {shlex.quote(json.dumps(value))} | gcloud secrets create {secret} "
            f"--project={project} --replication-policy=automatic --data-file=-"
        )
    return lines


def run(cmd: list[str]) -> None:
    is_update = cmd[:4] == ["gcloud", "composer", "environments", "update"]
    res = subprocess.run(cmd, text=True, capture_output=is_update)
    if res.returncode == 0:
        if is_update:
            sys.stderr.write(res.stdout + res.stderr)
        return
    output = (res.stdout or "") + (res.stderr or "")
    if is_update and re.search(r"no change", output, re.IGNORECASE):
        log("unchanged, skipped")
        return
    sys.stderr.write(output)
    raise DeployError(f"command failed (exit {res.returncode}): {shlex.join(cmd)}")


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    target = ComposerTarget.from_env()
    p = argparse.ArgumentParser(prog="deploy_composer.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--environment",
        default=target.environment,
        help="Composer environment name (default DGB_COMPOSER_ENV)",
    )
    p.add_argument(
        "--location",
        default=target.location,
        help="its region, e.g. southamerica-east1 (default DGB_COMPOSER_LOCATION)",
    )
    p.add_argument(
        "--project",
        default=target.project,
        help="GCP project id (default DGB_GCP_PROJECT)",
    )
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a production setting (repeatable), e.g. --set DGB_SCRAPE_AGENCIES=all",
    )
    p.add_argument("--env-file", type=Path, help="more KEY=VALUE settings (DGB_* only), one a line")
    p.add_argument(
        "--stage-dir",
        type=Path,
        default=DEFAULT_STAGE,
        help=f"local folder the upload is laid out in (default {DEFAULT_STAGE})",
    )
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = [
        flag
        for flag, value in (
            ("--environment / DGB_COMPOSER_ENV", args.environment),
            ("--location / DGB_COMPOSER_LOCATION", args.location),
            ("--project / DGB_GCP_PROJECT", args.project),
        )
        if not value
    ]
    if missing:
        print(
            f"deploy_composer: missing {', '.join(missing)} (make deploy-composer ENV=... "
            "LOCATION=... PROJECT=...)",
            file=sys.stderr,
        )
        return 2
    try:
        overrides = read_env_file(args.env_file) if args.env_file else {}
        for item in args.sets:
            key, sep, value = item.partition("=")
            if not sep:
                raise DeployError(f"--set {item!r}: expected KEY=VALUE")
            overrides[key.strip()] = value
        env = production_env(args.project, overrides)
        staged = stage(args.stage_dir.resolve())
        cmds = commands(args.environment, args.location, args.project, env, staged)
    except DeployError as exc:
        print(f"deploy_composer: {exc}", file=sys.stderr)
        return 2
    log(f"staged the upload in {args.stage_dir}; {'dry run: nothing is run' if args.dry_run else 'running'}")
    for cmd in cmds:
        print(shlex.join(cmd), flush=True)
        if not args.dry_run:
            try:
                run(cmd)
            except (DeployError, OSError) as exc:
                print(f"deploy_composer: {exc}", file=sys.stderr)
                return 1
    print("# Connections live in Secret Manager (secrets-backend above). Create each once, with real")
    print("# values instead of the placeholders (then `gcloud secrets versions add` to change one):")
    for line in secret_commands(args.project):
        print(f"# {line}")
    print("# The environment's service account needs roles/secretmanager.secretAccessor on them.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
