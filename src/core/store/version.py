"""The app store's schema version, apart from the table definitions so a reader can check it
without importing SQLAlchemy (`quick_reads.py`); `schema.py` re-exports it."""

SCHEMA_VERSION = 9  # 9: ap_renderings, the protocol's stored renderings of ended messages (issue 36); 8: ap_threads.public_id, a per-user thread id space (issue 34); 6: memory namespaces escaped (issue 33); 7: the agent platform tables (issue 35) and the Agent Protocol's ap_threads, ap_runs (made by this step, no longer on first use)
