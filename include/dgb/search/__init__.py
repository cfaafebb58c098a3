"""Search index (Typesense), one module per job.

``schema`` (the collection and the client), ``documents`` (each article's document, built whole
from PostgreSQL), ``sync`` (checked batch upserts and deletes, marks in PostgreSQL), ``rebuild``
(the collection of the current schema behind the alias), ``query`` (keyword, vector and hybrid
search), ``drift`` (the index against PostgreSQL: documents missing, extra or older; lost ones made
pending again) and ``cli`` (``dgb search``, ``dgb search-rebuild``).
"""
