"""Observing the whole pipeline: what ``dgb status`` prints and the UI's pipeline view draws.

It reads every package's state, so it sits above them (it imports :mod:`dgb.pipeline`,
:mod:`dgb.integrity`, :mod:`dgb.hostbudget`, :mod:`dgb.outbox`; none of them imports it):

* :mod:`.status`   - the current figures: counts, backlog per stage, outbox, holds, breakers,
  commit -> searchable latency, host budgets, paused removals (``dgb status``);
* :mod:`.yields`   - per agency: listing polls, articles and yield beside its cadence, and
  integrity's share of the host budget against the listings' (both);
* :mod:`.overview` - the last hours: backlog and latency history, dead letters by reason, integrity
  per age band (``dgb_airflow.ui.pipeline``);
* :mod:`.cli`      - ``dgb status``.
"""
