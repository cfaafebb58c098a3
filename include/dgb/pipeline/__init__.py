"""The event-driven stages: one shared mechanism (stage.py) and the three stages (stages.py)."""
