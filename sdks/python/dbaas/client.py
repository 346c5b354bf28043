"""``Client``: every operation of the dbaas API as a method."""

from __future__ import annotations

from ._billing import BillingMixin
from ._databases import DatabasesMixin
from ._inside import InsideMixin
from ._organization import OrganizationMixin
from ._edge import EdgeMixin
from ._replicas import ReplicasMixin


class Client(DatabasesMixin, ReplicasMixin, EdgeMixin, InsideMixin, OrganizationMixin, BillingMixin):
    """A client of the dbaas API; usable as a context manager.

    >>> with Client("http://127.0.0.1:8080", token="dbs_…") as client:
    ...     for db in client.iter_databases():
    ...         print(db["id"], db["status"])

    Methods return the API's unwrapped ``data`` as dicts, ``list_*`` a ``Page`` and ``iter_*`` an
    iterator over every item of every page; errors raise ``DbaasError``.
    """

    def __enter__(self) -> Client:
        return self
