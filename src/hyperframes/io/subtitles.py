"""Text subtitles from one codec's packets to another's: a cue's plain text out of
mov_text, SubRip, ASS/SSA or WebVTT, and back into mov_text, SubRip or WebVTT (styling
does not survive)."""

from __future__ import annotations

import re
import struct

_ASS_OVERRIDE = re.compile(r"\{[^}]*\}")
_TAGS = re.compile(r"</?[a-zA-Z][^>]*>")


def text_of(codec: str, payload: bytes) -> str:
    """A text subtitle cue's plain text."""
    if codec == "mov_text":
        (length,) = struct.unpack(">H", payload[:2]) if len(payload) >= 2 else (0,)
        return payload[2 : 2 + length].decode("utf-8", "replace")
    text = payload.decode("utf-8", "replace")
    if codec in ("ass", "ssa"):  # ReadOrder, Layer, Style, Name, margins, Effect, Text
        text = text.split(",", 8)[-1]
        text = _ASS_OVERRIDE.sub("", text).replace("\\N", "\n").replace("\\n", "\n")
    return _TAGS.sub("", text)


def payload(codec: str, text: str) -> bytes:
    """A cue of plain ``text`` in ``codec``'s packet form."""
    data = text.encode("utf-8")
    if codec == "mov_text":
        return struct.pack(">H", len(data)) + data
    return data
