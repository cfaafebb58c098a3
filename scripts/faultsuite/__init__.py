"""The fault-injection suite behind ``scripts/faults.py`` (the entry point and its command line).

Modules, one job each (no module imports one listed after it, except the driver, which wires
them all):

- :mod:`.plumbing`: the progress log, bounded waits, a reconnecting PostgreSQL connection, JSON
  over loopback HTTP;
- :mod:`.catalogue`: the faults, the outage lengths and limits, one fault's :class:`Batch`;
- :mod:`.context`: what the run shares (options, run id, settings, connections, the Bedrock fake);
- :mod:`.articles`: the article batches: published on the local site, scraped, their unique ids;
- :mod:`.components`: the outage helpers: stopping, killing and starting the stack's components,
  and the supervisor that starts any found down;
- :mod:`.airflow_tasks`: running / killed-but-counted pipeline task instances (Airflow vs /proc);
- :mod:`.completion`: the check that a batch arrived end to end (PostgreSQL and Typesense);
- :mod:`.deadletters`: the poison sent, and every sign of a healthy article dead-lettered;
- :mod:`.duplicator`: every event delivered 3 times; :mod:`.reconciler`: the reconcile sweeps;
- :mod:`.budget`: the stage tasks' Airflow retry budget a ``--quick`` outage must outlast;
- :mod:`.scheduler_env`: the faults' settings for the stage tasks (applied once per run);
- :mod:`.outages`: the long outages, held while a batch is in flight;
- :mod:`.upgrade`: the ``upgrade`` fault (the next version deployed mid-batch), its steps shared;
- :mod:`.injectors`: injecting each fault once its batch is in flight;
- :mod:`.report`: the diff (lost, duplicated, dead-lettered, recovery) and the last line;
- :mod:`.takedown`: the run's articles taken down afterwards, earlier runs' leftovers deleted;
- :mod:`.driver`: the phases (:class:`~faultsuite.driver.Run`) and the cleanup.

The chaos runs' faults (scripts/bench_soak.py, scripts/bench_chaos.py), on the same primitives:

- :mod:`.crash`: what a kill -9 leaves to see (``/proc``, a refused loopback port), the postmaster's pid;
- :mod:`.pause`: a process frozen (SIGSTOP) and always continued;
- :mod:`.chaos_catalogue`: the chaos faults, their targets, one injected fault's record;
- :mod:`.chaos_upgrade`: the next version deployed mid-run (reuses :mod:`.upgrade`'s steps);
- :mod:`.chaos`: drawing, injecting and confirming them (``overlap``: two at once).
"""
