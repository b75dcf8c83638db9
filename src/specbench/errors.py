"""User-facing errors: a mistake in the user's input ends in one line, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (a file, a flag, a config). The CLI prints `specbench: error: <msg>` and exits 2."""


class ConfigError(UserError):
    """A model config.json that cannot be read or is not a model we can plan."""


class FlagError(UserError):
    """An engine flag or CLI option with an impossible value."""
