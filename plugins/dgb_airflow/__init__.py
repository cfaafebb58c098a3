"""Airflow extensions of dgb-pipeline: hooks, triggers, operators and the UI plugin."""
