"""Retries of 429/503 honouring Retry-After, the Idempotency-Key they reuse, and their bounds."""

from __future__ import annotations

import socket
import unittest

from local_server import Answer, LocalServer, envelope, error

import dbaas

DB = {"id": "db-abc", "status": "provisioning"}


def client(url: str, sleeps: list[float], **options: object) -> dbaas.Client:
    return dbaas.Client(url, token="dbs_test", sleep=sleeps.append, **options)


class RetryTest(unittest.TestCase):
    def test_429_is_retried_after_what_retry_after_says(self) -> None:
        limited = Answer(429, error("rate_limit_exceeded", "rate limit exceeded"), {"Retry-After": "7"})
        with LocalServer(limited, Answer(200, envelope(DB))) as server:
            sleeps: list[float] = []
            self.assertEqual(client(server.url, sleeps).get_database("db-abc"), DB)
        self.assertEqual(sleeps, [7.0])
        self.assertEqual([r.path for r in server.received], ["/v1/databases/db-abc"] * 2)

    def test_a_post_and_its_retries_share_one_idempotency_key_and_the_next_post_gets_another(self) -> None:
        unavailable = Answer(503, error("service_unavailable", "try again shortly"), {"Retry-After": "1"})
        with LocalServer(unavailable, unavailable, Answer(201, envelope(DB)), Answer(201, envelope(DB))) as server:
            c = client(server.url, [])
            c.create_database(name="orders", region="fsn1", tier="micro")
            c.create_database(name="orders", region="fsn1", tier="micro")
        keys = [r.headers.get("idempotency-key") for r in server.received]
        self.assertEqual(len(keys), 4)
        self.assertTrue(keys[0])
        self.assertEqual(keys[0], keys[1])
        self.assertEqual(keys[1], keys[2])
        self.assertNotEqual(keys[2], keys[3])
        self.assertEqual(server.received[0].body, {"name": "orders", "region": "fsn1", "tier": "micro"})

    def test_a_conflict_while_its_own_first_attempt_runs_is_retried_with_the_same_key(self) -> None:
        running = Answer(409, error("resource_conflict", "a request with this Idempotency-Key is still in progress"), {"Retry-After": "1"})
        with LocalServer(running, Answer(200, envelope(DB), {"Idempotent-Replayed": "true"})) as server:
            sleeps: list[float] = []
            c = client(server.url, sleeps)
            self.assertEqual(c.start_database("db-abc"), DB)
        self.assertEqual(sleeps, [1.0])
        self.assertTrue(c.last_response.replayed)
        self.assertEqual(server.received[0].headers["idempotency-key"], server.received[1].headers["idempotency-key"])

    def test_a_conflict_without_retry_after_is_raised(self) -> None:
        with LocalServer(Answer(409, error("resource_conflict", "database is stopped"))) as server:
            with self.assertRaises(dbaas.DbaasError) as caught:
                client(server.url, []).stop_database("db-abc")
        self.assertEqual(caught.exception.code, "resource_conflict")
        self.assertEqual(len(server.received), 1)

    def test_retries_stop_after_max_retries_with_the_last_error(self) -> None:
        unavailable = Answer(503, error("maintenance_mode", "down for maintenance"), {"Retry-After": "2"})
        with LocalServer(unavailable) as server:
            sleeps: list[float] = []
            with self.assertRaises(dbaas.DbaasError) as caught:
                client(server.url, sleeps, max_retries=2).list_regions()
        self.assertEqual((caught.exception.status, caught.exception.code), (503, "maintenance_mode"))
        self.assertEqual(caught.exception.retry_after, 2.0)
        self.assertEqual(sleeps, [2.0, 2.0])
        self.assertEqual(len(server.received), 3)

    def test_a_retry_after_beyond_the_bound_is_raised_at_once(self) -> None:
        with LocalServer(Answer(429, error("rate_limit_exceeded", "daily limit"), {"Retry-After": "3600"})) as server:
            sleeps: list[float] = []
            with self.assertRaises(dbaas.DbaasError) as caught:
                client(server.url, sleeps, max_retry_wait=60).list_tiers()
        self.assertEqual(caught.exception.status, 429)
        self.assertEqual(sleeps, [])
        self.assertEqual(len(server.received), 1)

    def test_without_retry_after_the_wait_doubles(self) -> None:
        with LocalServer(Answer(503, error("service_unavailable", "busy")), Answer(503, error("service_unavailable", "busy")), Answer(200, envelope({"tiers": []}))) as server:
            sleeps: list[float] = []
            self.assertEqual(client(server.url, sleeps).list_tiers(), {"tiers": []})
        self.assertEqual(sleeps, [0.5, 1.0])

    def test_max_retries_zero_never_retries(self) -> None:
        with LocalServer(Answer(429, error("rate_limit_exceeded", "slow down"), {"Retry-After": "1"})) as server:
            with self.assertRaises(dbaas.DbaasError):
                client(server.url, [], max_retries=0).list_versions()
        self.assertEqual(len(server.received), 1)


class NetworkTest(unittest.TestCase):
    def setUp(self) -> None:
        # A port nothing listens on: bound, then closed.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.url = f"http://127.0.0.1:{s.getsockname()[1]}"

    def test_a_get_without_an_answer_is_retried_then_raises_network_error(self) -> None:
        sleeps: list[float] = []
        with self.assertRaises(dbaas.NetworkError):
            client(self.url, sleeps, max_retries=2).get_database("db-abc")
        self.assertEqual(sleeps, [0.5, 1.0])

    def test_a_delete_without_an_answer_is_not_sent_again(self) -> None:
        sleeps: list[float] = []
        with self.assertRaises(dbaas.NetworkError):
            client(self.url, sleeps).delete_database("db-abc")
        self.assertEqual(sleeps, [])


if __name__ == "__main__":
    unittest.main()
