"""Pages and iterators, query parameters, and wait_for_status."""

from __future__ import annotations

import unittest
import urllib.parse

from local_server import Answer, LocalServer, envelope

import dbaas


def page(n: int, total_pages: int, ids: list[str]) -> Answer:
    meta = {"page": n, "per_page": 100, "total": 250, "total_pages": total_pages}
    return Answer(200, envelope({"databases": [{"id": i} for i in ids]}, **meta))


def query(path: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query))


class PageTest(unittest.TestCase):
    def test_the_iterator_walks_every_page_at_100_per_page(self) -> None:
        with LocalServer(page(1, 3, ["db-1", "db-2"]), page(2, 3, ["db-3"]), page(3, 3, ["db-4"])) as server:
            ids = [db["id"] for db in dbaas.Client(server.url, token="t").iter_databases(region="fsn1")]
        self.assertEqual(ids, ["db-1", "db-2", "db-3", "db-4"])
        self.assertEqual([query(r.path) for r in server.received], [{"per_page": "100", "region": "fsn1", "page": str(n)} for n in (1, 2, 3)])

    def test_an_empty_list_is_one_request(self) -> None:
        with LocalServer(Answer(200, envelope({"databases": []}, page=1, per_page=100, total=0, total_pages=0))) as server:
            self.assertEqual(list(dbaas.Client(server.url, token="t").iter_databases()), [])
        self.assertEqual(len(server.received), 1)

    def test_a_page_keeps_the_fields_beside_its_items(self) -> None:
        data = {"backups": [{"id": "bkp-1"}], "earliest_restore_time": "2026-01-01T00:00:00Z", "latest_restore_time": None, "wal_archiving": {}}
        with LocalServer(Answer(200, envelope(data, page=2, per_page=1, total=2, total_pages=2))) as server:
            p = dbaas.Client(server.url, token="t").list_backups("db-1", page=2, per_page=1)
        self.assertEqual(p.items, [{"id": "bkp-1"}])
        self.assertEqual(p.meta["total"], 2)
        self.assertEqual(p.data["earliest_restore_time"], "2026-01-01T00:00:00Z")
        self.assertEqual(server.received[0].path, "/v1/databases/db-1/backups?page=2&per_page=1")

    def test_query_values_lists_joined_and_absent_ones_left_out(self) -> None:
        with LocalServer(Answer(200, envelope({"series": []}))) as server:
            dbaas.Client(server.url, token="t").get_metrics("db-1", names=["cpu", "connections"], step=300)
        self.assertEqual(query(server.received[0].path), {"names": "cpu,connections", "step": "300"})

    def test_ids_are_one_path_segment(self) -> None:
        with LocalServer(Answer(404, {"error": {"code": "resource_not_found", "message": "", "details": []}, "meta": {"request_id": "r"}})) as server:
            with self.assertRaises(dbaas.DbaasError):
                dbaas.Client(server.url, token="t").get_database("../organization")
        self.assertEqual(server.received[0].path, "/v1/databases/..%2Forganization")


class WaitTest(unittest.TestCase):
    def db(self, status: str, **extra: str) -> Answer:
        return Answer(200, envelope({"id": "db-1", "status": status, **extra}))

    def test_polls_until_the_status_slower_each_time(self) -> None:
        with LocalServer(self.db("provisioning"), self.db("provisioning"), self.db("provisioning"), self.db("running")) as server:
            sleeps: list[float] = []
            db = dbaas.Client(server.url, token="t", sleep=sleeps.append).wait_for_status("db-1", "running", timeout=60)
        self.assertEqual(db["status"], "running")
        self.assertEqual(len(server.received), 4)
        self.assertEqual(sleeps, sorted(sleeps))
        self.assertLess(sleeps[0], sleeps[-1])

    def test_a_failed_database_ends_the_wait(self) -> None:
        with LocalServer(self.db("provisioning"), self.db("failed", status_reason="no capacity")) as server:
            with self.assertRaises(dbaas.DatabaseFailed) as caught:
                dbaas.Client(server.url, token="t", sleep=lambda s: None).wait_for_status("db-1")
        self.assertIn("no capacity", str(caught.exception))

    def test_the_timeout_raises_with_the_last_state(self) -> None:
        with LocalServer(self.db("stopping")) as server:
            with self.assertRaises(dbaas.WaitTimeout) as caught:
                dbaas.Client(server.url, token="t").wait_for_status("db-1", "stopped", timeout=0)
        self.assertEqual(caught.exception.database["status"], "stopping")
        self.assertIsInstance(caught.exception, TimeoutError)


class OperationsTest(unittest.TestCase):
    def test_every_entry_is_a_method_of_client(self) -> None:
        for operation_id, method in dbaas.OPERATIONS.items():
            self.assertIs(getattr(dbaas.Client, method.__name__), method, operation_id)


if __name__ == "__main__":
    unittest.main()
