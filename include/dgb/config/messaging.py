"""Settings of the messaging layer: the transactional outbox, the event version producers stamp and
the Pub/Sub project of deploy tools."""

from __future__ import annotations

from dgb.config import env_number, env_str

OUTBOX_RETENTION_ENV = "DGB_OUTBOX_RETENTION_DAYS"
OUTBOX_RETENTION_DAYS_DEFAULT = 7.0
EVENT_MINOR_VERSION_ENV = "DGB_EVENT_MINOR_VERSION"


def outbox_retention_days() -> float:
    """``DGB_OUTBOX_RETENTION_DAYS`` (default 7): published outbox rows older than this are purged;
    0 keeps them forever."""
    return env_number(OUTBOX_RETENTION_ENV, OUTBOX_RETENTION_DAYS_DEFAULT, minimum=0.0)


def explicit_gcp_project() -> str | None:
    """``DGB_GCP_PROJECT`` as the operator set it, or None: deploy tools that render production
    artefacts require a real project and must not fall back to the local default."""
    return env_str("DGB_GCP_PROJECT", "") or None


def event_minor_version() -> int | None:
    """``DGB_EVENT_MINOR_VERSION`` (default unset: the code's own, ``dgb.topology.EVENT_VERSION``):
    the minor version this producer stamps on every event it builds, its major unchanged. A
    rolling upgrade publishes the next minor before every consumer runs the new code (consumers
    take every minor of their major: ``dgb.events.version_supported``)."""
    return env_number(EVENT_MINOR_VERSION_ENV, None, integer=True, minimum=0, maximum=9999)
