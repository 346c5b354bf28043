"""A first session with the dbaas Python client, against the API at $DBAAS_URL (default http://127.0.0.1:8080).

Signs up, creates a database, waits for it to run, connects with its connection string (Debian's
psql: the standard library has no PostgreSQL driver), lists the databases with an API key, provokes
a validation error and prints it, and deletes the database.

    DBAAS_URL=http://127.0.0.1:8080 python3 sdks/python/examples/quickstart.py
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.parse
import uuid
from pathlib import Path

# Run from the checkout without installing; an installed `dbaas` works the same.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dbaas  # noqa: E402


def resolves(host: str) -> bool:
    try:
        socket.getaddrinfo(host, None)
        return True
    except socket.gaierror:
        return False


def psql_select_1(connection_string: str, api_url: str) -> str:
    """SELECT 1 through psql. `<id>.db.localhost` does not resolve everywhere: then connect to the
    API's own address (where a local stack's databases listen) with the name kept for TLS."""
    host = urllib.parse.urlsplit(connection_string).hostname or ""
    if not resolves(host):
        address = socket.gethostbyname(urllib.parse.urlsplit(api_url).hostname or "127.0.0.1")
        connection_string += ("&" if "?" in connection_string else "?") + f"hostaddr={address}"
    result = subprocess.run(
        ["psql", connection_string, "--no-psqlrc", "--tuples-only", "--no-align", "--command", "SELECT 1"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PGCONNECT_TIMEOUT": "10"},
        check=True,
    )
    return result.stdout.strip()


def main() -> None:
    with dbaas.Client() as client:
        suffix = uuid.uuid4().hex[:8]
        signup = client.signup(
            email=f"quickstart-{suffix}@example.com",
            password="a-long-password",
            name="Ada",
            organization_name="Acme",
        )
        print(f"signed up: {signup['user']['email']} in {signup['organization']['id']}")

        created = client.create_database(name=f"orders-{suffix}", region="fsn1", tier="micro")
        print(f"created: {created['id']} ({created['status']})")
        database = client.wait_for_status(created["id"], "running", timeout=120)
        print(f"running: {database['host']}:{database['port']}")

        # The password is only in the create answer; get_database masks it.
        print(f"SELECT 1 -> {psql_select_1(created['connection_string'], client.base_url)}")

        key = client.create_api_key("quickstart", scopes=["databases:read"])
        with dbaas.Client(client.base_url, api_key=key["secret"]) as reader:
            ids = [db["id"] for db in reader.iter_databases()]
            print(f"listed with API key {key['prefix']}…: {', '.join(ids)}")
            limit = reader.last_response.rate_limit
            print(f"rate limit: {limit.remaining}/{limit.limit} left")

        try:
            client.create_database(name="x", region="fsn1", tier="micro")
        except dbaas.DbaasError as e:
            print(f"error: {e.status} {e.code}: {e.message} (request {e.request_id})")
            for detail in e.details:
                print(f"  {detail['field']}: {detail['message']}")

        client.delete_database(created["id"])
        print(f"deleted: {created['id']}")
        print(f"databases left: {client.list_databases().meta['total']}")


if __name__ == "__main__":
    main()
