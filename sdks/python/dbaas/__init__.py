"""Python client of the dbaas API (managed PostgreSQL), standard library only.

    import dbaas
    with dbaas.Client() as client:          # $DBAAS_URL and $DBAAS_TOKEN
        db = client.create_database(name="orders", region="fsn1", tier="micro")
        client.wait_for_status(db["id"], "running")
"""

from ._base import Page
from ._http import RateLimit, Response, __version__
from .client import Client
from .errors import DatabaseFailed, DbaasError, NetworkError, WaitTimeout
from .operations import ITERATORS, OPERATIONS

__all__ = [
    "ITERATORS",
    "OPERATIONS",
    "Client",
    "DatabaseFailed",
    "DbaasError",
    "NetworkError",
    "Page",
    "RateLimit",
    "Response",
    "WaitTimeout",
    "__version__",
]
