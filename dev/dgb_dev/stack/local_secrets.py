"""The local stack's generated secrets (``<state_dir>/secrets.env``), made once per checkout."""

from __future__ import annotations

import os
import secrets

from dgb.config import Settings, read_env_file


def ensure_secrets(settings: Settings) -> Settings:
    """Generate local secrets once (DB password, Typesense key, Airflow JWT/Fernet keys, the model
    service's token); a secret added later is generated on the next run, the others kept."""
    path = settings.state_dir / "secrets.env"
    current = read_env_file(path)
    wanted = {
        "DGB_PG_PASSWORD": lambda: secrets.token_urlsafe(18),
        "DGB_TYPESENSE_API_KEY": lambda: secrets.token_urlsafe(24),
        "AIRFLOW__API_AUTH__JWT_SECRET": lambda: secrets.token_urlsafe(64),
        "AIRFLOW__CORE__FERNET_KEY": _fernet_key,
        "DGB_REDIS_PASSWORD": lambda: secrets.token_urlsafe(24),  # the Celery broker (EXECUTOR=celery)
        # the model service's bearer token (DGB_MODEL_AUTH=token): the service, the CLI and the
        # dgb_model_service connection's password
        "DGB_MODEL_TOKEN": lambda: secrets.token_urlsafe(32),
    }
    missing = {k: gen() for k, gen in wanted.items() if k not in current}
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        current.update(missing)
        path.write_text("".join(f"{k}={v}\n" for k, v in current.items()), encoding="utf-8")
        path.chmod(0o600)
    return Settings.from_env()


def _fernet_key() -> str:
    import base64

    return base64.urlsafe_b64encode(os.urandom(32)).decode()
