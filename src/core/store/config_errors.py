"""Database errors that are really configuration mistakes, in our own words.

A `database_url` naming a PostgreSQL database that does not exist fails at the first
connection, deep inside SQLAlchemy, whose message ends with a "Background on this error"
link. That is not a failure of the run but of the settings: it becomes one `ConfigError`
line naming the database and how to fix it (the CLI exits 2 on it).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ...errors import ConfigError

MISSING_DATABASE = "3D000"  # SQLSTATE invalid_catalog_name


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE anywhere in `exc`'s chain (asyncpg: `sqlstate`; psycopg: `sqlstate`)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if isinstance(code, str):
            return code
        orig = getattr(current, "orig", None)
        current = (
            orig if isinstance(orig, BaseException) else (current.__cause__ or current.__context__)
        )
    return None


def as_config_error(exc: BaseException, url: str | None) -> ConfigError | None:
    """`exc` as a configuration error, when it is one (else None)."""
    if url is None or _sqlstate(exc) != MISSING_DATABASE:
        return None
    parts = urlsplit(url)
    name = parts.path.lstrip("/") or "(none)"
    where = f"{parts.hostname or 'localhost'}:{parts.port or 5432}"
    return ConfigError(
        f"PostgreSQL database '{name}' does not exist on {where}: create it "
        f"(createdb -h {parts.hostname or 'localhost'} {name}) or set database_url "
        "(ARTIFACTFLOW_DATABASE_URL) to an existing database"
    )
