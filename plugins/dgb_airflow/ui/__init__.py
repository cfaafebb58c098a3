"""UI extensions (Airflow 3 plugin pages) of dgb-pipeline."""
