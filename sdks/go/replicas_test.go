package dbaas

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestReplicaMethodsNameTheDatabaseAndTheReplica(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		data := map[string]any{"id": "rep-1", "database_id": "db-1", "status": "provisioning", "lag_bytes": 4096}
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
			return
		case r.URL.Path == "/v1/databases/db-1/replicas/rep-1/promote":
			data = map[string]any{"id": "db-2", "name": "reports", "status": "starting"}
		}
		reply(w, 200, map[string]any{"data": data, "meta": map[string]any{"request_id": "r"}})
	})
	c := NewClient(WithBaseURL(s.URL))
	ctx := context.Background()
	r, err := c.CreateReplica(ctx, "db-1", CreateReplicaRequest{Name: "reports"})
	if err != nil || r.ID != "rep-1" || r.LagBytes != 4096 {
		t.Fatalf("replica %+v, err %v", r, err)
	}
	if _, err := c.GetReplica(ctx, "db-1", "rep-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteReplica(ctx, "db-1", "rep-1"); err != nil {
		t.Fatal(err)
	}
	db, err := c.PromoteReplica(ctx, "db-1", "rep-1")
	if err != nil || db.ID != "db-2" {
		t.Fatalf("database %+v, err %v", db, err)
	}
	want := []struct{ method, path, body string }{
		{"POST", "/v1/databases/db-1/replicas", `{"name":"reports"}`},
		{"GET", "/v1/databases/db-1/replicas/rep-1", ""},
		{"DELETE", "/v1/databases/db-1/replicas/rep-1", ""},
		{"POST", "/v1/databases/db-1/replicas/rep-1/promote", ""},
	}
	got := s.requests()
	for i, w := range want {
		if got[i].method != w.method || got[i].path != w.path || got[i].body != w.body {
			t.Errorf("request %d: %s %s %q, want %s %s %q", i, got[i].method, got[i].path, got[i].body, w.method, w.path, w.body)
		}
	}
	if got[0].key == "" || got[3].key == "" {
		t.Errorf("a POST without an Idempotency-Key")
	}
}

func TestAllReplicasWalksEveryPage(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		reply(w, 200, map[string]any{
			"data": map[string]any{"replicas": []map[string]any{{"id": "rep-" + r.URL.Query().Get("page")}}},
			"meta": map[string]any{"request_id": "r", "page": n, "per_page": 1, "total": 2, "total_pages": 2},
		})
	})
	it := NewClient(WithBaseURL(s.URL)).AllReplicas(context.Background(), "db-1", nil)
	var ids []string
	for it.Next() {
		ids = append(ids, it.Value().ID)
	}
	if it.Err() != nil || len(ids) != 2 || ids[0] != "rep-1" || ids[1] != "rep-2" {
		t.Fatalf("ids %v, err %v", ids, it.Err())
	}
}

func TestWaitForReplicaStatus(t *testing.T) {
	s := statusServer(t, "provisioning", "running")
	c := NewClient(WithBaseURL(s.URL), WithPollInterval(10*time.Millisecond))
	r, err := c.WaitForReplicaStatus(context.Background(), "db-abc", "rep-abc", "running")
	if err != nil || r.Status != "running" || s.requests()[0].path != "/v1/databases/db-abc/replicas/rep-abc" {
		t.Fatalf("replica %+v, err %v, requests %v", r, err, s.requests())
	}
	failed := statusServer(t, "failed")
	c = NewClient(WithBaseURL(failed.URL), WithPollInterval(10*time.Millisecond))
	r, err = c.WaitForReplicaStatus(context.Background(), "db-abc", "rep-abc", "running")
	if !errors.Is(err, ErrDatabaseFailed) || r == nil || r.StatusReason != "disk full" {
		t.Fatalf("replica %+v, error %v", r, err)
	}
}
