"""Read replicas: hot standbys of a database, reached with its own credentials, promotable to a database."""

from __future__ import annotations

import time
from collections.abc import Iterator

from ._base import BaseClient, Page, segment
from .errors import DatabaseFailed, WaitTimeout
from .models import Database, Replica


def _replicas(database_id: str, replica_id: str | None = None, suffix: str = "") -> str:
    path = f"/v1/databases/{segment(database_id)}/replicas"
    return path if replica_id is None else f"{path}/{segment(replica_id)}{suffix}"


class ReplicasMixin(BaseClient):
    def create_replica(self, database_id: str, name: str, *, tier: str | None = None, region: str | None = None) -> Replica:
        """Creates a read replica of a running database (status ``provisioning``); tier and region default
        to the database's. At most 5 per database; billed, so the organization needs a payment method."""
        body = {"name": name, "tier": tier, "region": region}
        return self._data("POST", _replicas(database_id), body={k: v for k, v in body.items() if v is not None})

    def list_replicas(self, database_id: str, *, page: int | None = None, per_page: int | None = None) -> Page:
        """One page of a database's read replicas, each with its ``lag_bytes``."""
        return self._page(_replicas(database_id), "replicas", {"page": page, "per_page": per_page})

    def iter_replicas(self, database_id: str) -> Iterator[Replica]:
        """Every read replica of a database."""
        return self._iterate(_replicas(database_id), "replicas", {})

    def get_replica(self, database_id: str, replica_id: str) -> Replica:
        """A read replica, its connection string's password masked (the database's password works)."""
        return self._data("GET", _replicas(database_id, replica_id))

    def delete_replica(self, database_id: str, replica_id: str) -> None:
        """Deletes a read replica; its data goes at once."""
        self._data("DELETE", _replicas(database_id, replica_id))

    def promote_replica(self, database_id: str, replica_id: str) -> Database:
        """Promotes a running replica to an independent, writable database (a new ``db-`` id, the primary's
        credentials, no password in the answer); the replica is gone."""
        return self._data("POST", _replicas(database_id, replica_id, "/promote"))

    def wait_for_replica_status(self, database_id: str, replica_id: str, status: str = "running", *, timeout: float = 600.0) -> Replica:
        """Polls the replica until it has ``status`` and returns it. Raises ``WaitTimeout`` after ``timeout``
        seconds and ``DatabaseFailed`` when it becomes ``failed``; their ``database`` is the replica last seen."""
        deadline = time.monotonic() + timeout
        interval = 0.25
        while True:
            replica = self.get_replica(database_id, replica_id)
            if replica["status"] == status:
                return replica
            if replica["status"] == "failed":
                raise DatabaseFailed(f"{replica_id} failed: {replica.get('status_reason', 'no reason given')}", replica)
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"{replica_id} still {replica['status']} after {timeout:g} s, not {status}", replica)
            self._sleep(min(interval, left))
            # A replica is seeded from a base backup: minutes for a large database; polls count against the rate limit.
            interval = min(interval * 1.5, 5.0)
