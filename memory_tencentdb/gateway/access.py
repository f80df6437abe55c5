"""Who is asking, and what they may read and write: principals, team scopes, 403s.

Without a keys file the gateway has one key (``server.apiKey`` or the data directory's
``gateway.key``) and whoever holds it may do everything, exactly as before. A keys file
(``server.keysFile``, default ``<data_dir>/keys.json`` when it exists) adds principals, each
with its own key, and team scopes with readers and writers:

.. code-block:: json

    {
      "principals": {
        "agent-a": {"key": "<at least 16 characters>", "scopes": ["agent-a"]},
        "agent-b": {"key": "..."},
        "ops": {"key": "...", "owner": true}
      },
      "scopes": {
        "team:research": {"readers": ["agent-b"], "writers": ["agent-a"]}
      }
    }

Rules (one place, so every route applies the same ones):

- An owner (the old single key, or ``"owner": true``) may read and write every scope.
- A scope declared under ``scopes`` is a team scope: its writers may read and write it, its
  readers may read it; ``"*"`` stands for every principal. Nobody else may touch it, whatever
  their own scopes say.
- Any other scope belongs to the principals whose ``scopes`` name it (an exact name, or a
  prefix ending in ``*``); a principal without ``scopes`` owns the scope named like itself.
- Recall and search on a principal's scope also look in every team scope it may read.

The file is checked whole at start-up (unknown fields, unknown principals, short or repeated
keys are errors): a typo in a permission must stop the gateway (exit 2, naming the file and the
field), not silently deny or allow. A key is at least ``MIN_KEY_CHARS`` (16) visible ASCII
characters, no whitespace around or inside it. ``"scopes": ["*"]`` is refused: it would own every
scope, other principals' included; the one spelling of an administrator is ``"owner": true``.

A changed file takes effect without a restart: requests look at its mtime, size and inode at
most once a second (``LivePolicy``) and re-read it when they changed, so a key added works and
a key revoked gets 401 within about a second. A new file that fails the same checks (or cannot be
read or parsed at all) is not used: the last good keys stay in force (fail closed), the problem
is logged once and shown in ``/health`` (``keys_file.error``, and ``degraded``), and the file is
read again every second until it is fixed. Deleting the default
``keys.json`` leaves only the gateway's own key; a missing ``server.keysFile`` is an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from memory_tencentdb.config import ConfigError
from memory_tencentdb.engine import resolve_scope
from memory_tencentdb.ownership import GatewayAuth

log = logging.getLogger("memory_tencentdb.gateway")

KEYS_FILE = "keys.json"
OWNER_NAME = "owner"  # the principal of the single configured key (or gateway.key)
ANYONE = "*"
# Where the guard leaves the caller for the routes (an ASGI scope key of ours).
SCOPE_KEY = "tdai.principal"
# How often a request may look whether the keys file changed (one stat, not a read).
RELOAD_CHECK_S = 1.0

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]
ScopeName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512)]


MIN_KEY_CHARS = 16  # 16 random characters of [A-Za-z0-9] are ~95 bits: not guessable online
# A key travels in an HTTP header as ``Bearer <key>``: visible ASCII only, so a key with a space,
# a tab or a newline around or inside it (which could never authenticate) is refused at load.
KEY_PATTERN = r"^[\x21-\x7e]+$"


class _PrincipalEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    key: Annotated[
        str, StringConstraints(min_length=MIN_KEY_CHARS, max_length=512, pattern=KEY_PATTERN)
    ]
    owner: bool = False
    scopes: list[ScopeName] | None = None


class _ScopeEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    readers: list[Name] = Field(default_factory=list)
    writers: list[Name] = Field(default_factory=list)


class _KeysFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    principals: dict[Name, _PrincipalEntry] = Field(default_factory=dict)
    scopes: dict[ScopeName, _ScopeEntry] = Field(default_factory=dict)


@dataclass(frozen=True)
class Principal:
    """One caller identity. ``own`` are scope names or ``prefix*`` patterns it owns."""

    name: str
    owner: bool = False
    own: tuple[str, ...] = ()

    def owns(self, scope: str) -> bool:
        return any(scope.startswith(p[:-1]) if p.endswith("*") else scope == p for p in self.own)


OWNER = Principal(OWNER_NAME, owner=True)


@dataclass(frozen=True)
class TeamScope:
    readers: frozenset[str]
    writers: frozenset[str]

    def can_read(self, name: str) -> bool:
        return bool({name, ANYONE} & (self.readers | self.writers))

    def can_write(self, name: str) -> bool:
        return bool({name, ANYONE} & self.writers)


def _digest(token: str | bytes) -> bytes:
    raw = token.encode("utf-8") if isinstance(token, str) else token
    return hashlib.sha256(raw).digest()


@dataclass
class AccessPolicy:
    """Keys -> principals, and the team scopes' members. ``enforced`` is False with auth off."""

    enforced: bool = True
    by_digest: dict[bytes, Principal] = field(default_factory=dict)
    teams: dict[str, TeamScope] = field(default_factory=dict)
    source: str | None = None  # the keys file, when there is one

    def identify(self, token: bytes) -> Principal | None:
        """The principal holding ``token``. Keys are compared by their SHA-256 digest, so the
        lookup's timing says nothing about how much of a key was right."""
        return self.by_digest.get(_digest(token))

    def can_read(self, who: Principal, scope: str) -> bool:
        if who.owner:
            return True
        team = self.teams.get(scope)
        return team.can_read(who.name) if team is not None else who.owns(scope)

    def can_write(self, who: Principal, scope: str) -> bool:
        if who.owner:
            return True
        team = self.teams.get(scope)
        return team.can_write(who.name) if team is not None else who.owns(scope)

    def team_scopes(self, who: Principal) -> list[str]:
        """The team scopes ``who`` is a member of (owners too only where they are named)."""
        return sorted(s for s, t in self.teams.items() if t.can_read(who.name))

    def access(self, who: Principal, scope: str) -> str | None:
        """``"write"``, ``"read"`` or None: what ``who`` may do with ``scope``."""
        if self.can_write(who, scope):
            return "write"
        return "read" if self.can_read(who, scope) else None


def _keys_path(server: Any, data_dir: Path) -> tuple[Path, bool]:
    """The keys file's path, and whether ``server.keysFile`` named it."""
    explicit = getattr(server, "keys_file", None)
    path = Path(explicit).expanduser() if explicit else Path(data_dir) / KEYS_FILE
    if not path.is_absolute():
        path = Path(data_dir) / path
    return path, bool(explicit)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file from the one read: mtime, size, inode (None: no file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def load_policy(server: Any, data_dir: Path, auth: GatewayAuth) -> LivePolicy:
    """The policy ``serve`` enforces, kept current with the keys file. Raises ``ConfigError``
    naming the file and the field when the file is bad at start-up."""
    path, explicit = _keys_path(server, data_dir)
    if auth.token is None and not path.exists():
        return LivePolicy(AccessPolicy(enforced=False))  # auth off: nothing to watch
    stamp = _stamp(path)  # before reading: a change made meanwhile is seen by the next check
    return LivePolicy(_read_policy(path, explicit, auth), path, explicit, auth, stamp)


def _read_policy(path: Path, explicit: bool, auth: GatewayAuth) -> AccessPolicy:
    """The policy of the keys file at ``path`` (or of the gateway's own key alone when the
    default file does not exist). Raises ``ConfigError`` naming the file and the field."""
    if not path.exists():
        if explicit:
            raise ConfigError(f"server.keysFile: {path} does not exist")
        if auth.token is None:
            return AccessPolicy(enforced=False)
        return AccessPolicy(by_digest={_digest(auth.token): OWNER})
    if auth.token is None:
        raise ConfigError(
            f"{path}: a keys file needs auth on, but server.auth is off (TDAI_GATEWAY_AUTH);"
            " remove one of the two"
        )
    try:
        raw = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the keys file: {e}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid JSON: nested too deeply") from None
    except ValueError as e:
        raise ConfigError(f"{path}: not valid JSON: {e}") from None
    try:
        parsed = _KeysFile.model_validate(raw)
    except ValidationError as e:
        problems = []
        for err in e.errors()[:10]:
            where = ".".join(str(x) for x in err.get("loc", ())) or "the file"
            msg = err.get("msg", "invalid")
            if err.get("type") == "string_pattern_mismatch" and where.endswith(".key"):
                msg = "a key is visible ASCII characters only (no spaces, tabs or newlines)"
            problems.append(f"{path}: {where}: {msg}")
        raise ConfigError(problems) from None
    problems = []
    by_digest: dict[bytes, Principal] = {_digest(auth.token): OWNER}
    for name, entry in parsed.principals.items():
        if name in (OWNER_NAME, ANYONE):
            problems.append(f"{path}: principals.{name}: this name is reserved")
            continue
        digest = _digest(entry.key)
        if digest in by_digest:
            other = by_digest[digest].name
            problems.append(
                f"{path}: principals.{name}.key: the same key as {other!r}"
                + (" (the gateway's own key)" if other == OWNER_NAME else "")
            )
            continue
        own = tuple(entry.scopes) if entry.scopes is not None else (name,)
        if any(pattern == ANYONE for pattern in own):
            problems.append(
                f"{path}: principals.{name}.scopes: {ANYONE!r} would own every scope, other"
                f' principals\' own scopes included; an administrator is spelled "owner": true'
            )
            continue
        by_digest[digest] = Principal(name, owner=entry.owner, own=own)
    known = {p.name for p in by_digest.values()} | {ANYONE}
    teams = {}
    for scope, team in parsed.scopes.items():
        for role in ("readers", "writers"):
            for member in getattr(team, role):
                if member not in known:
                    problems.append(
                        f"{path}: scopes.{scope}.{role}: {member!r} is not a principal of this file"
                    )
        teams[scope] = TeamScope(frozenset(team.readers), frozenset(team.writers))
    if problems:
        raise ConfigError(problems)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("security: %s holds API keys and is readable by others (chmod 600 it)", path)
    log.info(
        "security: %d principal(s) and %d team scope(s) from %s",
        len(by_digest) - 1,
        len(teams),
        path,
    )
    return AccessPolicy(by_digest=by_digest, teams=teams, source=str(path))


class LivePolicy:
    """The ``AccessPolicy`` in force, re-read when the keys file changes (see the module doc).

    The guard and the routes ask it for every request; at most once per ``RELOAD_CHECK_S`` one
    of them stats the file (the others go on with the current policy meanwhile), and only a
    changed stamp costs a read. A request sees one policy whole: the old or the new one.
    """

    def __init__(
        self,
        policy: AccessPolicy,
        path: Path | None = None,
        explicit: bool = False,
        auth: GatewayAuth | None = None,
        stamp: tuple[int, int, int] | None = None,
    ) -> None:
        self._current = policy
        self.path = path  # None: nothing to watch (auth off)
        self._explicit = explicit
        self._auth = auth
        self._stamp = stamp
        self._checked = time.monotonic()
        self._lock = threading.Lock()
        self.error: str | None = None  # why the file on disk is not the one in force
        self.loaded_at = _now()

    @property
    def enforced(self) -> bool:
        return self._current.enforced

    def current(self) -> AccessPolicy:
        self._maybe_reload()
        return self._current

    def identify(self, token: bytes) -> Principal | None:
        return self.current().identify(token)

    def _maybe_reload(self) -> None:
        if self.path is None or self._auth is None:
            return
        now = time.monotonic()
        if now - self._checked < RELOAD_CHECK_S or not self._lock.acquire(blocking=False):
            return
        try:
            self._checked = now
            stamp = _stamp(self.path)
            if stamp == self._stamp and self.error is None:
                return
            try:
                policy = _read_policy(self.path, self._explicit, self._auth)
            except Exception as e:  # noqa: BLE001 - fail closed: whatever went wrong, the
                # last good keys stay in force, /health says why, and it is read again the
                # next second (a file being written, a permission fixed: no change of stamp).
                problem = (
                    "; ".join(e.problems)
                    if isinstance(e, ConfigError)
                    else f"{self.path}: cannot use the keys file: {type(e).__name__}: {e}"
                )
                if problem != self.error:  # once per distinct problem, not once a second
                    log.error("security: %s; the last good keys stay in force", problem)
                self.error = problem
                return
            self._stamp = stamp
            self._current = policy
            self.error = None
            self.loaded_at = _now()
            log.info("security: %s changed: the new keys are in force", self.path)
        finally:
            self._lock.release()

    def status(self) -> dict[str, Any] | None:
        """``/health.keys_file``: which file is watched, what is in force, and ``error`` while
        the file on disk cannot be used (None when there is no file to watch)."""
        self._maybe_reload()
        if self.path is None:
            return None
        policy = self._current
        return {
            "path": str(self.path),
            "in_use": policy.source is not None,
            "principals": max(0, len(policy.by_digest) - 1),
            "team_scopes": len(policy.teams),
            "loaded_at": self.loaded_at,
            "error": self.error,
        }


# ------------------------------------------------------------------ what routes call


def caller(request: Request) -> Principal:
    """The principal the guard identified (the owner when auth is off)."""
    return request.scope.get(SCOPE_KEY) or OWNER


def _policy(request: Request) -> AccessPolicy:
    return request.app.state.access_policy.current()


def _forbidden(who: Principal, verb: str, scope: str) -> HTTPException:
    return HTTPException(
        403, detail=f"Forbidden: principal {who.name!r} may not {verb} scope {scope!r}"
    )


def readable(request: Request, scope: str | None, user_id: str | None) -> str:
    """The request's scope, or a 403 naming it when the caller may not read it."""
    name = resolve_scope(scope, user_id)
    who = caller(request)
    if not _policy(request).can_read(who, name):
        raise _forbidden(who, "read", name)
    return name


def writable(request: Request, scope: str | None, user_id: str | None) -> str:
    """The request's scope, or a 403 naming it when the caller may not write it."""
    name = resolve_scope(scope, user_id)
    who = caller(request)
    if not _policy(request).can_write(who, name):
        raise _forbidden(who, "write", name)
    return name


def team_scopes(request: Request, own: str, asked: list[str] | None) -> tuple[str, ...]:
    """The other scopes a recall or search of ``own`` also looks in: those asked for (each one
    readable, else a 403 naming it), or, when not asked, every team scope the caller reads."""
    who = caller(request)
    policy = _policy(request)
    if asked is None:
        names = policy.team_scopes(who)
    else:
        names = []
        for name in asked:
            name = name.strip()
            if not policy.can_read(who, name):
                raise _forbidden(who, "read", name)
            names.append(name)
    return tuple(dict.fromkeys(n for n in names if n and n != own))


def require_owner(request: Request, what: str) -> None:
    who = caller(request)
    if not who.owner:
        raise HTTPException(403, detail=f"Forbidden: principal {who.name!r} may not {what}")


def visible_scopes(request: Request, stored: list[dict[str, Any]]) -> dict[str, Any]:
    """``GET /scopes``: the stored scopes the caller may read, plus its team scopes and own
    exact scopes not stored yet (zero counts), each with ``access`` and ``team``."""
    who = caller(request)
    policy = _policy(request)
    out = []
    seen = set()
    for entry in stored:
        access = policy.access(who, entry["scope"])
        if access is None:
            continue
        seen.add(entry["scope"])
        out.append({**entry, "access": access, "team": entry["scope"] in policy.teams})
    extra = [s for s in policy.teams if policy.can_read(who, s)]
    extra += [s for s in who.own if not s.endswith("*")]
    for name in extra:
        if name in seen:
            continue
        seen.add(name)
        out.append(
            {
                "scope": name,
                "memories": 0,
                "history": 0,
                "messages": 0,
                "last_activity": None,
                "scenes": 0,
                "persona": False,
                "access": policy.access(who, name),
                "team": name in policy.teams,
            }
        )
    return {"principal": who.name, "owner": who.owner, "scopes": out}
