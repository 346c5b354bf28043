"""Billing: usage, payment methods, invoices and spending alerts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ._base import BaseClient, Page, segment
from .models import Alert, CreateAlertRequest, Invoice, PaymentMethod, Usage


class BillingMixin(BaseClient):
    def get_usage(self) -> Usage:
        """The usage and cost of the month so far."""
        return self._data("GET", "/v1/billing/usage")

    def list_payment_methods(self, *, page: int | None = None, per_page: int | None = None) -> Page:
        return self._page("/v1/billing/payment-methods", "payment_methods", {"page": page, "per_page": per_page})

    def iter_payment_methods(self) -> Iterator[PaymentMethod]:
        return self._iterate("/v1/billing/payment-methods", "payment_methods", {})

    def add_payment_method(self, token: str, *, type: str = "card") -> PaymentMethod:  # noqa: A002 - the API's field name
        """Adds a card from a payment processor token (locally: ``tok_visa``, ``tok_mastercard``)."""
        return self._data("POST", "/v1/billing/payment-methods", body={"type": type, "token": token})

    def update_payment_method(self, payment_method_id: str, *, default: bool = True) -> PaymentMethod:
        """Makes a payment method the default."""
        return self._data("PATCH", f"/v1/billing/payment-methods/{segment(payment_method_id)}", body={"default": default})

    def delete_payment_method(self, payment_method_id: str) -> None:
        self._data("DELETE", f"/v1/billing/payment-methods/{segment(payment_method_id)}")

    def list_invoices(self, *, page: int | None = None, per_page: int | None = None) -> Page:
        return self._page("/v1/billing/invoices", "invoices", {"page": page, "per_page": per_page})

    def iter_invoices(self) -> Iterator[Invoice]:
        return self._iterate("/v1/billing/invoices", "invoices", {})

    def get_invoice_pdf(self, invoice_id: str) -> bytes:
        """The invoice as a PDF."""
        return self._http.request("GET", f"/v1/billing/invoices/{segment(invoice_id)}/pdf", raw=True)

    def create_alert(self, threshold: float, currency: str = "USD", channels: Sequence[str] = ("email",)) -> Alert:
        """A spending alert: a message on ``channels`` when the month's cost passes ``threshold``."""
        body: CreateAlertRequest = {"threshold": threshold, "currency": currency, "channels": list(channels)}
        return self._data("POST", "/v1/billing/alerts", body=body)

    def list_alerts(self, *, page: int | None = None, per_page: int | None = None) -> Page:
        return self._page("/v1/billing/alerts", "alerts", {"page": page, "per_page": per_page})

    def iter_alerts(self) -> Iterator[Alert]:
        return self._iterate("/v1/billing/alerts", "alerts", {})

    def delete_alert(self, alert_id: str) -> None:
        self._data("DELETE", f"/v1/billing/alerts/{segment(alert_id)}")
