"""HTTP for the client: JSON in and out, the error envelope, retries and Idempotency-Keys."""

from __future__ import annotations

import datetime as dt
import email.utils
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import DbaasError, NetworkError

__version__ = "0.1.0"

# Answers meaning "not carried out, try again": the gateway never stores them
# under an Idempotency-Key, so a retry with the same key runs the request.
RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class RateLimit:
    """The X-RateLimit-* headers: the window closest to exhaustion (``reset`` in Unix seconds)."""

    limit: int | None
    remaining: int | None
    reset: int | None


@dataclass(frozen=True)
class Response:
    """What the last HTTP response said beside its body (``Client.last_response``)."""

    status: int
    headers: Mapping[str, str]
    request_id: str | None
    rate_limit: RateLimit
    #: True when the gateway replayed the stored answer of an earlier request with the same Idempotency-Key.
    replayed: bool


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds: delta-seconds, or an HTTP date (RFC 9110)."""
    if value is None:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return ",".join(_query_value(v) for v in value)
    return str(value)


def _error_of(status: int, headers: Mapping[str, str], body: bytes) -> DbaasError:
    """The typed error of an error answer; one without the envelope (a proxy's page, say) is ``http_error``."""
    request_id = headers.get("x-request-id")
    retry_after = _retry_after(headers.get("retry-after"))
    try:
        envelope = json.loads(body)
        error = envelope["error"]
        return DbaasError(
            code=error["code"],
            status=status,
            message=error.get("message", ""),
            details=error.get("details") or [],
            request_id=(envelope.get("meta") or {}).get("request_id", request_id),
            retry_after=retry_after,
        )
    except (ValueError, KeyError, TypeError):
        text = body.decode("utf-8", "replace").strip()[:200]
        return DbaasError(
            code="http_error",
            status=status,
            message=text or http.client.responses.get(status, "error"),
            request_id=request_id,
            retry_after=retry_after,
        )


class Transport:
    """One base URL and credential; every call of a ``Client`` goes through ``request``."""

    def __init__(
        self,
        *,
        base_url: str,
        credential: str | None,
        timeout: float,
        max_retries: int,
        max_retry_wait: float,
        sleep: Callable[[float], None],
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.credential = credential
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.sleep = sleep
        self.last_response: Response | None = None

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        raw: bool = False,
    ) -> Any:
        """Sends the request, retrying as allowed; returns the parsed JSON (``None`` for 204), or bytes when ``raw``.

        Every POST gets an Idempotency-Key, the same for all its retries, so a
        retry after a lost answer cannot create twice.
        """
        url = self.base_url + path
        params = {k: _query_value(v) for k, v in (query or {}).items() if v is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        headers = {"Accept": "application/json", "User-Agent": f"dbaas-python/{__version__}"}
        if self.credential:
            headers["Authorization"] = f"Bearer {self.credential}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if method == "POST":
            headers["Idempotency-Key"] = str(uuid.uuid4())

        attempt = 0
        while True:
            try:
                status, response_headers, payload = self._send(method, url, headers, data)
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                # Without an answer only a GET, or a POST under its Idempotency-Key, is safe to send again.
                if attempt < self.max_retries and method in ("GET", "POST"):
                    self.sleep(self._backoff(attempt))
                    attempt += 1
                    continue
                raise NetworkError(f"{method} {url}: {getattr(e, 'reason', e)}") from e
            self.last_response = Response(
                status=status,
                headers=response_headers,
                request_id=response_headers.get("x-request-id"),
                rate_limit=RateLimit(
                    limit=_int_header(response_headers, "x-ratelimit-limit"),
                    remaining=_int_header(response_headers, "x-ratelimit-remaining"),
                    reset=_int_header(response_headers, "x-ratelimit-reset"),
                ),
                replayed=response_headers.get("idempotent-replayed") == "true",
            )
            if status < 400:
                if raw:
                    return payload
                return json.loads(payload) if payload else None
            error = _error_of(status, response_headers, payload)
            wait = self._retry_wait(method, error, attempt)
            if wait is None:
                raise error
            self.sleep(wait)
            attempt += 1

    def _retry_wait(self, method: str, error: DbaasError, attempt: int) -> float | None:
        """Seconds to wait before retrying ``error``, or None to raise it."""
        if attempt >= self.max_retries:
            return None
        # 409 with Retry-After: our own earlier attempt (same Idempotency-Key) is still running.
        in_progress = method == "POST" and error.status == 409 and error.retry_after is not None
        if error.status not in RETRY_STATUSES and not in_progress:
            return None
        wait = error.retry_after if error.retry_after is not None else self._backoff(attempt)
        # A wait beyond the bound (a daily limit, a long maintenance) is the caller's to decide.
        return wait if wait <= self.max_retry_wait else None

    def _backoff(self, attempt: int) -> float:
        return min(0.5 * 2**attempt, self.max_retry_wait)

    def _send(self, method: str, url: str, headers: dict[str, str], data: bytes | None) -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
