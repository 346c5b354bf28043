package dbaas

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The server's log and query insights of a database: GET /logs (newest last, cursors to page back and to
// tail), GET /queries (pg_stat_statements, normalized) and POST /queries/reset.

// LogsOptions filters and pages the log; it may be nil (the newest 100 entries).
type LogsOptions struct {
	// Since and Until bound the entries' time (zero: unbounded).
	Since, Until time.Time
	// Severity is the least severe level returned: "ERROR" returns ERROR, FATAL and PANIC.
	Severity string
	// Q is text in the message, detail, hint or statement (any case).
	Q string
	// Limit is at most how many entries (1…1000; 0: 100).
	Limit int
	// Cursor is NextCursor (entries after) or PrevCursor (entries before) of an earlier page.
	Cursor string
}

func (o *LogsOptions) values() url.Values {
	q := url.Values{}
	if o == nil {
		return q
	}
	if !o.Since.IsZero() {
		q.Set("since", o.Since.UTC().Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		q.Set("until", o.Until.UTC().Format(time.RFC3339Nano))
	}
	if o.Severity != "" {
		q.Set("severity", o.Severity)
	}
	if o.Q != "" {
		q.Set("q", o.Q)
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return q
}

// ListLogs returns one page of the server's log, oldest first: the newest entries matching opts, or a page
// from opts.Cursor.
func (c *Client) ListLogs(ctx context.Context, databaseID string, opts *LogsOptions) (*LogPage, error) {
	var out LogPage
	_, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/logs", databaseID), query: opts.values()}, &out)
	return result(&out, err)
}

// QueriesOptions orders and limits the query statistics; it may be nil (by total_time, 20).
type QueriesOptions struct {
	// OrderBy is total_time, mean_time or calls (descending).
	OrderBy string
	// Limit is at most how many statements (1…100; 0: 20).
	Limit int
}

// ListQueries returns query insights from pg_stat_statements (409 while the database is not running).
func (c *Client) ListQueries(ctx context.Context, databaseID string, opts *QueriesOptions) (*QueryPage, error) {
	var out QueryPage
	q := url.Values{}
	if opts != nil {
		if opts.OrderBy != "" {
			q.Set("order_by", opts.OrderBy)
		}
		if opts.Limit != 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
	}
	_, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/queries", databaseID), query: q}, &out)
	return result(&out, err)
}

// ResetQueries starts the query statistics again from nothing.
func (c *Client) ResetQueries(ctx context.Context, databaseID string) error {
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/queries/reset", databaseID)}, nil)
	return err
}
