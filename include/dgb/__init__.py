"""dgb: the domain package of dgb-pipeline (importable without a running Airflow)."""

__version__ = "0.1.0"
