"""Read replicas: the paths and bodies each method sends, the iterator, and the wait for a replica's status."""

from __future__ import annotations

import unittest

from local_server import Answer, LocalServer, envelope

import dbaas

REPLICA = {"id": "rep-1", "database_id": "db-1", "status": "provisioning", "lag_bytes": 0}


class ReplicaTest(unittest.TestCase):
    def test_create_sends_only_the_fields_given_with_an_idempotency_key(self) -> None:
        with LocalServer(Answer(201, envelope(REPLICA)), Answer(201, envelope(REPLICA))) as server:
            client = dbaas.Client(server.url, token="t")
            self.assertEqual(client.create_replica("db-1", "reports")["id"], "rep-1")
            client.create_replica("db-1", "far", tier="small", region="hel1")
        first, second = server.received
        self.assertEqual((first.method, first.path, first.body), ("POST", "/v1/databases/db-1/replicas", {"name": "reports"}))
        self.assertEqual(second.body, {"name": "far", "tier": "small", "region": "hel1"})
        self.assertIn("idempotency-key", first.headers)

    def test_get_delete_and_promote_name_the_database_and_the_replica(self) -> None:
        promoted = {"id": "db-2", "name": "reports", "status": "starting"}
        with LocalServer(Answer(200, envelope(REPLICA)), Answer(204), Answer(200, envelope(promoted))) as server:
            client = dbaas.Client(server.url, token="t")
            self.assertEqual(client.get_replica("db-1", "rep-1")["database_id"], "db-1")
            self.assertIsNone(client.delete_replica("db-1", "rep-1"))
            self.assertEqual(client.promote_replica("db-1", "rep-1")["id"], "db-2")
        self.assertEqual(
            [(r.method, r.path) for r in server.received],
            [
                ("GET", "/v1/databases/db-1/replicas/rep-1"),
                ("DELETE", "/v1/databases/db-1/replicas/rep-1"),
                ("POST", "/v1/databases/db-1/replicas/rep-1/promote"),
            ],
        )

    def test_the_iterator_walks_every_page(self) -> None:
        def page(n: int, ids: list[str]) -> Answer:
            return Answer(200, envelope({"replicas": [{"id": i} for i in ids]}, page=n, per_page=100, total=3, total_pages=2))

        with LocalServer(page(1, ["rep-1", "rep-2"]), page(2, ["rep-3"])) as server:
            ids = [r["id"] for r in dbaas.Client(server.url, token="t").iter_replicas("db-1")]
        self.assertEqual(ids, ["rep-1", "rep-2", "rep-3"])
        self.assertEqual(server.received[1].path, "/v1/databases/db-1/replicas?per_page=100&page=2")

    def test_the_wait_ends_at_the_status_or_at_failed_with_the_reason(self) -> None:
        seeding, running = Answer(200, envelope(REPLICA)), Answer(200, envelope({**REPLICA, "status": "running"}))
        with LocalServer(seeding, seeding, running) as server:
            replica = dbaas.Client(server.url, token="t", sleep=lambda s: None).wait_for_replica_status("db-1", "rep-1")
        self.assertEqual(replica["status"], "running")
        self.assertEqual(len(server.received), 3)
        failed = Answer(200, envelope({**REPLICA, "status": "failed", "status_reason": "the seed backup failed 3 times"}))
        with LocalServer(seeding, failed) as server:
            with self.assertRaises(dbaas.DatabaseFailed) as caught:
                dbaas.Client(server.url, token="t", sleep=lambda s: None).wait_for_replica_status("db-1", "rep-1")
        self.assertIn("seed backup", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
