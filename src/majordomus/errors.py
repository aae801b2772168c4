"""One exception class per exit code; each carries a sentence and, when there is one, the repair.

Imports nothing: the hook path raises these.
"""

from __future__ import annotations


class MajordomusError(Exception):
    """A failure a person can act on: `majordomus: <what happened>; <what to run>`."""

    exit_code = 13

    def __init__(self, message: str, repair: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.repair = repair

    def line(self) -> str:
        text = f"majordomus: {self.message}"
        return f"{text}; {self.repair}" if self.repair else text


class UsageError(MajordomusError):
    exit_code = 2


class ContractError(MajordomusError):
    """A declared rule is broken (a policy that does not parse, an invalid declaration)."""

    exit_code = 10


class MissingError(MajordomusError):
    """Not a repository, not initialised, an unknown provider."""

    exit_code = 12


class InternalError(MajordomusError):
    """Something could not be written or read that should have been."""

    exit_code = 13


class RefusedError(MajordomusError):
    exit_code = 15
