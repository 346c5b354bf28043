package dbaas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// recorded is one request the test server saw.
type recorded struct {
	method, path, query, auth, key, contentType, body string
}

// server answers with handle and records every request.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	seen []recorded
}

func newServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, recorded{
			r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"),
			r.Header.Get("Content-Type"), string(body),
		})
		n := len(s.seen)
		s.mu.Unlock()
		handle(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.seen...)
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_test")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, code, message string, details []ErrorDetail) {
	if details == nil {
		details = []ErrorDetail{}
	}
	reply(w, status, map[string]any{
		"error": map[string]any{"code": code, "message": message, "details": details},
		"meta":  map[string]any{"request_id": "req_err"},
	})
}

func created(w http.ResponseWriter) {
	reply(w, 201, map[string]any{
		"data": map[string]any{"id": "db-abc", "name": "orders", "status": "provisioning", "port": 15400, "password": "pw"},
		"meta": map[string]any{"request_id": "req_ok"},
	})
}

// recordWaits makes c record its retry waits instead of sleeping them.
func recordWaits(c *Client) *[]time.Duration {
	var waits []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return &waits
}

func TestUnwrapsTheEnvelopeAndSendsTheToken(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) { created(w) })
	c := NewClient(WithBaseURL(s.URL+"/"), WithToken("dbs_secret"))
	db, err := c.CreateDatabase(context.Background(), CreateDatabaseRequest{Name: "orders", Region: "fsn1", Tier: "micro"})
	if err != nil {
		t.Fatal(err)
	}
	if db.ID != "db-abc" || db.Port != 15400 || db.Password != "pw" {
		t.Fatalf("decoded %+v", db)
	}
	got := s.requests()[0]
	if got.method != "POST" || got.path != "/v1/databases" || got.auth != "Bearer dbs_secret" || got.contentType != "application/json" {
		t.Fatalf("request %+v", got)
	}
	if got.body != `{"name":"orders","region":"fsn1","tier":"micro"}` {
		t.Fatalf("body %s", got.body)
	}
}

func TestBaseURLAndCredentialFromTheEnvironment(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(204) })
	t.Setenv("DBAAS_URL", s.URL)
	t.Setenv("DBAAS_TOKEN", "dbs_from_env")
	if err := NewClient().DeleteDatabase(context.Background(), "db-abc"); err != nil {
		t.Fatal(err)
	}
	if err := NewClient(WithAPIKey("dbk_key")).RevokeAPIKey(context.Background(), "key-1"); err != nil {
		t.Fatal(err)
	}
	seen := s.requests()
	if got := seen[0]; got.method != "DELETE" || got.path != "/v1/databases/db-abc" || got.auth != "Bearer dbs_from_env" {
		t.Fatalf("request %+v", got)
	}
	if got := seen[1]; got.path != "/v1/organization/api-keys/key-1" || got.auth != "Bearer dbk_key" {
		t.Fatalf("request %+v", got)
	}
}

func TestRetries429AfterRetryAfterWithTheSameIdempotencyKey(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			apiError(w, 429, "rate_limit_exceeded", "slow down", nil)
			return
		}
		created(w)
	})
	c := NewClient(WithBaseURL(s.URL))
	waits := recordWaits(c)
	if _, err := c.CreateDatabase(context.Background(), CreateDatabaseRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*waits) != "[1s]" {
		t.Fatalf("waits %v, want Retry-After's 1 s once", *waits)
	}
	seen := s.requests()
	if len(seen) != 2 || seen[0].key == "" || seen[0].key != seen[1].key || seen[0].body != seen[1].body {
		t.Fatalf("requests %+v", seen)
	}
}

func TestGivesUpOn503AfterMaxRetries(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		apiError(w, 503, "service_unavailable", "try later", nil)
	})
	c := NewClient(WithBaseURL(s.URL), WithMaxRetries(2))
	waits := recordWaits(c)
	_, err := c.GetDatabase(context.Background(), "db-abc")
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 503 || apiErr.Code != "service_unavailable" {
		t.Fatalf("error %v", err)
	}
	seen := s.requests()
	if len(seen) != 3 {
		t.Fatalf("%d attempts, want 3", len(seen))
	}
	if fmt.Sprint(*waits) != "[500ms 1s]" {
		t.Fatalf("waits %v without Retry-After, want 500ms then 1s", *waits)
	}
	if seen[0].key != "" {
		t.Fatalf("a GET carried Idempotency-Key %q", seen[0].key)
	}
}

func TestDoesNotWaitBeyondMaxRetryWait(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", "3600")
		apiError(w, 503, "maintenance_mode", "back in an hour", nil)
	})
	c := NewClient(WithBaseURL(s.URL), WithMaxRetryWait(5*time.Second))
	waits := recordWaits(c)
	_, err := c.ListTiers(context.Background())
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Code != "maintenance_mode" || apiErr.RetryAfter != time.Hour {
		t.Fatalf("error %v", err)
	}
	if n := len(s.requests()); n != 1 || len(*waits) != 0 {
		t.Fatalf("%d attempts after waits %v, want 1 and none", n, *waits)
	}
}

func TestRetriesAnIdempotencyKeyStillInProgress(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			apiError(w, 409, "resource_conflict", "a request with this Idempotency-Key is still in progress", nil)
			return
		}
		created(w)
	})
	ctx := WithIdempotencyKey(context.Background(), "my-key-1")
	c := NewClient(WithBaseURL(s.URL))
	waits := recordWaits(c)
	if _, err := c.CreateDatabase(ctx, CreateDatabaseRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*waits) != "[1s]" {
		t.Fatalf("waits %v, want Retry-After's 1 s once", *waits)
	}
	seen := s.requests()
	if len(seen) != 2 || seen[0].key != "my-key-1" || seen[1].key != "my-key-1" {
		t.Fatalf("requests %+v", seen)
	}
}

func TestOtherErrorsAreNotRetried(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		apiError(w, 422, "validation_error", "invalid request", []ErrorDetail{{Field: "name", Message: "must be 3-63 characters"}})
	})
	c := NewClient(WithBaseURL(s.URL))
	_, err := c.CreateDatabase(context.Background(), CreateDatabaseRequest{Name: "x"})
	var apiErr *Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v is not a *Error", err)
	}
	want := Error{Status: 422, Code: "validation_error", Message: "invalid request", RequestID: "req_err"}
	if apiErr.Status != want.Status || apiErr.Code != want.Code || apiErr.Message != want.Message || apiErr.RequestID != want.RequestID ||
		len(apiErr.Details) != 1 || apiErr.Details[0].Field != "name" {
		t.Fatalf("error %+v", apiErr)
	}
	if apiErr.Error() != "dbaas: 422 validation_error: invalid request; name: must be 3-63 characters (request req_err)" {
		t.Fatalf("message %q", apiErr.Error())
	}
	if n := len(s.requests()); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	// Two calls are two requests: each POST gets its own key.
	_, _ = c.CreateDatabase(context.Background(), CreateDatabaseRequest{Name: "x"})
	if seen := s.requests(); seen[0].key == seen[1].key {
		t.Fatalf("two POSTs shared the key %q", seen[0].key)
	}
}

func TestAnErrorWithoutTheEnvelope(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(502)
		_, _ = io.WriteString(w, "<html>bad gateway</html>")
	})
	_, err := NewClient(WithBaseURL(s.URL)).GetUsage(context.Background())
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 502 || apiErr.Code != "" || apiErr.Message != "<html>bad gateway</html>" {
		t.Fatalf("error %#v", err)
	}
}

func TestIteratesOverEveryPage(t *testing.T) {
	const total, perPage = 5, 2
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		var items []map[string]any
		for i := (page - 1) * perPage; i < total && i < page*perPage; i++ {
			items = append(items, map[string]any{"id": fmt.Sprintf("db-%d", i), "status": r.URL.Query().Get("status")})
		}
		w.Header().Set("X-RateLimit-Limit", "100")
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(100-n))
		w.Header().Set("X-RateLimit-Reset", "1700000000")
		reply(w, 200, map[string]any{
			"data": map[string]any{"databases": items},
			"meta": map[string]any{"request_id": "r", "page": page, "per_page": perPage, "total": total, "total_pages": 3},
		})
	})
	c := NewClient(WithBaseURL(s.URL))
	if (c.RateLimit() != RateLimit{}) {
		t.Fatalf("rate limit before any request: %+v", c.RateLimit())
	}
	all, err := c.AllDatabases(context.Background(), &ListDatabasesOptions{ListOptions: ListOptions{PerPage: perPage}, Status: "running"}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != total || all[0].ID != "db-0" || all[4].ID != "db-4" || all[4].Status != "running" {
		t.Fatalf("items %+v", all)
	}
	seen := s.requests()
	if len(seen) != 3 || seen[2].query != "page=3&per_page=2&status=running" {
		t.Fatalf("requests %+v", seen)
	}
	if rl := c.RateLimit(); rl.Limit != 100 || rl.Remaining != 97 || !rl.Reset.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("rate limit %+v", rl)
	}
}

func TestAnIteratorStopsAtAnError(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 2 {
			apiError(w, 401, "invalid_token", "expired", nil)
			return
		}
		reply(w, 200, map[string]any{
			"data": map[string]any{"members": []map[string]any{{"id": "member-1"}}},
			"meta": map[string]any{"request_id": "r", "page": 1, "per_page": 1, "total": 2, "total_pages": 2},
		})
	})
	it := NewClient(WithBaseURL(s.URL)).AllMembers(context.Background(), &ListOptions{PerPage: 1})
	var ids []string
	for it.Next() {
		ids = append(ids, it.Value().ID)
	}
	var apiErr *Error
	if len(ids) != 1 || !errors.As(it.Err(), &apiErr) || apiErr.Status != 401 || it.Next() {
		t.Fatalf("ids %v, err %v", ids, it.Err())
	}
}

func statusServer(t *testing.T, statuses ...string) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		status := statuses[len(statuses)-1]
		if n <= len(statuses) {
			status = statuses[n-1]
		}
		reply(w, 200, map[string]any{
			"data": map[string]any{"id": "db-abc", "status": status, "status_reason": "disk full"},
			"meta": map[string]any{"request_id": "r"},
		})
	})
}

func TestWaitForStatus(t *testing.T) {
	s := statusServer(t, "provisioning", "provisioning", "running")
	c := NewClient(WithBaseURL(s.URL), WithPollInterval(10*time.Millisecond))
	db, err := c.WaitForStatus(context.Background(), "db-abc", "running")
	if err != nil || db.Status != "running" || len(s.requests()) != 3 {
		t.Fatalf("db %+v, err %v, %d requests", db, err, len(s.requests()))
	}

	failed := statusServer(t, "provisioning", "failed")
	c = NewClient(WithBaseURL(failed.URL), WithPollInterval(10*time.Millisecond))
	if _, err := c.WaitForStatus(context.Background(), "db-abc", "running"); !errors.Is(err, ErrDatabaseFailed) {
		t.Fatalf("error %v", err)
	}

	stuck := statusServer(t, "provisioning")
	c = NewClient(WithBaseURL(stuck.URL), WithPollInterval(10*time.Millisecond), WithWaitTimeout(100*time.Millisecond))
	if _, err := c.WaitForStatus(context.Background(), "db-abc", "running"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v", err)
	}
}

// dropFirst closes the connection of the first request without an answer, then answers ok.
func dropFirst(t *testing.T) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		reply(w, 200, map[string]any{"data": map[string]any{"id": "db-abc"}, "meta": map[string]any{"request_id": "r"}})
	})
}

func TestResendsAGetOrPostThatGotNoAnswerButNotAPatch(t *testing.T) {
	get := dropFirst(t)
	c := NewClient(WithBaseURL(get.URL))
	waits := recordWaits(c)
	if _, err := c.GetDatabase(context.Background(), "db-abc"); err != nil || len(get.requests()) != 2 {
		t.Fatalf("GET: err %v, %d requests", err, len(get.requests()))
	}

	post := dropFirst(t)
	c = NewClient(WithBaseURL(post.URL))
	waits = recordWaits(c)
	if _, err := c.StopDatabase(context.Background(), "db-abc"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*waits) != "[500ms]" {
		t.Fatalf("waits %v, want 500ms", *waits)
	}
	if seen := post.requests(); len(seen) != 2 || seen[0].key == "" || seen[0].key != seen[1].key {
		t.Fatalf("POST requests %+v", seen)
	}

	patch := dropFirst(t)
	_, err := NewClient(WithBaseURL(patch.URL)).UpdateDatabase(context.Background(), "db-abc", UpdateDatabaseRequest{Name: "new-name"})
	var apiErr *Error
	if err == nil || errors.As(err, &apiErr) || len(patch.requests()) != 1 {
		t.Fatalf("PATCH: err %v, %d requests", err, len(patch.requests()))
	}
}
