"""The integrity checks' name for the URL guard, kept so existing imports work.

The guard lives in :mod:`dgb.urlpolicy` (one home for every fetch); import it from there.
"""

from dgb.urlpolicy import (  # noqa: F401 - re-exported
    DEFAULT_ALLOWED_HOSTS,
    ENV_ALLOWED_HOSTS,
    Decision,
    UrlPolicy,
    UrlRefused,
    classify,
    current_unique_id,
    guarded_transport,
)
