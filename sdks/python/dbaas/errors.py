"""The exceptions the client raises."""

from __future__ import annotations

from typing import Any


class DbaasError(Exception):
    """An error answer of the API: its envelope's ``error`` plus the HTTP status and request id.

    ``code`` is the API's machine-readable code (``validation_error``, ``resource_not_found``,
    ``rate_limit_exceeded``, …; ``http_error`` when a response without the envelope came back,
    from a proxy say); ``details`` lists ``{"field", "message"}`` for validation errors.
    """

    def __init__(
        self,
        *,
        code: str,
        status: int,
        message: str,
        details: list[dict[str, Any]] | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.code = code
        self.status = status
        self.message = message
        self.details = details or []
        self.request_id = request_id
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"DbaasError(code={self.code!r}, status={self.status}, message={self.message!r}, request_id={self.request_id!r})"


class NetworkError(Exception):
    """No answer from the API (connection refused or reset, timeout), after the retries allowed."""


class WaitTimeout(TimeoutError):
    """``wait_for_status`` gave up: ``database`` is the last state seen."""

    def __init__(self, message: str, database: dict[str, Any]) -> None:
        super().__init__(message)
        self.database = database


class DatabaseFailed(Exception):
    """``wait_for_status`` saw the database reach ``failed`` (``database["status_reason"]`` says why)."""

    def __init__(self, message: str, database: dict[str, Any]) -> None:
        super().__init__(message)
        self.database = database
