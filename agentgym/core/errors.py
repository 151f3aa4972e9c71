"""Typed errors. Each message says what to do about it."""

from __future__ import annotations


class AgentGymError(Exception):
    """Base class of every error agentgym raises on purpose."""


class BadInput(AgentGymError, ValueError):
    """A file, argument or option given by the user is unusable (the CLI exits with code 2)."""


class UnknownEnv(BadInput, KeyError):
    """An environment id that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        """The message as given, unquoted."""
        return str(self.args[0]) if self.args else ""


class ResetNeeded(AgentGymError, RuntimeError):
    """``step`` called before ``reset`` or after the episode ended."""


class MissingInfoKey(AgentGymError, KeyError):
    """An environment lacks an info key or an ability that a component needs."""

    def __str__(self) -> str:
        """The message as given, unquoted (KeyError would quote it)."""
        return str(self.args[0]) if self.args else ""


class SnapshotMismatch(BadInput):
    """A snapshot restored into an environment of another id or configuration."""
