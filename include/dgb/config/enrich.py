"""The classifiers' own settings (Amazon Bedrock's ``DGB_BEDROCK_*``, ``DGB_AWS_CONN_ID``): read
here and nowhere else.

The backend choice (``DGB_CLASSIFIER``) and the hybrid threshold (``DGB_HYBRID_THRESHOLD``) are
connection-level settings of :class:`dgb.config.Settings`. Each function reads its variable when
called, so :class:`dgb.enrich.bedrock.BedrockClassifier` reads only what its arguments leave open.
"""

from __future__ import annotations

from dgb.config import env_number, env_str


def bedrock_model_id(default: str) -> str:
    """``DGB_BEDROCK_MODEL_ID``: the Bedrock model (``default``: the classifier's own)."""
    return env_str("DGB_BEDROCK_MODEL_ID", default)


def bedrock_aws_conn_id(default_conn_id: str = "aws_default") -> str:
    """``DGB_AWS_CONN_ID``: the Airflow AWS connection Bedrock is reached through."""
    return env_str("DGB_AWS_CONN_ID", default_conn_id)


def bedrock_region() -> str | None:
    """``DGB_BEDROCK_REGION``: the Bedrock region (None: the connection's own)."""
    return env_str("DGB_BEDROCK_REGION", "") or None


def bedrock_concurrency() -> int:
    """``DGB_BEDROCK_CONCURRENCY``: parallel Bedrock calls per task (an integer, default 1; the
    classifier makes at least one)."""
    return env_number("DGB_BEDROCK_CONCURRENCY", 1, integer=True)
