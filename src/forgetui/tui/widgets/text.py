"""Model text made inert for the terminal: a model's answer must never emit escape sequences or be
parsed as markup. Used by every screen that shows prompts, responses or reasoning."""

from __future__ import annotations

import re
from typing import Any

# C0/C1 controls (ESC included) and the bidi overrides that can make text read backwards.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def inert(text: Any) -> str:
    """Text safe for the terminal: control characters become visible symbols (␛ for ESC);
    tabs and newlines are kept, CRLF becomes a newline."""
    if text is None:
        return ""
    text = str(text).replace("\r\n", "\n")

    def visible(m: re.Match[str]) -> str:
        code = ord(m.group(0))
        if code < 0x20:
            return chr(0x2400 + code)
        return "␡" if code == 0x7F else f"\\u{code:04x}"

    return _CONTROL.sub(visible, text)


def tail(text: str, chars: int) -> str:
    """The last ``chars`` characters, cut at a line start when one is near."""
    if len(text) <= chars:
        return text
    cut = text[-chars:]
    nl = cut.find("\n")
    return cut[nl + 1:] if 0 <= nl < 200 else "…" + cut
