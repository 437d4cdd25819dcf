"""A finding: something worth knowing beside the verdict, never folded into it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Finding:
    kind: str
    detail: str
    severity: str = "warning"  # info | warning
    advice: str | None = None  # what to do about it, in a reader's words

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "detail": self.detail,
            "severity": self.severity,
            "advice": self.advice,
        }
