package dbaas

import (
	"context"
	"net/http"
)

// GetUsage returns the organization's month-to-date usage and its price.
func (c *Client) GetUsage(ctx context.Context) (*Usage, error) {
	var out Usage
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/billing/usage"}, &out)
	return result(&out, err)
}

// ListPaymentMethods returns one page of the organization's payment methods.
func (c *Client) ListPaymentMethods(ctx context.Context, opts *ListOptions) (*PaymentMethodPage, error) {
	var out PaymentMethodPage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/billing/payment-methods", query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllPaymentMethods iterates over every payment method.
func (c *Client) AllPaymentMethods(ctx context.Context, opts *ListOptions) *Iterator[PaymentMethod] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]PaymentMethod, ListMeta, error) {
		p, err := c.ListPaymentMethods(ctx, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.PaymentMethods, p.Meta, nil
	})
}

// AddPaymentMethod adds a card; the first becomes the default.
func (c *Client) AddPaymentMethod(ctx context.Context, body AddPaymentMethodRequest) (*PaymentMethod, error) {
	var out PaymentMethod
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/billing/payment-methods", body: body}, &out)
	return result(&out, err)
}

// UpdatePaymentMethod makes a payment method the default.
func (c *Client) UpdatePaymentMethod(ctx context.Context, id string, body UpdatePaymentMethodRequest) (*PaymentMethod, error) {
	var out PaymentMethod
	_, err := c.call(ctx, request{method: http.MethodPatch, path: pathf("/v1/billing/payment-methods/%s", id), body: body}, &out)
	return result(&out, err)
}

// DeletePaymentMethod removes a payment method (409 while it is needed).
func (c *Client) DeletePaymentMethod(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/billing/payment-methods/%s", id)}, nil)
	return err
}

// ListInvoices returns one page of invoices (one per ended month).
func (c *Client) ListInvoices(ctx context.Context, opts *ListOptions) (*InvoicePage, error) {
	var out InvoicePage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/billing/invoices", query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllInvoices iterates over every invoice.
func (c *Client) AllInvoices(ctx context.Context, opts *ListOptions) *Iterator[Invoice] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]Invoice, ListMeta, error) {
		p, err := c.ListInvoices(ctx, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Invoices, p.Meta, nil
	})
}

// GetInvoicePDF returns an invoice as a PDF document.
func (c *Client) GetInvoicePDF(ctx context.Context, id string) ([]byte, error) {
	_, body, err := c.send(ctx, request{method: http.MethodGet, path: pathf("/v1/billing/invoices/%s/pdf", id)})
	return body, err
}

// CreateAlert sets a spending alert.
func (c *Client) CreateAlert(ctx context.Context, body CreateAlertRequest) (*Alert, error) {
	var out Alert
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/billing/alerts", body: body}, &out)
	return result(&out, err)
}

// ListAlerts returns one page of spending alerts, oldest first.
func (c *Client) ListAlerts(ctx context.Context, opts *ListOptions) (*AlertPage, error) {
	var out AlertPage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/billing/alerts", query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllAlerts iterates over every spending alert.
func (c *Client) AllAlerts(ctx context.Context, opts *ListOptions) *Iterator[Alert] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]Alert, ListMeta, error) {
		p, err := c.ListAlerts(ctx, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Alerts, p.Meta, nil
	})
}

// DeleteAlert removes a spending alert; it never fires again.
func (c *Client) DeleteAlert(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/billing/alerts/%s", id)}, nil)
	return err
}
