"""Errors raised while loading the configuration.

A bad value stops startup (the original silently fell back to defaults, which hid typos for
weeks). Every message names the field in the config file's spelling and where the value came
from, so the user can fix it without reading code.
"""

from __future__ import annotations


class ConfigError(Exception):
    """The configuration cannot be used; the gateway must not start.

    ``problems`` holds one line per problem; ``str(error)`` joins them under a headline.
    """

    def __init__(self, problems: str | list[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        if len(self.problems) == 1:
            text = f"invalid configuration: {self.problems[0]}"
        else:
            text = "invalid configuration:\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(text)


class FieldProblem(ValueError):
    """Raised by cross-field checks so the report can point at one field, not the whole block.

    Pydantic attributes an error raised in a model validator to the block; the loader reads
    ``field`` from this exception and appends it to the error location.
    """

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(message)
