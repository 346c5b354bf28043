"""A database's edge: the addresses it admits (trusted sources) and its connection pooler (PgBouncer)."""

from __future__ import annotations

from collections.abc import Iterator

from ._base import BaseClient, Page, segment
from .models import Pooler, TrustedSource


def _path(database_id: str, suffix: str) -> str:
    return f"/v1/databases/{segment(database_id)}/{suffix}"


class EdgeMixin(BaseClient):
    def list_trusted_sources(self, database_id: str, *, page: int | None = None, per_page: int | None = None) -> Page:
        """One page of the addresses allowed to connect (none listed: every address)."""
        return self._page(_path(database_id, "trusted-sources"), "trusted_sources", {"page": page, "per_page": per_page})

    def iter_trusted_sources(self, database_id: str) -> Iterator[TrustedSource]:
        """Every trusted source of a database."""
        return self._iterate(_path(database_id, "trusted-sources"), "trusted_sources", {})

    def add_trusted_source(
        self, database_id: str, cidr: str, *, description: str | None = None, expires_at: str | None = None
    ) -> TrustedSource:
        """Admits an IPv4 or IPv6 address or network (``expires_at``, RFC 3339: for a while only); any other
        address is refused within 5 seconds. At most 50 per database; host bits set raise a 422 naming the network."""
        body = {"cidr": cidr, "description": description, "expires_at": expires_at}
        return self._data("POST", _path(database_id, "trusted-sources"), body={k: v for k, v in body.items() if v is not None})

    def remove_trusted_source(self, database_id: str, trusted_source_id: str) -> None:
        """Removes a trusted source."""
        self._data("DELETE", _path(database_id, f"trusted-sources/{segment(trusted_source_id)}"))

    def get_pooler(self, database_id: str) -> Pooler:
        """The database's pooler: host, port, mode, pool size; ``enabled`` false with a ``reason`` where none can run."""
        return self._data("GET", _path(database_id, "pooler"))

    def update_pooler(
        self, database_id: str, *, enabled: bool | None = None, mode: str | None = None, pool_size: int | None = None
    ) -> Pooler:
        """Enables or disables the pooler, or changes its mode (``transaction``, ``session``) or pool size."""
        body = {"enabled": enabled, "mode": mode, "pool_size": pool_size}
        return self._data("PATCH", _path(database_id, "pooler"), body={k: v for k, v in body.items() if v is not None})
