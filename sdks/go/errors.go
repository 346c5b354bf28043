package dbaas

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Error is an error answer of the API (any status of 300 or more), usable with errors.As:
//
//	var apiErr *dbaas.Error
//	if errors.As(err, &apiErr) && apiErr.Code == "validation_error" { … apiErr.Details … }
type Error struct {
	Status    int           // HTTP status, e.g. 422
	Code      string        // e.g. "validation_error", "resource_not_found", "rate_limit_exceeded"
	Message   string        // for people
	Details   []ErrorDetail // one entry per invalid field (validation_error); empty otherwise
	RequestID string        // the request's id (X-Request-Id), to quote to support
	// RetryAfter is the answer's Retry-After (429, 503), zero when absent.
	RetryAfter time.Duration
}

// ErrorDetail names one invalid field and what is wrong with it.
type ErrorDetail struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dbaas: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	for _, d := range e.Details {
		fmt.Fprintf(&b, "; %s: %s", d.Field, d.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" (request " + e.RequestID + ")")
	}
	return b.String()
}

// parseError reads the API's error envelope; an answer without it (a proxy's page) keeps its
// status and the start of its body as the message.
func parseError(res *http.Response, body []byte) *Error {
	e := &Error{Status: res.StatusCode, RequestID: res.Header.Get("X-Request-Id")}
	e.RetryAfter, _ = retryAfter(res.Header.Get("Retry-After"))
	var env struct {
		Error *struct {
			Code    string        `json:"code"`
			Message string        `json:"message"`
			Details []ErrorDetail `json:"details"`
		} `json:"error"`
		Meta struct {
			RequestID string `json:"request_id"`
		} `json:"meta"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		e.Code, e.Message, e.Details = env.Error.Code, env.Error.Message, env.Error.Details
		if env.Meta.RequestID != "" {
			e.RequestID = env.Meta.RequestID
		}
		return e
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	if text == "" {
		text = http.StatusText(res.StatusCode)
	}
	e.Message = text
	return e
}
