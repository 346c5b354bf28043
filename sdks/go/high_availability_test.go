package dbaas

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

func TestHighAvailabilityMethodsSendTheirPathsAndBodies(t *testing.T) {
	ha := map[string]any{
		"standbys":    1,
		"synchronous": true,
		"members": []any{
			map[string]any{"id": "node-p", "role": "primary", "status": "running", "region": "fsn1", "lag_bytes": 0},
			map[string]any{"id": "node-s", "role": "standby", "status": "running", "region": "fsn1", "lag_bytes": 512},
		},
		"last_failover": map[string]any{"at": "2026-01-05T10:00:12Z", "reason": "lease lost", "from": "node-x", "to": "node-p"},
	}
	op := map[string]any{
		"id": "op-1", "type": "failover", "status": "running", "started_at": "2026-01-05T10:00:00Z",
		"finished_at": nil, "error": nil, "reason": "planned switchover requested", "from": "node-p", "to": "node-s",
	}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		data := any(ha)
		status := 200
		switch {
		case r.URL.Path == "/v1/databases/db-1/failover":
			data, status = op, 202
		case r.URL.Path == "/v1/databases/db-1":
			data, status = map[string]any{"id": "db-1", "status": "provisioning"}, 201
		}
		reply(w, status, map[string]any{"data": data, "meta": map[string]any{"request_id": "r"}})
	})
	c := NewClient(WithBaseURL(s.URL))
	ctx := context.Background()
	got, err := c.GetHighAvailability(ctx, "db-1")
	if err != nil || got.Standbys != 1 || len(got.Members) != 2 || got.Members[1].LagBytes != 512 || got.LastFailover == nil || got.LastFailover.From != "node-x" {
		t.Fatalf("high availability %+v, err %v", got, err)
	}
	if _, err := c.SetHighAvailability(ctx, "db-1", SetHighAvailabilityRequest{Standbys: 1, Synchronous: true}); err != nil {
		t.Fatal(err)
	}
	o, err := c.Failover(ctx, "db-1")
	if err != nil || o.Type != "failover" || o.From != "node-p" || o.To != "node-s" {
		t.Fatalf("operation %+v, err %v", o, err)
	}
	one, yes := 1, true
	if _, err := c.CreateDatabase(ctx, CreateDatabaseRequest{Name: "orders", Region: "fsn1", Tier: "micro", Standbys: &one, Synchronous: &yes}); err != nil {
		t.Fatal(err)
	}
	want := []struct{ method, path, body string }{
		{"GET", "/v1/databases/db-1/high-availability", ""},
		{"PUT", "/v1/databases/db-1/high-availability", `{"standbys":1,"synchronous":true}`},
		{"POST", "/v1/databases/db-1/failover", ""},
		{"POST", "/v1/databases", `{"name":"orders","region":"fsn1","tier":"micro","standbys":1,"synchronous":true}`},
	}
	reqs := s.requests()
	for i, w := range want {
		if reqs[i].method != w.method || reqs[i].path != w.path || reqs[i].body != w.body {
			t.Errorf("request %d: %s %s %q, want %s %s %q", i, reqs[i].method, reqs[i].path, reqs[i].body, w.method, w.path, w.body)
		}
	}
}

func TestHighAvailabilityWithoutAFailoverAndA409(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Method == http.MethodPost {
			reply(w, 409, map[string]any{"error": map[string]any{"code": "conflict", "message": "no healthy standby to fail over to", "details": []any{}}})
			return
		}
		reply(w, 200, map[string]any{"data": map[string]any{"standbys": 0, "synchronous": false, "members": []any{}, "last_failover": nil}})
	})
	c := NewClient(WithBaseURL(s.URL))
	got, err := c.GetHighAvailability(context.Background(), "db-1")
	if err != nil || got.LastFailover != nil {
		t.Fatalf("high availability %+v, err %v", got, err)
	}
	_, err = c.Failover(context.Background(), "db-1")
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Message != "no healthy standby to fail over to" {
		t.Fatalf("err %v", err)
	}
}
