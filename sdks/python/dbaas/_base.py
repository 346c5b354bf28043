"""The part of ``Client`` every group of operations builds on: configuration, envelope, pages."""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ._http import Response, Transport

DEFAULT_URL = "http://127.0.0.1:8080"
#: The largest page the API serves; iterators ask for it to need the fewest requests.
MAX_PER_PAGE = 100

_Answer = TypeVar("_Answer", bound=Mapping[str, Any])


@dataclass(frozen=True)
class Page:
    """One page of a list: ``items``; ``meta`` with ``page``, ``per_page``, ``total``, ``total_pages``;
    and ``data``, the whole unwrapped answer, for the fields some lists carry beside their items
    (a database's restore window beside its backups)."""

    items: list[dict[str, Any]]
    meta: dict[str, Any]
    data: dict[str, Any]


def segment(value: str) -> str:
    """An id as one path segment."""
    return urllib.parse.quote(value, safe="")


class BaseClient:
    """Configuration and the request helpers; ``Client`` adds the operations."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        api_key: str | None = None,
        *,
        max_retries: int = 3,
        max_retry_wait: float = 60.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``base_url`` defaults to ``$DBAAS_URL``, then http://127.0.0.1:8080. ``token`` (a login token,
        ``dbs_…``) or ``api_key`` (``dbk_…``) — both are sent as ``Authorization: Bearer`` — defaults to
        ``$DBAAS_TOKEN``. 429 and 503 answers are retried up to ``max_retries`` times, waiting what
        ``Retry-After`` says unless that is more than ``max_retry_wait`` seconds (then the error is
        raised at once). ``timeout`` bounds each HTTP request in seconds. ``sleep`` is how the client
        waits (retries, ``wait_for_status``)."""
        if token is not None and api_key is not None:
            raise ValueError("give either token or api_key, not both")
        self._sleep = sleep
        self._http = Transport(
            base_url=base_url or os.environ.get("DBAAS_URL") or DEFAULT_URL,
            credential=token or api_key or os.environ.get("DBAAS_TOKEN") or None,
            timeout=timeout,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
            sleep=sleep,
        )

    def __enter__(self) -> BaseClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Forgets the credential; the client holds no connection between requests."""
        self._http.credential = None

    @property
    def base_url(self) -> str:
        return self._http.base_url

    @property
    def token(self) -> str | None:
        """The credential sent (set by ``signup``, ``login`` and ``accept_invitation``)."""
        return self._http.credential

    @token.setter
    def token(self, value: str | None) -> None:
        self._http.credential = value

    @property
    def last_response(self) -> Response | None:
        """Status, headers, request id and ``rate_limit`` of the latest HTTP response (errors included)."""
        return self._http.last_response

    def _data(self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Mapping[str, Any] | None = None) -> Any:
        """The request's unwrapped ``data`` (None for 204)."""
        envelope = self._http.request(method, path, query=query, body=body)
        return None if envelope is None else envelope["data"]

    def _page(self, path: str, key: str, query: Mapping[str, Any]) -> Page:
        envelope = self._http.request("GET", path, query=query)
        return Page(items=envelope["data"][key], meta=envelope["meta"], data=envelope["data"])

    def _iterate(self, path: str, key: str, query: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Every item of a list, page after page (``per_page`` 100 unless given)."""
        params = {"per_page": MAX_PER_PAGE, **query, "page": 1}
        while True:
            page = self._page(path, key, params)
            yield from page.items
            if params["page"] >= page.meta["total_pages"]:
                return
            params["page"] += 1

    def _authenticated(self, data: _Answer) -> _Answer:
        """Uses the token of a signup, login or accepted invitation from now on."""
        self._http.credential = data["access_token"]
        return data
