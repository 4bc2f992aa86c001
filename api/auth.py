"""API keys and who a request acts for, FastAPI-free.

A key is ``vn_`` + 32 random bytes (urlsafe base64); only its sha256 is stored, with a short display
prefix. A fast hash is right here: the key is a high-entropy random token, so there is nothing to
brute-force and no need for a slow password hash (bcrypt, argon2) that would cost every request.
The admin key comes from VEERNET_ADMIN_KEY and is compared in constant time; it is never stored.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from time import monotonic

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from api.db import read_one
from api.errors import ServiceError
from api.models import LOCAL_TENANT, ApiKey, utcnow
from api.settings import Settings

KEY_PREFIX = "vn_"
DISPLAY_CHARS = 8  # of the random part shown by `veernet keys list`: enough to tell keys apart
ADMIN_TENANT = "admin"  # the owner of jobs submitted with the admin key; no key can be made for it
TENANT_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
HOW_TO_GET_A_KEY = ("send 'Authorization: Bearer <key>'; an operator creates a key with "
                    "`veernet keys create --tenant NAME`")


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a tenant's key, the admin key, or the local user while keys are off."""

    tenant: str
    key_id: int | None = None  # None: the admin key, or keys are off
    admin: bool = False

    @property
    def scope(self) -> str | None:
        """The tenant whose jobs this caller sees; None for all of them (the admin)."""
        return None if self.admin else self.tenant

    @property
    def limited(self) -> bool:
        """Submission limits bind tenants' keys; the operator (admin, or the keys-off local user) is exempt."""
        return self.key_id is not None


LOCAL = Principal(LOCAL_TENANT)
ADMIN = Principal(ADMIN_TENANT, admin=True)


class AuthError(ServiceError):
    """No key, an unknown key or a revoked key: a 401 with its Bearer challenge."""

    status = 401

    def __init__(self, message: str, *, invalid_token: bool) -> None:
        self.invalid_token = invalid_token  # RFC 6750: the client sent a token, and it is no good
        challenge = 'Bearer realm="veernet"' + (', error="invalid_token"' if invalid_token else "")
        super().__init__(f"{message}; {HOW_TO_GET_A_KEY}", headers={"WWW-Authenticate": challenge})


class KeyNotFound(ServiceError):
    pass


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def check_tenant(tenant: str) -> str:
    if not TENANT_PATTERN.fullmatch(tenant):
        raise ValueError(f"tenant {tenant!r}: use 1 to 64 lower-case letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit")
    if tenant == ADMIN_TENANT:
        raise ValueError(f"tenant {ADMIN_TENANT!r} is reserved for the admin key (VEERNET_ADMIN_KEY)")
    return tenant


def create_key(session: Session, tenant: str, name: str = "") -> tuple[ApiKey, str]:
    """A new key for ``tenant``: its row and the key itself, which is not kept and cannot be shown again."""
    key = new_key()
    row = ApiKey(tenant=check_tenant(tenant), name=name[:100], prefix=key[:len(KEY_PREFIX) + DISPLAY_CHARS],
                 key_hash=hash_key(key), created_at=utcnow())
    session.add(row)
    session.flush()
    return row, key


def revoke_key(session: Session, id_or_prefix: str, *, now: datetime | None = None) -> ApiKey:
    """Revoke the one key with this id or display prefix; KeyNotFound if none or several match."""
    match = [ApiKey.prefix == id_or_prefix]
    if id_or_prefix.isdigit():
        match.append(ApiKey.id == int(id_or_prefix))
    rows = session.scalars(select(ApiKey).where(or_(*match))).all()
    if len(rows) != 1:
        found = "no key" if not rows else f"{len(rows)} keys ({', '.join(str(r.id) for r in rows)})"
        raise KeyNotFound(f"{found} with id or prefix {id_or_prefix!r}; see `veernet keys list`")
    row = rows[0]
    if row.revoked_at is None:
        row.revoked_at = now or utcnow()
    return row


def list_keys(session: Session) -> list[ApiKey]:
    return list(session.scalars(select(ApiKey).order_by(ApiKey.tenant, ApiKey.id)).all())


def authenticate(settings: Settings, authorization: str | None) -> Principal:
    """The caller of a request with this Authorization header; AuthError unless keys are off or it is valid."""
    found = _local_admin_or_token(settings, authorization)
    if isinstance(found, Principal):
        return found
    key = (settings.database_url, hash_key(found))
    try:
        row = _key_row(settings, key[1])
    finally:
        _REFRESHING.discard(key)
    if row is None:
        _KEY_CACHE.pop(key, None)
        raise AuthError("unknown API key", invalid_token=True)
    if settings.api_key_cache_seconds > 0:
        if len(_KEY_CACHE) >= KEY_CACHE_SIZE:
            _KEY_CACHE.clear()
        _KEY_CACHE[key] = (monotonic(), row)
    return _principal(row)


def authenticate_now(settings: Settings, authorization: str | None) -> Principal | None:
    """:func:`authenticate` where it needs no I/O (on the event loop): keys off, the admin key, a malformed
    header, or a tenant's key read within API_KEY_CACHE_SECONDS; None when the key must be read.

    When a kept key's window ends, the first request reads it again and the others, meanwhile, are
    answered from the kept row (for at most REFRESH_GRACE_S): one read, not one per waiting request.
    """
    found = _local_admin_or_token(settings, authorization)
    if isinstance(found, Principal):
        return found
    key = (settings.database_url, hash_key(found))
    cached = _KEY_CACHE.get(key)
    if cached is None:
        return None
    age = monotonic() - cached[0]
    if age >= settings.api_key_cache_seconds and (key not in _REFRESHING or age >= settings.api_key_cache_seconds
                                                  + REFRESH_GRACE_S):
        _REFRESHING.add(key)  # this request reads it (authenticate); the next ones use the kept row meanwhile
        return None
    return _principal(cached[1])


def _local_admin_or_token(settings: Settings, authorization: str | None) -> Principal | str:
    """LOCAL while keys are off, ADMIN for the admin key, else the bearer token to look up."""
    if settings.veernet_admin_key is None:
        return LOCAL
    token = _bearer_token(authorization)
    if hmac.compare_digest(token.encode(), settings.veernet_admin_key.get_secret_value().encode()):
        return ADMIN
    return token


def _bearer_token(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthError("this endpoint needs an API key", invalid_token=False)
    return token


def _principal(row: tuple[int, str, datetime | None]) -> Principal:
    key_id, tenant, revoked_at = row
    if revoked_at is not None:
        raise AuthError(f"this API key was revoked at {revoked_at:%Y-%m-%d %H:%M} UTC", invalid_token=True)
    return Principal(tenant, key_id=key_id)


# A tenant key's row, read at most once per API_KEY_CACHE_SECONDS per process: a revocation takes effect
# within that (and the read that brings it). Unknown keys are not kept, so a key works once created.
KEY_CACHE_SIZE = 10_000
REFRESH_GRACE_S = 5.0  # the longest a kept row stands in while its read is under way (POSTGRES_CONNECT_TIMEOUT_S)
_KEY_CACHE: dict[tuple[str, str], tuple[float, tuple[int, str, datetime | None]]] = {}
_REFRESHING: set[tuple[str, str]] = set()


def forget_keys() -> None:
    _KEY_CACHE.clear()
    _REFRESHING.clear()


_KEY_QUERY = select(ApiKey.id, ApiKey.tenant, ApiKey.revoked_at)


def _key_row(settings: Settings, key_hash: str) -> tuple[int, str, datetime | None] | None:
    """One autocommit round trip: no transaction (on SQLite, no write lock) for a read on every request."""
    row = read_one(settings.database_url, _KEY_QUERY.where(ApiKey.key_hash == key_hash))
    return None if row is None else (row.id, row.tenant, row.revoked_at)


def startup_notice(settings: Settings, host: str) -> str:
    """The line the API logs at start-up about keys; ValueError if keys are off and ``host`` is not loopback."""
    if settings.keys_required:
        return "API keys required (VEERNET_ADMIN_KEY is set); create tenant keys with `veernet keys create`"
    if not is_loopback(host):
        raise ValueError(f"{host} is not a loopback address and VEERNET_ADMIN_KEY is unset: anyone who can reach "
                         "the API would see and run every job. Set VEERNET_ADMIN_KEY to require API keys (then "
                         "create tenant keys with `veernet keys create --tenant NAME`), or bind 127.0.0.1")
    return (f"API keys are off (VEERNET_ADMIN_KEY is unset): every caller is tenant {LOCAL_TENANT!r}, and the API "
            f"is bound to {host}, localhost only")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False
