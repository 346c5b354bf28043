"""High availability: the paths and bodies each method sends (create with standbys, get, set, a planned switchover)."""

from __future__ import annotations

import unittest

from local_server import Answer, LocalServer, envelope

import dbaas

HA = {
    "standbys": 1,
    "synchronous": True,
    "members": [
        {"id": "node-p", "role": "primary", "status": "running", "region": "fsn1", "lag_bytes": 0},
        {"id": "node-s", "role": "standby", "status": "running", "region": "fsn1", "lag_bytes": 0},
    ],
    "last_failover": None,
}
OPERATION = {"id": "op-1", "type": "failover", "status": "running", "reason": "planned switchover requested", "from": "node-p", "to": "node-s"}


class HighAvailabilityTest(unittest.TestCase):
    def test_create_sends_standbys_and_synchronous_only_when_given(self) -> None:
        created = {"id": "db-1", "status": "provisioning"}
        with LocalServer(Answer(201, envelope(created)), Answer(201, envelope(created))) as server:
            client = dbaas.Client(server.url, token="t")
            client.create_database("orders", "fsn1", "micro", standbys=1, synchronous=True)
            client.create_database("plain", "fsn1", "micro")
        first, second = server.received
        self.assertEqual(first.body, {"name": "orders", "region": "fsn1", "tier": "micro", "standbys": 1, "synchronous": True})
        self.assertEqual(second.body, {"name": "plain", "region": "fsn1", "tier": "micro"})

    def test_get_and_set_name_the_database_and_put_the_whole_setting(self) -> None:
        with LocalServer(Answer(200, envelope(HA)), Answer(200, envelope(HA))) as server:
            client = dbaas.Client(server.url, token="t")
            self.assertEqual(client.get_high_availability("db-1")["members"][1]["role"], "standby")
            self.assertEqual(client.set_high_availability("db-1", 1, synchronous=True)["standbys"], 1)
        get, put = server.received
        self.assertEqual((get.method, get.path), ("GET", "/v1/databases/db-1/high-availability"))
        self.assertEqual((put.method, put.path, put.body), ("PUT", "/v1/databases/db-1/high-availability", {"standbys": 1, "synchronous": True}))
        # A PUT is not a POST: no idempotency key.
        self.assertNotIn("idempotency-key", put.headers)

    def test_failover_posts_and_answers_the_operation(self) -> None:
        with LocalServer(Answer(202, envelope(OPERATION))) as server:
            op = dbaas.Client(server.url, token="t").failover("db-1")
        self.assertEqual((op["type"], op["to"]), ("failover", "node-s"))
        (request,) = server.received
        self.assertEqual((request.method, request.path), ("POST", "/v1/databases/db-1/failover"))
        self.assertIn("idempotency-key", request.headers)

    def test_a_409_is_a_typed_error_with_the_reason(self) -> None:
        refusal = {"error": {"code": "conflict", "message": "no healthy standby to fail over to", "details": []}}
        with LocalServer(Answer(409, refusal)) as server:
            with self.assertRaises(dbaas.DbaasError) as caught:
                dbaas.Client(server.url, token="t").failover("db-1")
        self.assertEqual(caught.exception.status, 409)
        self.assertIn("no healthy standby", caught.exception.message)


if __name__ == "__main__":
    unittest.main()
