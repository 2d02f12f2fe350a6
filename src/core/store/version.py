"""The app store's schema version, apart from the table definitions so a reader can check it
without importing SQLAlchemy (`quick_reads.py`); `schema.py` re-exports it."""

SCHEMA_VERSION = 6  # 6: the agent platform tables (schema.py, issue 35)
