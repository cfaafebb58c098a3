"""One home for configuration: every setting is an environment variable with a default.

Every ``DGB_*`` variable is read in this package and nowhere else: the connection settings here
(:class:`Settings`), each domain's own settings in a submodule beside it (``dgb.config.<domain>``),
all through the three parsers below (:func:`env_str`, :func:`env_number`, :func:`env_flag`).

Ports and paths are all here so that two checkouts can run side by side by exporting a
different DGB_PORT_BASE (or individual ports) and DGB_STATE_DIR. Nothing in this module
does I/O at import time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def env_str(name: str, default: str) -> str:
    """A text setting: ``default`` when unset or empty."""
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def only_set(**values):
    """The keyword arguments whose setting is set (not None): a policy class keeps its defaults
    in its own fields, and its ``from_env`` passes on only what the operator set."""
    return {name: value for name, value in values.items() if value is not None}


def read_env_file(path: Path) -> dict[str, str]:
    """Parse a KEY=VALUE file (the generated secrets file); missing file -> {}."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    out = {}
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def env_number(
    name: str,
    default,
    *,
    integer: bool = False,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
):
    """A numeric setting: ``default`` when unset or empty, else the parsed value, range-checked.

    The one home for reading numbers from the environment (ports, integrity thresholds, ratios):
    a bad value is a ``ValueError`` naming the variable, the rule and what it got.
    """
    raw = env_str(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be {'an integer' if integer else 'a number'}, got {raw!r}") from exc
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {raw!r}")
    if above is not None and value <= above:
        raise ValueError(f"{name} must be > {above}, got {raw!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {raw!r}")
    return value


def _int(name: str, default: int) -> int:
    return env_number(name, default, integer=True)


def env_flag(name: str, default: bool) -> bool:
    """An on/off setting: ``default`` when unset or empty; 1/true/yes/on or 0/false/no/off (any
    case), anything else a ``ValueError`` naming the variable. The one flag parser."""
    raw = env_str(name, "1" if default else "0").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def _fraction(name: str) -> float | None:
    """An optional number between 0 and 1 (unset or empty: None)."""
    return env_number(name, None, minimum=0.0, maximum=1.0)


@dataclass(frozen=True)
class Settings:
    """Resolved settings. Build with ``Settings.from_env()``; see README's configuration table."""

    state_dir: Path
    # PostgreSQL
    pg_host: str
    pg_port: int
    pg_user: str
    pg_password: str
    pg_db: str
    pg_airflow_db: str
    pg_manage_cluster: bool
    # Pub/Sub
    gcp_project: str
    pubsub_host: str
    pubsub_port: int
    # Typesense
    typesense_host: str
    typesense_port: int
    typesense_peering_port: int
    typesense_api_key: str
    typesense_collection: str
    # Airflow
    airflow_port: int
    # Local gov.br-like site and the model service
    mirror_port: int
    model_port: int
    source_mode: str  # "mirror" (default, offline) or "live" (real gov.br)
    # Embeddings
    embedding_model: str
    embedding_dim: int
    classifier_backend: str  # "local" (default), "bedrock" or "hybrid"
    extra: dict = field(default_factory=dict)
    # hybrid: local confidence below this goes to Bedrock (None: the trained head's own threshold)
    hybrid_threshold: float | None = None

    @classmethod
    def from_env(cls) -> Settings:
        base = _int("DGB_PORT_BASE", 0)  # optional offset added to every default port
        state_dir = Path(env_str("DGB_STATE_DIR", str(REPO_ROOT / ".state"))).resolve()
        # Locally generated secrets (written by `make up`); real env vars win.
        secrets = read_env_file(state_dir / "secrets.env")
        source_mode = env_str("DGB_SOURCE_MODE", "mirror")
        if source_mode not in ("mirror", "live"):
            raise ValueError(f"DGB_SOURCE_MODE must be 'mirror' or 'live', got {source_mode!r}")
        backend = env_str("DGB_CLASSIFIER", "local")
        if backend not in ("local", "bedrock", "hybrid"):
            raise ValueError(f"DGB_CLASSIFIER must be 'local', 'bedrock' or 'hybrid', got {backend!r}")
        hybrid_threshold = _fraction("DGB_HYBRID_THRESHOLD")
        return cls(
            state_dir=state_dir,
            pg_host=env_str("DGB_PG_HOST", "127.0.0.1"),
            pg_port=_int("DGB_PG_PORT", 5432),
            pg_user=env_str("DGB_PG_USER", "dgb"),
            pg_password=env_str("DGB_PG_PASSWORD", secrets.get("DGB_PG_PASSWORD", "")),
            pg_db=env_str("DGB_PG_DB", "dgb"),
            pg_airflow_db=env_str("DGB_PG_AIRFLOW_DB", "dgb_airflow"),
            pg_manage_cluster=env_flag("DGB_PG_MANAGE_CLUSTER", True),
            gcp_project=env_str("DGB_GCP_PROJECT", "local-dgb"),
            pubsub_host=env_str("DGB_PUBSUB_HOST", "127.0.0.1"),
            pubsub_port=_int("DGB_PUBSUB_PORT", 8085 + base),
            typesense_host=env_str("DGB_TYPESENSE_HOST", "127.0.0.1"),
            typesense_port=_int("DGB_TYPESENSE_PORT", 8108 + base),
            typesense_peering_port=_int("DGB_TYPESENSE_PEERING_PORT", 8107 + base),
            typesense_api_key=env_str("DGB_TYPESENSE_API_KEY", secrets.get("DGB_TYPESENSE_API_KEY", "")),
            typesense_collection=env_str("DGB_TYPESENSE_COLLECTION", "news"),
            airflow_port=_int("DGB_AIRFLOW_PORT", 8080 + base),
            mirror_port=_int("DGB_MIRROR_PORT", 8090 + base),
            model_port=_int("DGB_MODEL_PORT", 8091 + base),
            source_mode=source_mode,
            embedding_model=env_str("DGB_EMBEDDING_MODEL", "use-multilingual-v3"),
            embedding_dim=_int("DGB_EMBEDDING_DIM", 512),
            classifier_backend=backend,
            hybrid_threshold=hybrid_threshold,
        )

    # -- derived values -------------------------------------------------------------
    @property
    def pubsub_emulator_host(self) -> str:
        return f"{self.pubsub_host}:{self.pubsub_port}"

    @property
    def mirror_url(self) -> str:
        return env_str("DGB_MIRROR_URL", f"http://127.0.0.1:{self.mirror_port}")

    @property
    def model_url(self) -> str:
        return env_str("DGB_MODEL_URL", f"http://127.0.0.1:{self.model_port}")

    def pg_dsn(self, db: str | None = None) -> str:
        return (
            f"postgresql://{self.pg_user}:{self.pg_password}@{self.pg_host}:{self.pg_port}/{db or self.pg_db}"
        )


def settings() -> Settings:
    """Settings as of the current environment (re-read each call; cheap)."""
    return Settings.from_env()
