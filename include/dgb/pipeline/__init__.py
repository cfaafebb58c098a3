"""The event-driven stages (enrich, embed, index), one module per job.

* ``definitions``: each stage defined once (ready, done, pending, sweep; the searchable rule);
* ``stage``: the stage contract (``Stage``, ``Failure``); ``stages``: the three stages and their
  registry;
* ``runner``: the one consume -> process -> publish mechanism (``run_stage``, ``keep_sweeping``),
  with ``messages`` (what a run works on), ``chunks`` (one chunk: bisection, triage, commit),
  ``failures`` (holds, parking, dead letters and their clearing) and ``report``;
* ``resilience``: the transient/permanent decision and the circuit breakers;
* ``dags``: the stage DAG specs.

``dgb status`` and the UI's pipeline view observe it from :mod:`dgb.observe`.
"""
