"""Article features in production's ``news_features`` layout (one JSONB object per article).

``store`` writes and reads them (keys merged: ``features || new``); the other modules compute
them (reading figures, sentiment, entities) for the enrich stage and the backfill CLI.
"""
