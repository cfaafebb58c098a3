"""Sensors of the dgb DAGs (deferrable: they wait in the triggerer, not in a worker slot)."""
