"""Database URLs the ledger and stores accept: an async driver whose extra is installed."""

from __future__ import annotations

import importlib
from typing import Annotated

from pydantic import AfterValidator

from pipecat_harness.errors import missing_extra_message

__all__ = ["DatabaseUrl", "OptionalDatabaseUrl", "check_database_url", "require_module"]

# The async drivers a database URL may name, with the module and extra each needs.
_DATABASE_DRIVERS = {"sqlite+aiosqlite": ("aiosqlite", None), "postgresql+asyncpg": ("asyncpg", "postgres")}


def require_module(module: str, extra: str, what: str) -> None:
    """Raise ``ValueError`` naming the extra to install when ``module`` is missing (``what`` needs it)."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError:
        raise ValueError(missing_extra_message(what, module, extra)) from None


def check_database_url(url: str) -> str:
    """Return ``url`` unchanged if it names an installed async driver, else raise ``ValueError`` saying the fix."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in _DATABASE_DRIVERS:
        if scheme.split("+")[0] in {"postgresql", "postgres"}:
            fix = "write postgresql+asyncpg://... (and install pipecat-harness[postgres])"
            raise ValueError(f"{url.split('@')[-1]!r} needs the async driver: {fix}")
        fix = "use sqlite+aiosqlite:///FILE or postgresql+asyncpg://USER@HOST/DB"
        raise ValueError(f"{scheme or url!r} is not a supported database URL; {fix}")
    module, extra = _DATABASE_DRIVERS[scheme]
    if extra is not None:
        require_module(module, extra, f"a {scheme.split('+')[0]} URL")
    return url


#: A settings field holding a database URL, checked by :func:`check_database_url`.
DatabaseUrl = Annotated[str, AfterValidator(check_database_url)]
#: The same, where an empty string means none.
OptionalDatabaseUrl = Annotated[str, AfterValidator(lambda url: check_database_url(url) if url else url)]
