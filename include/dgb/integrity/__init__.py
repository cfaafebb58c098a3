"""Integrity service: keep re-checking scraped news (images, changed or removed content, with a
history of changes), most often while it is fresh.

* :mod:`.policy`  - the SSRF guard, re-exported from :mod:`dgb.urlpolicy` (its one home, used by every fetch);
* :mod:`.tiers`   - the budget scheduler (what a run checks within a request budget, by expected
  value), age tiers and check intervals (tiers or exponential decay), the due set, age bands;
* :mod:`.checks`  - image check (HEAD, GET+Range fallback) and content check (conditional GET,
  then the scraper's own parser, compared field by field);
* :mod:`.service` - one article's full check, a budget run and a tier run, the system-load
  decision, state/flags/history/outbox;
* :mod:`.report`  - per-agency, per-tier and per-age-band metrics (SQL views of migration 0003);
* :mod:`.cli`     - ``dgb url-policy``, ``dgb integrity-check``, ``dgb integrity-report``;
* :mod:`.dags`    - the DAG ids and specs (no Airflow import).
"""
