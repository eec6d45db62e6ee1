"""Who a request comes from: the service's authenticators.

An :class:`Authenticator` reads a request's :class:`Credentials` and names its
:class:`~tooluse.calling.Caller` (user, tenant, roles), returns ``None`` when the request
carries nothing it knows, or raises :class:`AuthenticationError` for credentials it refuses.
The service asks its authenticators in order; the first caller named wins, and a request
none of them names gets 401. Built in: :class:`ApiKeys` (the one shared key, per-user keys
from a file), :class:`TrustedProxyHeaders` (a reverse proxy that authenticated the user and
says who in headers) and :class:`JwtBearer` (a signed token, HS256 or RS256; the ``jwt``
extra).
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Protocol, runtime_checkable

from fastapi import Depends, HTTPException, Request

from tooluse.calling import Caller

__all__ = [
    "ANONYMOUS",
    "ApiKeys",
    "AuthenticationError",
    "Authenticator",
    "Credentials",
    "JwtBearer",
    "RequestCaller",
    "TrustedProxyHeaders",
    "bearer_token",
    "request_caller",
]


class AuthenticationError(Exception):
    """Credentials an authenticator refuses (a wrong signature, an expired token); the
    message says why, without echoing them."""


@dataclasses.dataclass(frozen=True, slots=True)
class Credentials:
    """What an authenticator reads of a request: its headers (names in lower case) and the
    address of the peer that sent it (behind a reverse proxy, the proxy's)."""

    headers: Mapping[str, str]
    peer: str | None


@runtime_checkable
class Authenticator(Protocol):
    """Names the caller of a request: ``None`` when the request carries nothing this
    authenticator knows (the next one is asked); :class:`AuthenticationError` for
    credentials it refuses."""

    async def authenticate(self, credentials: Credentials) -> Caller | None: ...


def _unauthenticated(reason: str) -> HTTPException:
    return HTTPException(401, reason, headers={"WWW-Authenticate": "Bearer"})


async def request_caller(request: Request) -> Caller:
    """The caller of a request to the service's app: the first of its service's
    authenticators that names one (401 when none does); anonymous on an open service. The
    OpenAI SDK sends its ``api_key`` as ``Authorization: Bearer``."""
    authenticators: Sequence[Authenticator] = request.app.state.service.authenticators
    if not authenticators:
        return ANONYMOUS
    client = request.client
    credentials = Credentials(request.headers, None if client is None else client.host)
    for authenticator in authenticators:
        try:
            caller = await authenticator.authenticate(credentials)
        except AuthenticationError as exc:
            raise _unauthenticated(str(exc)) from exc
        if caller is not None:
            return caller
    raise _unauthenticated("Missing or wrong API key: send the header Authorization: Bearer <key>")


RequestCaller = Annotated[Caller, Depends(request_caller)]
"""A route parameter: the request's authenticated caller."""

ANONYMOUS: Final = Caller()
"""The caller of an open service, or of its one shared key."""


def bearer_token(credentials: Credentials) -> str | None:
    """The token of ``Authorization: Bearer <token>``; ``None`` without one."""
    scheme, _, token = credentials.headers.get("authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ApiKeys:
    """``Authorization: Bearer <key>``: each key names its caller. ``ApiKeys({"s3cret":
    Caller()})`` is the one shared key (an anonymous caller); per-user keys name a user,
    tenant and roles (:meth:`from_file`). Only the keys' SHA-256 digests are kept, and a
    key is found by its digest, so the look-up's time says nothing of the keys."""

    def __init__(
        self,
        keys: Mapping[str, Caller] | None = None,
        *,
        digests: Mapping[bytes, Caller] | None = None,
    ) -> None:
        self._callers: dict[bytes, Caller] = dict(digests or {})
        for key, caller in (keys or {}).items():
            if not isinstance(key, str) or not key.strip() or " " in key:
                raise ValueError("an API key must be a non-blank token without spaces")
            self._callers[_digest(key)] = caller
        wrong = [caller for caller in self._callers.values() if not isinstance(caller, Caller)]
        if wrong:
            raise TypeError(f"ApiKeys maps keys to Callers, got {wrong[0]!r}")

    def __len__(self) -> int:
        return len(self._callers)

    async def authenticate(self, credentials: Credentials) -> Caller | None:
        token = bearer_token(credentials)
        return None if token is None else self._callers.get(_digest(token))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ApiKeys:
        """Per-user keys from a JSON file::

            {"keys": [
              {"key": "...", "user": "ann", "tenant": "acme", "roles": ["support"]},
              {"sha256": "<hex digest of the key>", "user": "bob", "tenant": "acme"}]}

        ``user`` is required; ``sha256`` keeps the key itself out of the file (``printf %s
        KEY | sha256sum``). ``ValueError`` names the entry and the field."""
        file = Path(path)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"{file}: cannot read the API keys: {exc}") from exc
        entries = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not entries:
            raise ValueError(f'{file} must hold {{"keys": [{{"key": ..., "user": ...}}, ...]}}')
        digests: dict[bytes, Caller] = {}
        for position, entry in enumerate(entries):
            where = f"{file}: keys[{position}]"
            digest, caller = _key_entry(entry, where)
            if digest in digests:
                raise ValueError(f"{where}: the same key as an earlier entry")
            digests[digest] = caller
        return cls(digests=digests)


_KEY_FIELDS: Final = ("key", "sha256", "user", "tenant", "roles")


def _key_entry(entry: object, where: str) -> tuple[bytes, Caller]:
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object")
    unknown = sorted(set(entry) - set(_KEY_FIELDS))
    if unknown:
        raise ValueError(f"{where}: {', '.join(unknown)}: the fields are {', '.join(_KEY_FIELDS)}")
    if ("key" in entry) == ("sha256" in entry):
        raise ValueError(f'{where} needs "key" or "sha256" (one of them)')
    if "key" in entry:
        key = entry["key"]
        if not isinstance(key, str) or not key.strip() or " " in key:
            raise ValueError(f'{where}: "key" must be a non-blank token without spaces')
        digest = _digest(key)
    else:
        try:
            digest = bytes.fromhex(str(entry["sha256"]))
        except ValueError:
            digest = b""
        if len(digest) != hashlib.sha256().digest_size:
            raise ValueError(f'{where}: "sha256" must be the 64 hex digits of a SHA-256 digest')
    roles = entry.get("roles", [])
    if not isinstance(roles, list):
        raise ValueError(f'{where}: "roles" must be a list of names')
    try:
        caller = Caller(entry.get("user"), entry.get("tenant"), frozenset(roles))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from exc
    if caller.user_id is None:
        raise ValueError(f'{where} needs a "user"')
    return digest, caller


class TrustedProxyHeaders:
    """A reverse proxy in front authenticated the user and says who in headers
    (``X-Forwarded-User`` and so on): believed only from the ``proxies`` addresses
    (addresses or networks, ``10.0.0.0/8``), since anyone else could send them too. A
    request from elsewhere is not this authenticator's (``None``). The roles header is a
    comma-separated list. The peer address must be the proxy's: the server in front of the
    app must not replace it with a forwarded one (``tooluse serve`` turns uvicorn's
    proxy headers off for this)."""

    def __init__(
        self,
        proxies: Iterable[str],
        *,
        user_header: str = "X-Forwarded-User",
        tenant_header: str | None = "X-Forwarded-Tenant",
        roles_header: str | None = "X-Forwarded-Roles",
    ) -> None:
        if isinstance(proxies, str):
            raise TypeError(f"proxies takes a list of addresses, got the string {proxies!r}")
        try:
            self.proxies = tuple(ipaddress.ip_network(p.strip(), strict=False) for p in proxies)
        except ValueError as exc:
            raise ValueError(f"a trusted proxy must be an address or network: {exc}") from exc
        if not self.proxies:
            raise ValueError("TrustedProxyHeaders needs the addresses of the proxies to trust")
        self.user_header = user_header.lower()
        self.tenant_header = None if tenant_header is None else tenant_header.lower()
        self.roles_header = None if roles_header is None else roles_header.lower()

    def _from_proxy(self, peer: str | None) -> bool:
        if peer is None:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:  # a Unix socket's path, a test client's name
            return False
        return any(address in network for network in self.proxies)

    async def authenticate(self, credentials: Credentials) -> Caller | None:
        headers = credentials.headers
        user = headers.get(self.user_header, "").strip()
        if not user or not self._from_proxy(credentials.peer):
            return None
        tenant = headers.get(self.tenant_header, "").strip() if self.tenant_header else ""
        roles = headers.get(self.roles_header, "") if self.roles_header else ""
        return Caller(
            user, tenant or None, frozenset(r.strip() for r in roles.split(",") if r.strip())
        )


class JwtBearer:
    """``Authorization: Bearer <JWT>``, checked with PyJWT (``pip install
    'tooluse[jwt]'``): the signature with ``key`` (HS256's shared secret, or RS256's public
    key in PEM), the expiry, and the audience and issuer when given. The user is the
    ``user_claim`` (``sub``), the tenant and roles those claims when present (roles: a list,
    or a space-separated string as OAuth scopes are). A bearer token that is not a JWT, or
    one signed with an algorithm this one does not take, is not this authenticator's
    (``None``: it may be an API key, or another's); a JWT that fails a check is refused."""

    def __init__(
        self,
        key: str,
        *,
        algorithms: Sequence[str] = ("HS256",),
        audience: str | None = None,
        issuer: str | None = None,
        user_claim: str = "sub",
        tenant_claim: str = "tenant",
        roles_claim: str = "roles",
        leeway: float = 30.0,
    ) -> None:
        import jwt  # the jwt extra, imported by a service that checks tokens

        if not isinstance(key, str) or not key.strip():
            raise ValueError("JwtBearer needs the key that checks the signatures")
        unknown = sorted(set(algorithms) - {"HS256", "HS384", "HS512", "RS256", "ES256"})
        if isinstance(algorithms, str) or not algorithms or unknown:
            raise ValueError(
                "algorithms must be a list of HS256, HS384, HS512, RS256 or ES256, got "
                f"{algorithms!r}"
            )
        self._jwt = jwt
        self._key = key
        self.algorithms = tuple(algorithms)
        self.audience = audience
        self.issuer = issuer
        self.user_claim = user_claim
        self.tenant_claim = tenant_claim
        self.roles_claim = roles_claim
        self.leeway = leeway

    async def authenticate(self, credentials: Credentials) -> Caller | None:
        token = bearer_token(credentials)
        if token is None or token.count(".") != 2:
            return None
        jwt = self._jwt
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self._key,
                algorithms=list(self.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", self.user_claim]},
            )
        except jwt.InvalidSignatureError as exc:  # a DecodeError, but a JWT all the same
            raise AuthenticationError(f"the bearer token was refused: {exc}") from exc
        except (jwt.DecodeError, jwt.InvalidAlgorithmError):
            return None  # not a JWT (three dot-separated parts all the same), or another's
        except jwt.InvalidTokenError as exc:
            raise AuthenticationError(f"the bearer token was refused: {exc}") from exc
        roles = claims.get(self.roles_claim) or []
        if isinstance(roles, str):
            roles = roles.split()
        tenant = claims.get(self.tenant_claim)
        try:
            return Caller(
                str(claims[self.user_claim]),
                None if tenant is None else str(tenant),
                frozenset(str(role) for role in roles),
            )
        except ValueError as exc:  # a blank subject
            raise AuthenticationError(f"the bearer token was refused: {exc}") from exc
