"""The event-driven stages: each defined once (definitions.py), one shared mechanism (stage.py) and the
three stages with their registry (stages.py), `dgb status` (status.py) and the stage DAG specs (dags.py)."""
