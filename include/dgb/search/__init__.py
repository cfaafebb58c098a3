"""Search index (Typesense): schema, client construction and document building."""
