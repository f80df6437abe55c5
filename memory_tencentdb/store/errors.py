"""Errors of the store that its callers handle (a module without imports: the CLI loads it)."""


class StoreUnavailable(Exception):
    """The configured database cannot be used (unreachable, refused, no pgvector): the
    gateway must not start; the message says what failed, never the DSN's password."""
