"""Deployment helpers: render production artefacts from the declarations the local stack uses.

* :mod:`dgb.deploy.terraform` renders the Pub/Sub topology (:func:`dgb.topology.render`) as
  Terraform JSON, plus the IAM the Pub/Sub service agent needs for dead-lettering.

Stdlib only, no Airflow import, so CI can run it with a bare Python (``PYTHONPATH=include``).
"""
