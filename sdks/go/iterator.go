package dbaas

import (
	"context"
	"net/url"
	"strconv"
)

// ListOptions selects a page of a list (zero values: the API's defaults, page 1 of 20).
type ListOptions struct {
	Page    int
	PerPage int
}

func (o *ListOptions) values() url.Values {
	q := url.Values{}
	if o == nil {
		return q
	}
	if o.Page > 0 {
		q.Set("page", strconv.Itoa(o.Page))
	}
	if o.PerPage > 0 {
		q.Set("per_page", strconv.Itoa(o.PerPage))
	}
	return q
}

// Iterator walks every item of a list, fetching page after page as needed:
//
//	it := c.AllDatabases(ctx, nil)
//	for it.Next() {
//		db := it.Value()
//	}
//	if err := it.Err(); err != nil { … }
type Iterator[T any] struct {
	ctx   context.Context
	fetch func(ctx context.Context, page int) ([]T, ListMeta, error)
	page  int // the next page to fetch; 0 once the last was fetched
	items []T
	cur   T
	err   error
}

func newIterator[T any](ctx context.Context, start int, fetch func(ctx context.Context, page int) ([]T, ListMeta, error)) *Iterator[T] {
	if start < 1 {
		start = 1
	}
	return &Iterator[T]{ctx: ctx, fetch: fetch, page: start}
}

// Next advances to the next item, fetching the next page when the current one is used up; it
// returns false at the end or on an error (see Err).
func (it *Iterator[T]) Next() bool {
	for len(it.items) == 0 {
		if it.err != nil || it.page == 0 {
			return false
		}
		items, meta, err := it.fetch(it.ctx, it.page)
		if err != nil {
			it.err = err
			return false
		}
		it.items = items
		if meta.Page >= meta.TotalPages || len(items) == 0 {
			it.page = 0
		} else {
			it.page = meta.Page + 1
		}
	}
	it.cur, it.items = it.items[0], it.items[1:]
	return true
}

// Value is the item Next moved to.
func (it *Iterator[T]) Value() T { return it.cur }

// Err is the error that ended the iteration, nil when it reached the end.
func (it *Iterator[T]) Err() error { return it.err }

// Collect reads every remaining item into a slice.
func (it *Iterator[T]) Collect() ([]T, error) {
	var all []T
	for it.Next() {
		all = append(all, it.Value())
	}
	return all, it.Err()
}
