"""Databases: lifecycle, operations log, backups and restore, metrics, and the catalogue."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator, Sequence

from ._base import BaseClient, Page, segment
from .errors import DatabaseFailed, WaitTimeout
from .models import (
    Backup,
    CreateDatabaseRequest,
    CreatedDatabase,
    Credentials,
    Database,
    DatabaseListItem,
    DatabaseStatus,
    HighAvailability,
    Metrics,
    Operation,
    Regions,
    ResizedDatabase,
    RestoredDatabase,
    SetHighAvailabilityRequest,
    Tiers,
    Versions,
)


def _db(database_id: str, suffix: str = "") -> str:
    return f"/v1/databases/{segment(database_id)}{suffix}"


class DatabasesMixin(BaseClient):
    def create_database(
        self,
        name: str,
        region: str,
        tier: str,
        version: str | None = None,
        *,
        standbys: int | None = None,
        synchronous: bool | None = None,
    ) -> CreatedDatabase:
        """Creates a database (status ``provisioning``); the answer carries its password, shown this once.

        ``standbys`` (0-2) places standbys on other hosts of the region with it; ``synchronous`` commits only
        once a standby has the WAL.
        """
        body: CreateDatabaseRequest = {"name": name, "region": region, "tier": tier}
        if version is not None:
            body["version"] = version
        if standbys is not None:
            body["standbys"] = standbys
        if synchronous is not None:
            body["synchronous"] = synchronous
        return self._data("POST", "/v1/databases", body=body)

    def get_high_availability(self, database_id: str) -> HighAvailability:
        """The database's standbys and mode, its members (the primary first) and its last failover."""
        return self._data("GET", _db(database_id, "/high-availability"))

    def set_high_availability(self, database_id: str, standbys: int, synchronous: bool = False) -> HighAvailability:
        """Sets the standbys (0-2, each on another host of the region, billed as compute) and synchronous mode."""
        body: SetHighAvailabilityRequest = {"standbys": standbys, "synchronous": synchronous}
        return self._data("PUT", _db(database_id, "/high-availability"), body=body)

    def failover(self, database_id: str) -> Operation:
        """A planned switchover to the healthiest standby; the ``failover`` operation, running until it runs as the primary."""
        return self._data("POST", _db(database_id, "/failover"))

    def list_databases(
        self, *, page: int | None = None, per_page: int | None = None, status: str | None = None, region: str | None = None
    ) -> Page:
        """One page of the organization's databases."""
        return self._page("/v1/databases", "databases", {"page": page, "per_page": per_page, "status": status, "region": region})

    def iter_databases(self, *, status: str | None = None, region: str | None = None) -> Iterator[DatabaseListItem]:
        """Every database of the organization (optionally of one status or region)."""
        return self._iterate("/v1/databases", "databases", {"status": status, "region": region})

    def get_database(self, database_id: str) -> Database:
        """A database, its connection string's password masked."""
        return self._data("GET", _db(database_id))

    def update_database(self, database_id: str, *, name: str) -> Database:
        """Renames a database."""
        return self._data("PATCH", _db(database_id), body={"name": name})

    def delete_database(self, database_id: str) -> None:
        """Deletes a database (its data is kept 7 days)."""
        self._data("DELETE", _db(database_id))

    def start_database(self, database_id: str) -> DatabaseStatus:
        return self._data("POST", _db(database_id, "/start"))

    def stop_database(self, database_id: str) -> DatabaseStatus:
        return self._data("POST", _db(database_id, "/stop"))

    def restart_database(self, database_id: str) -> DatabaseStatus:
        return self._data("POST", _db(database_id, "/restart"))

    def resize_database(self, database_id: str, tier: str) -> ResizedDatabase:
        return self._data("POST", _db(database_id, "/resize"), body={"tier": tier})

    def reset_password(self, database_id: str) -> Credentials:
        """A new password (and connection string); the old one stops working at once."""
        return self._data("POST", _db(database_id, "/reset-password"))

    def list_operations(self, database_id: str, *, page: int | None = None, per_page: int | None = None) -> Page:
        return self._page(_db(database_id, "/operations"), "operations", {"page": page, "per_page": per_page})

    def iter_operations(self, database_id: str) -> Iterator[Operation]:
        return self._iterate(_db(database_id, "/operations"), "operations", {})

    def list_backups(self, database_id: str, *, page: int | None = None, per_page: int | None = None) -> Page:
        """A page of base backups, newest first; ``page.data`` also holds ``earliest_restore_time``,
        ``latest_restore_time`` and ``wal_archiving``."""
        return self._page(_db(database_id, "/backups"), "backups", {"page": page, "per_page": per_page})

    def iter_backups(self, database_id: str) -> Iterator[Backup]:
        return self._iterate(_db(database_id, "/backups"), "backups", {})

    def create_backup(self, database_id: str) -> Backup:
        """Starts a base backup now (status ``running``)."""
        return self._data("POST", _db(database_id, "/backups"))

    def restore_database(
        self,
        database_id: str,
        name: str,
        *,
        restore_time: str | dt.datetime | None = None,
        tier: str | None = None,
        region: str | None = None,
    ) -> RestoredDatabase:
        """Restores ``database_id`` as it was at ``restore_time`` (default: the latest instant) into a NEW database."""
        if isinstance(restore_time, dt.datetime):
            restore_time = restore_time.isoformat()
        body = {"name": name, "restore_time": restore_time, "tier": tier, "region": region}
        return self._data("POST", _db(database_id, "/restore"), body={k: v for k, v in body.items() if v is not None})

    def get_metrics(
        self,
        database_id: str,
        *,
        start: str | dt.datetime | None = None,
        end: str | dt.datetime | None = None,
        step: int | None = None,
        names: Sequence[str] | None = None,
    ) -> Metrics:
        """Metrics over [start, end] (default: the last hour) at ``step`` seconds (default 60)."""
        return self._data("GET", _db(database_id, "/metrics"), query={"start": start, "end": end, "step": step, "names": names})

    def get_ca_certificate(self, database_id: str) -> str:
        """The PEM of the CA that signs the database's server certificate (for ``sslmode=verify-full``)."""
        return self._http.request("GET", _db(database_id, "/ca-certificate"), raw=True).decode()

    def list_regions(self) -> Regions:
        return self._data("GET", "/v1/regions")

    def list_tiers(self) -> Tiers:
        return self._data("GET", "/v1/tiers")

    def list_versions(self) -> Versions:
        return self._data("GET", "/v1/versions")

    def wait_for_status(self, database_id: str, status: str = "running", *, timeout: float = 300.0) -> Database:
        """Polls the database until it has ``status`` and returns it. Raises ``WaitTimeout`` after
        ``timeout`` seconds, and ``DatabaseFailed`` when it becomes ``failed`` instead."""
        deadline = time.monotonic() + timeout
        interval = 0.25
        while True:
            database = self.get_database(database_id)
            if database["status"] == status:
                return database
            if database["status"] == "failed":
                raise DatabaseFailed(f"{database_id} failed: {database.get('status_reason', 'no reason given')}", database)
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"{database_id} still {database['status']} after {timeout:g} s, not {status}", database)
            self._sleep(min(interval, left))
            # Slower as it takes longer: a create is a few hundred ms, a restore minutes; polls count against the rate limit.
            interval = min(interval * 1.5, 5.0)
