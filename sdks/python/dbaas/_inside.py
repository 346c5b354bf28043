"""Inside a database: its roles and logical databases, read from and changed on the running server."""

from __future__ import annotations

from collections.abc import Iterator

from ._base import BaseClient, Page, segment
from typing import Any

from .models import Config, CreatedRole, Extension, LogicalDb, LogPage, QueryPage, Role


def _under(database_id: str, what: str, name: str | None = None, suffix: str = "") -> str:
    path = f"/v1/databases/{segment(database_id)}/{what}"
    return path if name is None else f"{path}/{segment(name)}{suffix}"


class InsideMixin(BaseClient):
    def list_roles(self, database_id: str, *, page: int | None = None, per_page: int | None = None) -> Page:
        """One page of a database's roles, by name, ``dbadmin`` included."""
        return self._page(_under(database_id, "roles"), "roles", {"page": page, "per_page": per_page})

    def iter_roles(self, database_id: str) -> Iterator[Role]:
        """Every role of a database."""
        return self._iterate(_under(database_id, "roles"), "roles", {})

    def create_role(self, database_id: str, name: str) -> CreatedRole:
        """Creates a LOGIN role (never superuser) with a generated ``password``, shown this once."""
        return self._data("POST", _under(database_id, "roles"), body={"name": name})

    def delete_role(self, database_id: str, name: str) -> None:
        """Drops a role and ends its sessions (409 while it owns objects; ``dbadmin`` cannot go)."""
        self._data("DELETE", _under(database_id, "roles", name))

    def reset_role_password(self, database_id: str, name: str) -> CreatedRole:
        """A new password for the role; the old one and its sessions end before the answer arrives."""
        return self._data("POST", _under(database_id, "roles", name, "/reset-password"))

    def list_dbs(self, database_id: str, *, page: int | None = None, per_page: int | None = None) -> Page:
        """One page of the server's logical databases, by name, ``defaultdb`` included."""
        return self._page(_under(database_id, "dbs"), "dbs", {"page": page, "per_page": per_page})

    def iter_dbs(self, database_id: str) -> Iterator[LogicalDb]:
        """Every logical database of a database's server."""
        return self._iterate(_under(database_id, "dbs"), "dbs", {})

    def create_db(self, database_id: str, name: str, *, owner: str | None = None) -> LogicalDb:
        """Creates a logical database owned by ``owner`` (default ``dbadmin``)."""
        body = {"name": name} if owner is None else {"name": name, "owner": owner}
        return self._data("POST", _under(database_id, "dbs"), body=body)

    def delete_db(self, database_id: str, name: str) -> None:
        """Drops a logical database (409 for ``defaultdb``, or while it has connections)."""
        self._data("DELETE", _under(database_id, "dbs", name))

    def get_config(self, database_id: str) -> Config:
        """Every parameter that can be changed: value, default, unit, type, bounds, restart flags."""
        return self._data("GET", _under(database_id, "config"))

    def update_config(self, database_id: str, parameters: dict[str, Any]) -> Config:
        """Changes parameters, all or nothing (``None`` sets one back to its default); a running database
        answers once its server has them (restart-only ones show ``pending_restart``)."""
        return self._data("PATCH", _under(database_id, "config"), body={"parameters": parameters})

    def list_extensions(self, database_id: str, *, db: str | None = None, page: int | None = None, per_page: int | None = None) -> Page:
        """One page of what the server's binaries offer, installed or not in ``db`` (default defaultdb)."""
        return self._page(_under(database_id, "extensions"), "extensions", {"db": db, "page": page, "per_page": per_page})

    def iter_extensions(self, database_id: str, *, db: str | None = None) -> Iterator[Extension]:
        """Every extension the server offers."""
        return self._iterate(_under(database_id, "extensions"), "extensions", {"db": db})

    def install_extension(self, database_id: str, name: str, *, db: str | None = None) -> Extension:
        """Installs an extension of the allowlist as superuser (422 for any other)."""
        body = {"name": name} if db is None else {"name": name, "db": db}
        return self._data("POST", _under(database_id, "extensions"), body=body)

    def delete_extension(self, database_id: str, name: str, *, db: str | None = None) -> None:
        """Drops an extension (409 while objects depend on it; 404 when not installed)."""
        self._data("DELETE", _under(database_id, "extensions", name), query={"db": db})

    def list_logs(
        self,
        database_id: str,
        *,
        since: str | None = None,
        until: str | None = None,
        severity: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> LogPage:
        """One page of the server's log, oldest first: the newest ``limit`` entries matching the filters, or a page
        from ``cursor`` (``next_cursor``: entries after; ``prev_cursor``: entries before). ``severity="ERROR"``
        returns ERROR and worse; ``since``/``until`` are RFC 3339 instants."""
        query = {"since": since, "until": until, "severity": severity, "q": q, "limit": limit, "cursor": cursor}
        return self._data("GET", _under(database_id, "logs"), query=query)

    def list_queries(self, database_id: str, *, order_by: str | None = None, limit: int | None = None) -> QueryPage:
        """Query insights from pg_stat_statements, normalized, ordered by ``total_time``, ``mean_time`` or ``calls``."""
        return self._data("GET", _under(database_id, "queries"), query={"order_by": order_by, "limit": limit})

    def reset_queries(self, database_id: str) -> None:
        """Starts the query statistics again from nothing."""
        self._data("POST", _under(database_id, "queries", None, "") + "/reset")
