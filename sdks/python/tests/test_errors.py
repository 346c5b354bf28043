"""The typed error, credentials and base URL, and what the last response says."""

from __future__ import annotations

import os
import unittest
from unittest import mock

from local_server import Answer, LocalServer, envelope, error

import dbaas


class ErrorTest(unittest.TestCase):
    def test_a_validation_error_carries_code_status_message_details_and_request_id(self) -> None:
        details = [{"field": "name", "message": "must be 3-63 characters"}]
        with LocalServer(Answer(422, error("validation_error", "invalid request", details), {"X-Request-Id": "req_err"})) as server:
            with self.assertRaises(dbaas.DbaasError) as caught:
                dbaas.Client(server.url, token="t", sleep=lambda s: None).create_database(name="x", region="fsn1", tier="micro")
        e = caught.exception
        self.assertEqual((e.code, e.status, e.message, e.details, e.request_id), ("validation_error", 422, "invalid request", details, "req_err"))
        self.assertEqual(str(e), "422 validation_error: invalid request")
        self.assertEqual(len(server.received), 1)

    def test_an_answer_without_the_envelope_is_an_http_error(self) -> None:
        with LocalServer(Answer(502, b"<html>Bad Gateway</html>")) as server:
            with self.assertRaises(dbaas.DbaasError) as caught:
                dbaas.Client(server.url, token="t").get_organization()
        self.assertEqual((caught.exception.code, caught.exception.status), ("http_error", 502))
        self.assertIn("Bad Gateway", caught.exception.message)


class CredentialTest(unittest.TestCase):
    def test_token_and_api_key_are_both_bearer(self) -> None:
        with LocalServer(Answer(200, envelope({"regions": []}))) as server:
            dbaas.Client(server.url, token="dbs_a").list_regions()
            dbaas.Client(server.url, api_key="dbk_b").list_regions()
        self.assertEqual([r.headers["authorization"] for r in server.received], ["Bearer dbs_a", "Bearer dbk_b"])

    def test_not_both(self) -> None:
        with self.assertRaises(ValueError):
            dbaas.Client("http://127.0.0.1:1", token="a", api_key="b")

    def test_url_and_token_from_the_environment(self) -> None:
        with LocalServer(Answer(200, envelope({"versions": []}))) as server:
            with mock.patch.dict(os.environ, {"DBAAS_URL": server.url + "/", "DBAAS_TOKEN": "dbk_env"}):
                client = dbaas.Client()
                client.list_versions()
        self.assertEqual(client.base_url, server.url)
        self.assertEqual(server.received[0].headers["authorization"], "Bearer dbk_env")

    def test_signup_makes_the_client_use_its_token_and_closing_forgets_it(self) -> None:
        signed_up = envelope({"user": {}, "organization": {}, "access_token": "dbs_new", "token_type": "Bearer", "expires_at": "x"})
        with LocalServer(Answer(201, signed_up), Answer(200, envelope({"id": "org-1"}))) as server:
            with dbaas.Client(server.url) as client:
                client.signup(email="a@example.com", password="long enough pw", name="A", organization_name="Acme")
                client.get_organization()
            self.assertIsNone(client.token)
        self.assertNotIn("authorization", server.received[0].headers)
        self.assertEqual(server.received[1].headers["authorization"], "Bearer dbs_new")


class LastResponseTest(unittest.TestCase):
    def test_rate_limit_headers_of_the_last_response_even_an_error(self) -> None:
        limits = {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "59", "X-RateLimit-Reset": "1767225600", "X-Request-Id": "req_1"}
        with LocalServer(Answer(200, envelope({"id": "org-1"}), limits), Answer(404, error("resource_not_found", "no such database"), {**limits, "X-RateLimit-Remaining": "58"})) as server:
            client = dbaas.Client(server.url, token="t")
            client.get_organization()
            self.assertEqual(client.last_response.rate_limit, dbaas.RateLimit(limit=60, remaining=59, reset=1767225600))
            self.assertEqual((client.last_response.status, client.last_response.request_id), (200, "req_1"))
            with self.assertRaises(dbaas.DbaasError):
                client.get_database("db-gone")
            self.assertEqual(client.last_response.status, 404)
            self.assertEqual(client.last_response.rate_limit.remaining, 58)

    def test_no_content_is_none(self) -> None:
        with LocalServer(Answer(204)) as server:
            self.assertIsNone(dbaas.Client(server.url, token="t").delete_database("db-abc"))
        self.assertEqual((server.received[0].method, server.received[0].body), ("DELETE", None))
        self.assertNotIn("idempotency-key", server.received[0].headers)


if __name__ == "__main__":
    unittest.main()
