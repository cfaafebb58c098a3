"""dgb_dev: development tooling of dgb-pipeline, installed in the local venv only.

Not part of what ships: the Astro image (.dockerignore) and the Composer upload
(scripts/deploy_composer.py copies include/dgb alone) carry no ``dgb_dev``. It may import ``dgb``;
``dgb`` never imports it (tests/unit/test_architecture.py).

- :mod:`dgb_dev.stack`: the local stack runner (``make up/down/status/test/airflow``).
- :mod:`dgb_dev.mirror`: the local gov.br-like site the offline stack and the tests scrape.
"""
