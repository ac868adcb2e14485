"""The one sanitiser for C identifiers and comments made from model-controlled strings.

A model can name nodes and tensors anything (``*/``, quotes, newlines, C keywords, trigraphs);
nothing from the model reaches the C files except through these functions.
"""

from __future__ import annotations

import re

C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool _Complex _Imaginary NULL main arena arena_size
""".split())


def c_ident(text: str, prefix: str = "v") -> str:
    """A valid, non-reserved C identifier derived from ``text`` (not yet unique)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", text)
    s = re.sub(r"_+", "_", s).strip("_")
    if not s:
        s = prefix
    if s[0].isdigit() or s in C_KEYWORDS or s.startswith("_"):
        s = f"{prefix}_{s}"
    return s[:48]


class Namer:
    """Hands out unique identifiers; the same key always gets the same name."""

    def __init__(self, reserved: set[str] | None = None) -> None:
        self._used: set[str] = set(reserved or ())
        self._by_key: dict[str, str] = {}

    def __call__(self, key: str, text: str | None = None, prefix: str = "v") -> str:
        if key in self._by_key:
            return self._by_key[key]
        base = c_ident(text if text is not None else key, prefix)
        name, k = base, 1
        while name in self._used or name.lower() in {u.lower() for u in ()}:
            name = f"{base}_{k}"
            k += 1
        self._used.add(name)
        self._by_key[key] = name
        return name


def c_comment(text: str, limit: int = 160) -> str:
    """Text safe inside /* ... */: printable ASCII, no comment terminator, no trigraphs."""
    s = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)
    s = s.replace("\\", "/")
    while "*/" in s or "/*" in s:
        s = s.replace("*/", "* /").replace("/*", "/ *")
    while "??" in s:
        s = s.replace("??", "?-")
    if len(s) > limit:
        s = s[: limit - 3] + "..."
    return s


def c_string(text: str) -> str:
    """A C string literal body (without quotes), for profiling names."""
    s = c_comment(text)
    return s.replace('"', "'")
