"""Integrity service: keep re-checking scraped news (images, changed or removed content, with a
history of changes), most often while it is fresh.

* :mod:`.tiers`         - the budget scheduler (what a run checks within a request budget, by
  expected value), age tiers and check intervals (tiers or exponential decay), the due set, age bands;
* :mod:`.checks`        - image check (HEAD, GET+Range fallback) and content check (conditional GET,
  then the scraper's own parser, compared field by field);
* :mod:`.evidence`      - removal evidence (the gone streak) and the agency/host breakers;
* :mod:`.signal`        - the change signal of Plone 6 agencies (their search sorted by ``modified``):
  changed articles marked and checked first, unchanged ones skipped, a watermark per agency;
* :mod:`.article_check` - one article's full check (fetch, save a changed page, record);
* :mod:`.moves`         - an article found at another URL (issue 16);
* :mod:`.recording`     - flags, state, the check log and the daily roll-up of one check;
* :mod:`.result`        - the outcomes and what one check found (:class:`.result.CheckResult`);
* :mod:`.backpressure`  - the system-load decision (event pipeline backlog, database load);
* :mod:`.purge`         - trimming old check rows;
* :mod:`.runs`          - a budget run and a tier run;
* :mod:`.report`        - per-agency, per-tier and per-age-band metrics (SQL views of migration 0003);
* :mod:`.cli`           - ``dgb url-policy``, ``dgb integrity-check``, ``dgb integrity-report``;
* :mod:`.dags`          - the DAG ids and specs (no Airflow import).

The URL guard every fetch uses (SSRF) lives in :mod:`dgb.urlpolicy`; settings in
:mod:`dgb.config.integrity`.
"""
