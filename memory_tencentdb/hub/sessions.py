"""Who is logged in to the Memory Hub: one-time login links, browser sessions, CSRF tokens.

The page never holds a key. ``memory-tencentdb hub`` asks the gateway (with the data
directory's key) for a one-time link; the page trades the token in the link's fragment (a
fragment never reaches a server or its logs) for a session: a random id in an HttpOnly,
SameSite=Strict cookie and a CSRF token the page sends back in ``X-CSRF-Token``. A session
remembers the digest of the key that opened it, never the key, and is resolved against the keys
in force on every request: revoking the key in ``keys.json`` ends its sessions within a second.

Sessions live in memory only: a restarted gateway asks for a new link (the key still works).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from memory_tencentdb.gateway.access import LivePolicy, Principal

# How the gate hands a cookie's session to the guard: ``Authorization: Bearer <prefix><id>``.
SESSION_PREFIX = b"hub-session."
LINK_TTL_S = 300.0  # a login link is good for five minutes, once
SESSION_TTL_S = 12 * 3600.0  # a browser session ends after twelve hours
MAX_SESSIONS = 1000  # the oldest go first beyond this (nobody needs more)


def key_digest(token: str | bytes) -> bytes:
    """The SHA-256 of a key, as ``gateway/access.py`` indexes principals."""
    raw = token.encode("utf-8") if isinstance(token, str) else token
    return hashlib.sha256(raw).digest()


@dataclass
class HubSession:
    digest: bytes  # of the key that opened it (None-like b"" with auth off)
    csrf: str
    expires: float


class HubSessions:
    """One-time links and sessions, in memory, thread-safe."""

    def __init__(self, policy: LivePolicy, cookie_name: str) -> None:
        self.policy = policy
        self.cookie_name = cookie_name
        self._links: dict[str, tuple[bytes, float]] = {}
        self._sessions: dict[str, HubSession] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ links

    def new_link(self, digest: bytes) -> str:
        token = secrets.token_urlsafe(24)
        with self._lock:
            now = time.monotonic()
            self._links = {t: v for t, v in self._links.items() if v[1] > now}
            self._links[token] = (digest, now + LINK_TTL_S)
        return token

    def redeem(self, token: str) -> bytes | None:
        """The key digest a link was made for; None when unknown, used or expired."""
        with self._lock:
            entry = self._links.pop(token, None)
        if entry is None or entry[1] < time.monotonic():
            return None
        return entry[0]

    # ------------------------------------------------------------------ sessions

    def open(self, digest: bytes) -> tuple[str, HubSession]:
        sid = secrets.token_urlsafe(32)
        session = HubSession(digest, secrets.token_urlsafe(24), time.monotonic() + SESSION_TTL_S)
        with self._lock:
            now = time.monotonic()
            self._sessions = {k: s for k, s in self._sessions.items() if s.expires > now}
            while len(self._sessions) >= MAX_SESSIONS:
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[sid] = session
        return sid, session

    def get(self, sid: str) -> HubSession | None:
        with self._lock:
            session = self._sessions.get(sid)
        if session is None or session.expires < time.monotonic():
            return None
        return session

    def close(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)

    def principal_of(self, session: HubSession) -> Principal | None:
        """The principal of the key that opened the session, if that key is still in force."""
        return self.policy.current().by_digest.get(session.digest)

    def csrf_ok(self, session: HubSession, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(session.csrf, sent or "")


class SessionAwarePolicy:
    """What the guard asks about a Bearer token: a hub session (the gate turned the cookie into
    one) or a key. Everything else is the real policy's."""

    def __init__(self, policy: LivePolicy, sessions: HubSessions) -> None:
        self._policy = policy
        self._sessions = sessions

    @property
    def enforced(self) -> bool:
        return self._policy.enforced

    def identify(self, token: bytes) -> Principal | None:
        if token.startswith(SESSION_PREFIX):
            sid = token[len(SESSION_PREFIX) :].decode("ascii", "replace")
            session = self._sessions.get(sid)
            return self._sessions.principal_of(session) if session is not None else None
        return self._policy.identify(token)

    def __getattr__(self, name: str) -> Any:  # status(), current(), path ...
        return getattr(self._policy, name)
