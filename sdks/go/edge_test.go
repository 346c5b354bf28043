package dbaas

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestTrustedSourceAndPoolerMethodsNameTheDatabase(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
			return
		case r.URL.Path == "/v1/databases/db-1/pooler":
			reply(w, 200, map[string]any{"data": map[string]any{"enabled": true, "mode": "session", "pool_size": 10, "max_client_connections": 1000}, "meta": map[string]any{"request_id": "r"}})
			return
		}
		reply(w, 201, map[string]any{"data": map[string]any{"id": "ts-1", "cidr": "203.0.113.0/24", "description": "", "expires_at": nil, "created_at": "2026-01-01T00:00:00Z"}, "meta": map[string]any{"request_id": "r"}})
	})
	c := NewClient(WithBaseURL(s.URL))
	ctx := context.Background()
	until := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ts, err := c.AddTrustedSource(ctx, "db-1", CreateTrustedSourceRequest{Cidr: "203.0.113.0/24", ExpiresAt: &until})
	if err != nil || ts.ID != "ts-1" || ts.ExpiresAt != nil {
		t.Fatalf("trusted source %+v, err %v", ts, err)
	}
	if err := c.RemoveTrustedSource(ctx, "db-1", "ts-1"); err != nil {
		t.Fatal(err)
	}
	if p, err := c.GetPooler(ctx, "db-1"); err != nil || p.MaxClientConnections != 1000 {
		t.Fatalf("pooler %+v, err %v", p, err)
	}
	size := 10
	if p, err := c.UpdatePooler(ctx, "db-1", UpdatePoolerRequest{Mode: "session", PoolSize: &size}); err != nil || p.Mode != "session" {
		t.Fatalf("pooler %+v, err %v", p, err)
	}
	want := []struct{ method, path, body string }{
		{"POST", "/v1/databases/db-1/trusted-sources", `{"cidr":"203.0.113.0/24","expires_at":"2030-01-01T00:00:00Z"}`},
		{"DELETE", "/v1/databases/db-1/trusted-sources/ts-1", ""},
		{"GET", "/v1/databases/db-1/pooler", ""},
		{"PATCH", "/v1/databases/db-1/pooler", `{"mode":"session","pool_size":10}`},
	}
	got := s.requests()
	for i, w := range want {
		if got[i].method != w.method || got[i].path != w.path || got[i].body != w.body {
			t.Errorf("request %d: %s %s %q, want %s %s %q", i, got[i].method, got[i].path, got[i].body, w.method, w.path, w.body)
		}
	}
	if got[0].key == "" {
		t.Errorf("a POST without an Idempotency-Key")
	}
}

func TestAllTrustedSourcesWalksEveryPage(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		reply(w, 200, map[string]any{
			"data": map[string]any{"trusted_sources": []map[string]any{{"id": "ts-" + r.URL.Query().Get("page"), "cidr": "10.0.0.0/8", "description": "", "expires_at": nil, "created_at": "2026-01-01T00:00:00Z"}}},
			"meta": map[string]any{"request_id": "r", "page": n, "per_page": 1, "total": 2, "total_pages": 2},
		})
	})
	it := NewClient(WithBaseURL(s.URL)).AllTrustedSources(context.Background(), "db-1", &ListOptions{PerPage: 1})
	var ids []string
	for it.Next() {
		ids = append(ids, it.Value().ID)
	}
	if it.Err() != nil || len(ids) != 2 || ids[0] != "ts-1" || ids[1] != "ts-2" {
		t.Fatalf("ids %v, err %v", ids, it.Err())
	}
}
