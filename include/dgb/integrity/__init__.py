"""Integrity service: keep re-checking scraped news (images, changed or removed content, with a
history of changes), most often while it is fresh.

* :mod:`.policy`  - the SSRF guard, re-exported from :mod:`dgb.urlpolicy` (its one home, used by every fetch);
* :mod:`.tiers`   - age tiers and check intervals (tiers or exponential decay), the due set;
* :mod:`.checks`  - image check (HEAD, GET+Range fallback) and content check (conditional GET,
  then the scraper's own parser, compared field by field);
* :mod:`.service` - one article's full check and a tier run, state/flags/history/outbox;
* :mod:`.report`  - per-agency and per-tier metrics (SQL views of migration 0003);
* :mod:`.cli`     - ``dgb url-policy``, ``dgb integrity-check``, ``dgb integrity-report``;
* :mod:`.dags`    - the tier DAG ids (no Airflow import).
"""
