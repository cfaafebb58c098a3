"""Chaos runs judged from outside the pipeline (issue 39): the oracle that compares the local site's
journal with what a reader gets from Typesense (:mod:`.oracle`) and a counter of the events the
pipeline published (:mod:`.event_counter`), and the load: real news published, edited, moved and
removed on the site in bursts at 10x production's rate (:mod:`.load`, its texts :mod:`.realtext`)."""
