"""Trusted sources and the pooler: the paths and bodies each method sends, and the iterator."""

from __future__ import annotations

import unittest

from local_server import Answer, LocalServer, envelope

import dbaas

SOURCE = {"id": "ts-1", "cidr": "203.0.113.0/24", "description": "office", "expires_at": None, "created_at": "2026-01-01T00:00:00Z"}
POOLER = {"enabled": True, "mode": "session", "pool_size": 10, "max_client_connections": 1000}


class EdgeTest(unittest.TestCase):
    def test_trusted_sources_add_remove_and_iterate(self) -> None:
        def page(n: int, ids: list[str]) -> Answer:
            return Answer(200, envelope({"trusted_sources": [{"id": i} for i in ids]}, page=n, per_page=100, total=3, total_pages=2))

        with LocalServer(
            Answer(201, envelope(SOURCE)), Answer(201, envelope(SOURCE)), Answer(204), page(1, ["ts-1", "ts-2"]), page(2, ["ts-3"])
        ) as server:
            client = dbaas.Client(server.url, token="t")
            self.assertEqual(client.add_trusted_source("db-1", "203.0.113.0/24", description="office")["id"], "ts-1")
            client.add_trusted_source("db-1", "198.51.100.7", expires_at="2030-01-01T00:00:00Z")
            self.assertIsNone(client.remove_trusted_source("db-1", "ts-1"))
            ids = [t["id"] for t in client.iter_trusted_sources("db-1")]
        self.assertEqual(ids, ["ts-1", "ts-2", "ts-3"])
        first, second, third, fourth, _ = server.received
        self.assertEqual(
            (first.method, first.path, first.body),
            ("POST", "/v1/databases/db-1/trusted-sources", {"cidr": "203.0.113.0/24", "description": "office"}),
        )
        self.assertEqual(second.body, {"cidr": "198.51.100.7", "expires_at": "2030-01-01T00:00:00Z"})
        self.assertIn("idempotency-key", first.headers)
        self.assertEqual((third.method, third.path), ("DELETE", "/v1/databases/db-1/trusted-sources/ts-1"))
        self.assertEqual(fourth.path, "/v1/databases/db-1/trusted-sources?per_page=100&page=1")

    def test_pooler_get_and_update_send_only_the_fields_given(self) -> None:
        with LocalServer(Answer(200, envelope(POOLER)), Answer(200, envelope(POOLER))) as server:
            client = dbaas.Client(server.url, token="t")
            self.assertEqual(client.get_pooler("db-1")["max_client_connections"], 1000)
            self.assertEqual(client.update_pooler("db-1", mode="session", pool_size=10)["mode"], "session")
        first, second = server.received
        self.assertEqual((first.method, first.path), ("GET", "/v1/databases/db-1/pooler"))
        self.assertEqual((second.method, second.path, second.body), ("PATCH", "/v1/databases/db-1/pooler", {"mode": "session", "pool_size": 10}))


if __name__ == "__main__":
    unittest.main()
