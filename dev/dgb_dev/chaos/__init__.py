"""Chaos runs judged from outside the pipeline (issue 39): the oracle that compares the local site's
journal with what a reader gets from Typesense (:mod:`.oracle`) and a counter of the events the
pipeline published (:mod:`.event_counter`)."""
