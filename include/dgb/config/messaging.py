"""Settings of the messaging layer: the transactional outbox and the Pub/Sub project of deploy tools."""

from __future__ import annotations

from dgb.config import env_number, env_str

OUTBOX_RETENTION_ENV = "DGB_OUTBOX_RETENTION_DAYS"
OUTBOX_RETENTION_DAYS_DEFAULT = 7.0


def outbox_retention_days() -> float:
    """``DGB_OUTBOX_RETENTION_DAYS`` (default 7): published outbox rows older than this are purged;
    0 keeps them forever."""
    return env_number(OUTBOX_RETENTION_ENV, OUTBOX_RETENTION_DAYS_DEFAULT, minimum=0.0)


def explicit_gcp_project() -> str | None:
    """``DGB_GCP_PROJECT`` as the operator set it, or None: deploy tools that render production
    artefacts require a real project and must not fall back to the local default."""
    return env_str("DGB_GCP_PROJECT", "") or None
