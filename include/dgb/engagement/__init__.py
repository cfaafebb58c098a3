"""Portal engagement figures, computed on a schedule and kept current in the index.

* ``trending``: production's ``trending_score`` (the article's level-1 theme: articles in the 24 h
  before it ÷ the theme's daily average over the 7 days before it), computed in PostgreSQL;
* ``views``: production's ``view_count`` / ``unique_sessions`` (pageviews of ``/artigos/<id>``
  over the last 30 days), imported from an Umami analytics database;
* ``formula``: the trending formula in Python (the definition the SQL is tested against);
* ``runs``: the run records (``engagement_runs``) and the push of changed figures to Typesense;
* ``dags``: the DAG ids (a spec: standard library only).

Both write their keys into ``news_features`` (merged, ``features || new``) and push every changed
value to Typesense in the same run as partial updates (:mod:`dgb.search.partial`).
"""
