"""A doctor finding as a value: level, category, subject, message, and the command that repairs it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

Level = Literal["OK", "INFO", "WARN", "FAIL"]


@dataclass(frozen=True)
class Finding:
    level: Level
    category: str
    subject: str
    message: str
    reproduce: str | None = None

    def line(self) -> str:
        """`LEVEL category subject — message  [reproduce: cmd]`."""
        text = f"{self.level:<4} {self.category:<11} {self.subject} — {self.message}"
        return f"{text}  [reproduce: {self.reproduce}]" if self.reproduce else text

    def json_line(self) -> str:
        return json.dumps({"level": self.level, "category": self.category, "subject": self.subject,
                           "message": self.message, "reproduce": self.reproduce}, ensure_ascii=False)
