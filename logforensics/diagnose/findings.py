"""A finding: something worth knowing beside the verdict, never folded into it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Finding:
    kind: str
    detail: str
    severity: str = "warning"  # info | warning
    advice: str | None = None  # what to do about it, in a reader's words
    sources: list[str] = field(default_factory=list)  # file:line it cites, if any
