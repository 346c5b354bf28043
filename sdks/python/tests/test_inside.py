"""Inside a database: the paths and bodies of the roles and dbs methods, and their iterators."""

from __future__ import annotations

import unittest

from local_server import Answer, LocalServer, envelope

import dbaas

ROLE = {"name": "bi", "login": True, "create_db": False, "create_role": False, "builtin": False, "created_at": None}
CREATED = {**ROLE, "password": "p", "connection_string": "postgresql://bi:p@h:1/defaultdb?sslmode=require"}
DB = {"name": "app", "owner": "bi", "size_bytes": 1, "builtin": False}


class InsideTest(unittest.TestCase):
    def test_each_method_names_the_database_and_the_role_or_db(self) -> None:
        answers = (Answer(201, envelope(CREATED)), Answer(200, envelope(CREATED)), Answer(204), Answer(201, envelope(DB)), Answer(201, envelope(DB)), Answer(204))
        with LocalServer(*answers) as server:
            client = dbaas.Client(server.url, token="t")
            self.assertEqual(client.create_role("db-1", "bi")["password"], "p")
            self.assertEqual(client.reset_role_password("db-1", "bi")["name"], "bi")
            self.assertIsNone(client.delete_role("db-1", "bi"))
            self.assertEqual(client.create_db("db-1", "app")["owner"], "bi")
            client.create_db("db-1", "app", owner="bi")
            self.assertIsNone(client.delete_db("db-1", "app"))
        self.assertEqual(
            [(r.method, r.path, r.body) for r in server.received],
            [
                ("POST", "/v1/databases/db-1/roles", {"name": "bi"}),
                ("POST", "/v1/databases/db-1/roles/bi/reset-password", None),
                ("DELETE", "/v1/databases/db-1/roles/bi", None),
                ("POST", "/v1/databases/db-1/dbs", {"name": "app"}),
                ("POST", "/v1/databases/db-1/dbs", {"name": "app", "owner": "bi"}),
                ("DELETE", "/v1/databases/db-1/dbs/app", None),
            ],
        )
        self.assertIn("idempotency-key", server.received[0].headers)

    def test_the_iterators_walk_every_page(self) -> None:
        def page(key: str, n: int, names: list[str]) -> Answer:
            return Answer(200, envelope({key: [{"name": x} for x in names]}, page=n, per_page=100, total=3, total_pages=2))

        with LocalServer(page("roles", 1, ["a", "b"]), page("roles", 2, ["dbadmin"])) as server:
            names = [r["name"] for r in dbaas.Client(server.url, token="t").iter_roles("db-1")]
        self.assertEqual(names, ["a", "b", "dbadmin"])
        self.assertEqual(server.received[1].path, "/v1/databases/db-1/roles?per_page=100&page=2")
        with LocalServer(page("dbs", 1, ["app"]), page("dbs", 2, ["defaultdb"])) as server:
            self.assertEqual([d["name"] for d in dbaas.Client(server.url, token="t").iter_dbs("db-1")], ["app", "defaultdb"])

    def test_config_sends_values_and_none(self) -> None:
        config = {"parameters": [{"name": "work_mem", "value": 65536, "pending_restart": False}]}
        with LocalServer(Answer(200, envelope(config)), Answer(200, envelope(config))) as server:
            client = dbaas.Client(server.url, token="t")
            self.assertEqual(client.get_config("db-1")["parameters"][0]["value"], 65536)
            client.update_config("db-1", {"work_mem": "64MB", "jit": None, "shared_preload_libraries": ["pg_stat_statements"]})
        first, second = server.received
        self.assertEqual((first.method, first.path), ("GET", "/v1/databases/db-1/config"))
        self.assertEqual(
            (second.method, second.path, second.body),
            ("PATCH", "/v1/databases/db-1/config", {"parameters": {"work_mem": "64MB", "jit": None, "shared_preload_libraries": ["pg_stat_statements"]}}),
        )

    def test_extensions_name_the_logical_database(self) -> None:
        ext = {"name": "pg_trgm", "installed": True}
        page = Answer(200, envelope({"extensions": [ext]}, page=1, per_page=100, total=1, total_pages=1))
        with LocalServer(Answer(201, envelope(ext)), Answer(204), page) as server:
            client = dbaas.Client(server.url, token="t")
            self.assertTrue(client.install_extension("db-1", "pg_trgm", db="app")["installed"])
            self.assertIsNone(client.delete_extension("db-1", "pg_trgm", db="app"))
            self.assertEqual([e["name"] for e in client.iter_extensions("db-1")], ["pg_trgm"])
        self.assertEqual(
            [(r.method, r.path, r.body) for r in server.received],
            [
                ("POST", "/v1/databases/db-1/extensions", {"name": "pg_trgm", "db": "app"}),
                ("DELETE", "/v1/databases/db-1/extensions/pg_trgm?db=app", None),
                ("GET", "/v1/databases/db-1/extensions?per_page=100&page=1", None),
            ],
        )

    def test_logs_and_queries_send_their_filters_and_reset_posts(self) -> None:
        entry = {"time": "2026-01-01T00:00:00.000Z", "severity": "ERROR", "message": "m", "sql_state": "42P01"}
        logs = Answer(200, envelope({"entries": [entry], "next_cursor": "YQ", "prev_cursor": None}))
        queries = Answer(200, envelope({"queries": [{"query": "SELECT $1", "calls": 3}], "stats_reset": None}))
        with LocalServer(logs, queries, Answer(204)) as server:
            client = dbaas.Client(server.url, token="t")
            page = client.list_logs("db-1", severity="ERROR", q="no_such", limit=5, cursor="YQ")
            self.assertEqual(page["entries"][0]["sql_state"], "42P01")
            self.assertEqual(page["next_cursor"], "YQ")
            self.assertEqual(client.list_queries("db-1", order_by="calls", limit=1)["queries"][0]["calls"], 3)
            self.assertIsNone(client.reset_queries("db-1"))
        self.assertEqual(
            [(r.method, r.path, r.body) for r in server.received],
            [
                ("GET", "/v1/databases/db-1/logs?severity=ERROR&q=no_such&limit=5&cursor=YQ", None),
                ("GET", "/v1/databases/db-1/queries?order_by=calls&limit=1", None),
                ("POST", "/v1/databases/db-1/queries/reset", None),
            ],
        )


if __name__ == "__main__":
    unittest.main()
