"""Sign-up and log-in, the organization, its members and invitations, and API keys."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

from ._base import BaseClient, Page, segment
from .models import Acceptance, ApiKey, CreatedApiKey, Invitation, Member, Organization, Signup, SignupRequest, Token, Transfer

Json = dict[str, Any]


def _without_none(**fields: Any) -> Json:
    return {k: v for k, v in fields.items() if v is not None}


class OrganizationMixin(BaseClient):
    def signup(self, email: str, password: str, name: str, organization_name: str) -> Signup:
        """Creates a user and their organization; the client uses the returned token from then on."""
        body: SignupRequest = {"email": email, "password": password, "name": name, "organization_name": organization_name}
        return self._authenticated(self._data("POST", "/v1/auth/signup", body=body))

    def login(self, email: str, password: str, organization_id: str | None = None) -> Token:
        """Logs in (a token for 1 hour); the client uses the returned token from then on."""
        body = _without_none(email=email, password=password, organization_id=organization_id)
        return self._authenticated(self._data("POST", "/v1/auth/token", body=body))

    def accept_invitation(self, token: str, password: str, name: str | None = None) -> Acceptance:
        """Joins with an invitation's one-time token; the client uses the returned token from then on."""
        body = _without_none(token=token, password=password, name=name)
        return self._authenticated(self._data("POST", "/v1/invitations/accept", body=body))

    def get_openapi(self) -> Json:
        """The API's OpenAPI 3.1 document."""
        return self._http.request("GET", "/v1/openapi.json")

    def get_organization(self) -> Organization:
        return self._data("GET", "/v1/organization")

    def update_organization(self, *, name: str | None = None, plan: str | None = None) -> Organization:
        """Renames the organization and/or changes its plan (which also needs billing:write)."""
        return self._data("PATCH", "/v1/organization", body=_without_none(name=name, plan=plan))

    def delete_organization(self) -> None:
        """Deletes the organization (owner only; no live databases)."""
        self._data("DELETE", "/v1/organization")

    def list_members(self, *, page: int | None = None, per_page: int | None = None) -> Page:
        return self._page("/v1/organization/members", "members", {"page": page, "per_page": per_page})

    def iter_members(self) -> Iterator[Member]:
        return self._iterate("/v1/organization/members", "members", {})

    def invite_member(self, email: str, role: str) -> Invitation:
        """Invites someone by e-mail; returns the pending invitation (valid 7 days)."""
        return self._data("POST", "/v1/organization/members", body={"email": email, "role": role})

    def update_member(self, member_id: str, *, role: str) -> Member:
        return self._data("PATCH", f"/v1/organization/members/{segment(member_id)}", body={"role": role})

    def remove_member(self, member_id: str) -> None:
        self._data("DELETE", f"/v1/organization/members/{segment(member_id)}")

    def list_invitations(self, *, page: int | None = None, per_page: int | None = None) -> Page:
        return self._page("/v1/organization/invitations", "invitations", {"page": page, "per_page": per_page})

    def iter_invitations(self) -> Iterator[Invitation]:
        return self._iterate("/v1/organization/invitations", "invitations", {})

    def cancel_invitation(self, invitation_id: str) -> None:
        self._data("DELETE", f"/v1/organization/invitations/{segment(invitation_id)}")

    def transfer_ownership(self, new_owner_id: str, password: str) -> Transfer:
        """Makes another member owner (the caller becomes admin); ``password`` is the caller's."""
        return self._data("POST", "/v1/organization/transfer", body={"new_owner_id": new_owner_id, "password": password})

    def list_api_keys(self, *, page: int | None = None, per_page: int | None = None) -> Page:
        return self._page("/v1/organization/api-keys", "api_keys", {"page": page, "per_page": per_page})

    def iter_api_keys(self) -> Iterator[ApiKey]:
        return self._iterate("/v1/organization/api-keys", "api_keys", {})

    def create_api_key(
        self, name: str, *, scopes: Sequence[str] | None = None, expires_at: str | dt.datetime | None = None
    ) -> CreatedApiKey:
        """Creates an API key; its ``secret`` is in this answer only."""
        if isinstance(expires_at, dt.datetime):
            expires_at = expires_at.isoformat()
        body = _without_none(name=name, scopes=list(scopes) if scopes is not None else None, expires_at=expires_at)
        return self._data("POST", "/v1/organization/api-keys", body=body)

    def revoke_api_key(self, api_key_id: str) -> None:
        self._data("DELETE", f"/v1/organization/api-keys/{segment(api_key_id)}")
