"""dgb: the domain package of dgb-pipeline (importable without a running Airflow)."""

__version__ = "0.1.0"


def has_module(name: str) -> bool:
    """Whether a (sub)module exists in this checkout, without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False
