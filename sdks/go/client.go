// Package dbaas is the Go client of the managed PostgreSQL API (/v1).
//
// Every operation of the API is a method of *Client taking a context.Context
// first and returning (T, error) (or only an error when the API answers 204).
// The response envelope is unwrapped; an API error is a *Error, usable with
// errors.As. 429 and 503 answers are retried after their Retry-After (bounded),
// and every POST carries an Idempotency-Key that its retries reuse.
package dbaas

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultBaseURL is used when neither WithBaseURL nor DBAAS_URL says otherwise (what `npm start` serves).
const DefaultBaseURL = "http://127.0.0.1:8080"

// Client calls the API. It is safe for concurrent use; build one per process.
type Client struct {
	baseURL      string
	token        string
	http         *http.Client
	maxRetries   int
	maxRetryWait time.Duration
	pollInterval time.Duration
	waitTimeout  time.Duration
	userAgent    string
	// sleep waits d before a retry, or returns ctx's error when it ends first (tests record it instead).
	sleep func(ctx context.Context, d time.Duration) error

	mu        sync.Mutex
	rateLimit RateLimit
}

// Option configures a Client.
type Option func(*Client)

// WithBaseURL sets the API's address, e.g. "https://api.example.net" (default: $DBAAS_URL, else DefaultBaseURL).
func WithBaseURL(u string) Option { return func(c *Client) { c.baseURL = strings.TrimRight(u, "/") } }

// WithToken authenticates with a login token (dbs_…), sent as "Authorization: Bearer" (default: $DBAAS_TOKEN).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithAPIKey authenticates with an API key's secret (dbk_…); the API takes it as a bearer credential too.
func WithAPIKey(secret string) Option { return func(c *Client) { c.token = secret } }

// WithHTTPClient replaces the default HTTP client (30 s per request), e.g. for proxies or TLS settings.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithMaxRetries sets how often a 429 or 503 answer is retried (default 3; 0 turns retries off).
func WithMaxRetries(n int) Option { return func(c *Client) { c.maxRetries = n } }

// WithMaxRetryWait bounds one wait between retries (default 60 s, the rate limit's window): an answer asking for a longer
// Retry-After is returned as its *Error at once instead of being waited for.
func WithMaxRetryWait(d time.Duration) Option { return func(c *Client) { c.maxRetryWait = d } }

// WithPollInterval sets how often WaitForStatus looks at the database (default 1 s).
func WithPollInterval(d time.Duration) Option { return func(c *Client) { c.pollInterval = d } }

// WithWaitTimeout sets how long WaitForStatus waits when its context has no deadline (default 10 min).
func WithWaitTimeout(d time.Duration) Option { return func(c *Client) { c.waitTimeout = d } }

// NewClient builds a client; without WithBaseURL it uses $DBAAS_URL, else DefaultBaseURL, and
// without WithToken or WithAPIKey the credential in $DBAAS_TOKEN (none when unset).
func NewClient(opts ...Option) *Client {
	base := os.Getenv("DBAAS_URL")
	if base == "" {
		base = DefaultBaseURL
	}
	c := &Client{
		baseURL:      strings.TrimRight(base, "/"),
		token:        os.Getenv("DBAAS_TOKEN"),
		http:         &http.Client{Timeout: 30 * time.Second},
		maxRetries:   3,
		maxRetryWait: 60 * time.Second,
		pollInterval: time.Second,
		waitTimeout:  10 * time.Minute,
		userAgent:    "dbaas-go/0.1",
		sleep:        sleepContext,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// RateLimit is what the X-RateLimit-* headers of the last response said.
type RateLimit struct {
	Limit     int       // requests allowed in the window closest to exhaustion
	Remaining int       // requests left in that window
	Reset     time.Time // when that window resets
}

// RateLimit returns the rate-limit headers of the last response that had them (zero before any).
func (c *Client) RateLimit() RateLimit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rateLimit
}

type idempotencyKeyCtx struct{}

// WithIdempotencyKey makes the POST issued with ctx use key as its Idempotency-Key instead of a
// generated one: a retry of the same logical request in a later process then gets the stored answer.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// envelope is the API's success body: the payload in data, request id and paging in meta.
type envelope struct {
	Data json.RawMessage `json:"data"`
	Meta ListMeta        `json:"meta"`
}

// request is one API call: method, path (with the query), a JSON body or nil.
type request struct {
	method string
	path   string
	query  url.Values
	body   any
}

// call performs r and decodes the envelope's data into out (when out is non-nil); it returns the meta.
func (c *Client) call(ctx context.Context, r request, out any) (ListMeta, error) {
	res, body, err := c.send(ctx, r)
	if err != nil {
		return ListMeta{}, err
	}
	if res.StatusCode == http.StatusNoContent || out == nil {
		return ListMeta{}, nil
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return ListMeta{}, fmt.Errorf("dbaas: %s %s: decoding the response: %w", r.method, r.path, err)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return ListMeta{}, fmt.Errorf("dbaas: %s %s: decoding data: %w", r.method, r.path, err)
	}
	return env.Meta, nil
}

// send performs r with retries (of 429/503, and of a GET or POST that got no answer) and returns a 2xx response with its body read, or an error.
func (c *Client) send(ctx context.Context, r request) (*http.Response, []byte, error) {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return nil, nil, fmt.Errorf("dbaas: encoding the request: %w", err)
		}
	}
	key := ""
	if r.method == http.MethodPost {
		key = idempotencyKey(ctx)
	}
	target := c.baseURL + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, r.method, target, bytes.NewReader(payload))
		if err != nil {
			return nil, nil, fmt.Errorf("dbaas: %w", err)
		}
		req.Header.Set("User-Agent", c.userAgent)
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := c.http.Do(req)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(res.Body)
			res.Body.Close()
		}
		var failure error
		var wait time.Duration
		var retry bool
		if err != nil {
			failure = fmt.Errorf("dbaas: %s %s: %w", r.method, r.path, err)
			// No answer: a GET, or a POST under its Idempotency-Key, is safe to send again; a PATCH or
			// DELETE may have been applied and is not.
			retry = ctx.Err() == nil && (r.method == http.MethodGet || key != "") && attempt < c.maxRetries
			wait = backoff(attempt)
		} else {
			c.noteRateLimit(res.Header)
			if res.StatusCode < 300 {
				return res, body, nil
			}
			failure = parseError(res, body)
			wait, retry = c.retryDelay(res, key, attempt)
		}
		if !retry {
			return nil, nil, failure
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, nil, fmt.Errorf("dbaas: %s %s: waiting to retry %v: %w", r.method, r.path, failure, err)
		}
	}
}

// sleepContext waits d, or until ctx ends (then returns its error).
func sleepContext(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// retryDelay says whether an error answer is retried and after how long: 429 and 503 (and a 409
// saying the same Idempotency-Key is still running, which carries Retry-After), at most maxRetries
// times, after Retry-After when given (never longer than maxRetryWait) or else 0.5 s, 1 s, 2 s, ….
func (c *Client) retryDelay(res *http.Response, key string, attempt int) (time.Duration, bool) {
	if attempt >= c.maxRetries {
		return 0, false
	}
	after, hasAfter := retryAfter(res.Header.Get("Retry-After"))
	switch {
	case res.StatusCode == http.StatusTooManyRequests, res.StatusCode == http.StatusServiceUnavailable:
	case res.StatusCode == http.StatusConflict && key != "" && hasAfter:
	default:
		return 0, false
	}
	if !hasAfter {
		after = backoff(attempt)
	}
	if after > c.maxRetryWait {
		return 0, false
	}
	return after, true
}

// backoff is the wait before retry attempt+1 when the server did not say: 0.5 s, 1 s, 2 s, ….
func backoff(attempt int) time.Duration { return (500 * time.Millisecond) << attempt }

// retryAfter parses Retry-After: seconds, or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := time.Until(t)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

func (c *Client) noteRateLimit(h http.Header) {
	limit, errL := strconv.Atoi(h.Get("X-RateLimit-Limit"))
	remaining, errR := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	reset, errS := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if errL != nil || errR != nil || errS != nil {
		return
	}
	c.mu.Lock()
	c.rateLimit = RateLimit{Limit: limit, Remaining: remaining, Reset: time.Unix(reset, 0)}
	c.mu.Unlock()
}

// idempotencyKey is the caller's key from WithIdempotencyKey, else a new random one.
func idempotencyKey(ctx context.Context) string {
	if k, ok := ctx.Value(idempotencyKeyCtx{}).(string); ok && k != "" {
		return k
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("dbaas: crypto/rand failed: " + err.Error())
	}
	return "go-" + hex.EncodeToString(b[:])
}

// pathf builds a path, escaping each argument as one path segment.
func pathf(format string, ids ...string) string {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = url.PathEscape(id)
	}
	return fmt.Sprintf(format, args...)
}
