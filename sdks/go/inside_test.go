package dbaas

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRoleAndDbMethodsNameTheDatabaseAndTheName(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		data := map[string]any{"name": "bi", "login": true, "password": "p", "created_at": nil}
		if r.URL.Path == "/v1/databases/db-1/dbs" {
			data = map[string]any{"name": "app", "owner": "bi", "size_bytes": 8192}
		}
		reply(w, 200, map[string]any{"data": data, "meta": map[string]any{"request_id": "r"}})
	})
	c := NewClient(WithBaseURL(s.URL))
	ctx := context.Background()
	role, err := c.CreateRole(ctx, "db-1", CreateRoleRequest{Name: "bi"})
	if err != nil || role.Password != "p" || role.CreatedAt != nil {
		t.Fatalf("role %+v, err %v", role, err)
	}
	if _, err := c.ResetRolePassword(ctx, "db-1", "bi"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRole(ctx, "db-1", "bi"); err != nil {
		t.Fatal(err)
	}
	db, err := c.CreateDb(ctx, "db-1", CreateDbRequest{Name: "app", Owner: "bi"})
	if err != nil || db.SizeBytes != 8192 {
		t.Fatalf("db %+v, err %v", db, err)
	}
	if _, err := c.CreateDb(ctx, "db-1", CreateDbRequest{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteDb(ctx, "db-1", "app"); err != nil {
		t.Fatal(err)
	}
	want := []struct{ method, path, body string }{
		{"POST", "/v1/databases/db-1/roles", `{"name":"bi"}`},
		{"POST", "/v1/databases/db-1/roles/bi/reset-password", ""},
		{"DELETE", "/v1/databases/db-1/roles/bi", ""},
		{"POST", "/v1/databases/db-1/dbs", `{"name":"app","owner":"bi"}`},
		{"POST", "/v1/databases/db-1/dbs", `{"name":"app"}`},
		{"DELETE", "/v1/databases/db-1/dbs/app", ""},
	}
	got := s.requests()
	for i, w := range want {
		if got[i].method != w.method || got[i].path != w.path || got[i].body != w.body {
			t.Errorf("request %d: %s %s %q, want %s %s %q", i, got[i].method, got[i].path, got[i].body, w.method, w.path, w.body)
		}
	}
}

func TestAllRolesAndAllDbsWalkEveryPage(t *testing.T) {
	for _, key := range []string{"roles", "dbs"} {
		s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
			reply(w, 200, map[string]any{
				"data": map[string]any{key: []map[string]any{{"name": "n" + r.URL.Query().Get("page")}}},
				"meta": map[string]any{"request_id": "r", "page": n, "per_page": 1, "total": 2, "total_pages": 2},
			})
		})
		c := NewClient(WithBaseURL(s.URL))
		var names []string
		if key == "roles" {
			for it := c.AllRoles(context.Background(), "db-1", nil); it.Next(); {
				names = append(names, it.Value().Name)
			}
		} else {
			for it := c.AllDbs(context.Background(), "db-1", nil); it.Next(); {
				names = append(names, it.Value().Name)
			}
		}
		if len(names) != 2 || names[0] != "n1" || names[1] != "n2" {
			t.Errorf("%s: %v", key, names)
		}
	}
}

func TestConfigSendsTypedValuesAndNull(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		reply(w, 200, map[string]any{"data": map[string]any{"parameters": []map[string]any{
			{"name": "work_mem", "value": 65536, "default": 4096, "unit": "kB", "type": "integer", "min": 64, "max": 262144, "allowed": nil},
			{"name": "shared_preload_libraries", "value": []string{"pg_stat_statements"}, "unit": nil, "type": "list", "pending_restart": true},
		}}, "meta": map[string]any{"request_id": "r"}})
	})
	c := NewClient(WithBaseURL(s.URL))
	cfg, err := c.UpdateConfig(context.Background(), "db-1", UpdateConfigRequest{Parameters: map[string]any{"work_mem": "64MB", "jit": nil}})
	if err != nil || len(cfg.Parameters) != 2 || cfg.Parameters[0].Value != float64(65536) || *cfg.Parameters[0].Max != 262144 {
		t.Fatalf("config %+v, err %v", cfg, err)
	}
	if !cfg.Parameters[1].PendingRestart || cfg.Parameters[1].Unit != nil {
		t.Errorf("list parameter %+v", cfg.Parameters[1])
	}
	if _, err := c.GetConfig(context.Background(), "db-1"); err != nil {
		t.Fatal(err)
	}
	got := s.requests()
	if got[0].method != "PATCH" || got[0].path != "/v1/databases/db-1/config" || got[0].body != `{"parameters":{"jit":null,"work_mem":"64MB"}}` {
		t.Errorf("request %+v", got[0])
	}
	if got[1].method != "GET" || got[1].path != "/v1/databases/db-1/config" {
		t.Errorf("request %+v", got[1])
	}
}

func TestExtensionsNameTheLogicalDatabase(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		ext := map[string]any{"name": "pg_trgm", "default_version": "1.6", "installed_version": "1.6", "installed": true, "trusted": true, "allowed": true}
		if r.Method == http.MethodGet {
			reply(w, 200, map[string]any{"data": map[string]any{"extensions": []any{ext}}, "meta": map[string]any{"request_id": "r", "page": 1, "per_page": 20, "total": 1, "total_pages": 1}})
			return
		}
		reply(w, 201, map[string]any{"data": ext, "meta": map[string]any{"request_id": "r"}})
	})
	c := NewClient(WithBaseURL(s.URL))
	ctx := context.Background()
	e, err := c.InstallExtension(ctx, "db-1", InstallExtensionRequest{Name: "pg_trgm", Db: "app"})
	if err != nil || e.InstalledVersion == nil || *e.InstalledVersion != "1.6" {
		t.Fatalf("extension %+v, err %v", e, err)
	}
	if err := c.DeleteExtension(ctx, "db-1", "pg_trgm", "app"); err != nil {
		t.Fatal(err)
	}
	p, err := c.ListExtensions(ctx, "db-1", &ExtensionsOptions{Db: "app"})
	if err != nil || len(p.Extensions) != 1 {
		t.Fatalf("page %+v, err %v", p, err)
	}
	got := s.requests()
	want := []string{"POST /v1/databases/db-1/extensions", "DELETE /v1/databases/db-1/extensions/pg_trgm?db=app", "GET /v1/databases/db-1/extensions?db=app"}
	for i, w := range want {
		g := got[i].method + " " + got[i].path
		if got[i].query != "" {
			g += "?" + got[i].query
		}
		if g != w {
			t.Errorf("request %d: %s, want %s", i, g, w)
		}
	}
	if got[0].body != `{"name":"pg_trgm","db":"app"}` {
		t.Errorf("body %s", got[0].body)
	}
}

func TestLogsAndQueriesSendTheirFilters(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch {
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(r.URL.Path, "/logs"):
			reply(w, 200, map[string]any{"data": map[string]any{
				"entries":     []any{map[string]any{"time": "2026-01-01T00:00:00Z", "severity": "ERROR", "message": "m", "sql_state": "42P01", "backend_type": "client backend", "pid": 7}},
				"next_cursor": "YQ", "prev_cursor": nil,
			}, "meta": map[string]any{"request_id": "r"}})
		default:
			reply(w, 200, map[string]any{"data": map[string]any{"queries": []any{map[string]any{"query": "SELECT $1", "calls": 3, "cache_hit_ratio": nil}}, "stats_reset": nil}, "meta": map[string]any{"request_id": "r"}})
		}
	})
	c := NewClient(WithBaseURL(s.URL))
	ctx := context.Background()
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := c.ListLogs(ctx, "db-1", &LogsOptions{Since: since, Severity: "ERROR", Q: "no_such", Limit: 5, Cursor: "YQ"})
	if err != nil || len(p.Entries) != 1 || p.Entries[0].SqlState == nil || *p.Entries[0].SqlState != "42P01" || p.NextCursor != "YQ" || p.PrevCursor != nil {
		t.Fatalf("page %+v, err %v", p, err)
	}
	q, err := c.ListQueries(ctx, "db-1", &QueriesOptions{OrderBy: "calls", Limit: 1})
	if err != nil || len(q.Queries) != 1 || q.Queries[0].Calls != 3 || q.Queries[0].CacheHitRatio != nil {
		t.Fatalf("queries %+v, err %v", q, err)
	}
	if err := c.ResetQueries(ctx, "db-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListLogs(ctx, "db-1", nil); err != nil {
		t.Fatal(err)
	}
	got := s.requests()
	want := []string{
		"GET /v1/databases/db-1/logs?cursor=YQ&limit=5&q=no_such&severity=ERROR&since=2026-01-01T00%3A00%3A00Z",
		"GET /v1/databases/db-1/queries?limit=1&order_by=calls",
		"POST /v1/databases/db-1/queries/reset",
		"GET /v1/databases/db-1/logs",
	}
	for i, w := range want {
		g := got[i].method + " " + got[i].path
		if got[i].query != "" {
			g += "?" + got[i].query
		}
		if g != w {
			t.Errorf("request %d: %s, want %s", i, g, w)
		}
	}
}
