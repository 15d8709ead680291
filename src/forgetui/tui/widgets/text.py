"""Model text made inert for the terminal: a model's answer must never emit escape sequences or be
parsed as markup. Used by every screen that shows prompts, responses or reasoning."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(text: str | None) -> str:
    """Control characters (ESC included) shown as visible escapes; tabs and newlines kept."""
    if not text:
        return ""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def tail(text: str, chars: int) -> str:
    """The last ``chars`` characters, cut at a line start when one is near."""
    if len(text) <= chars:
        return text
    cut = text[-chars:]
    nl = cut.find("\n")
    return cut[nl + 1:] if 0 <= nl < 200 else "…" + cut
