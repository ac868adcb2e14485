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
bool true false errno assert offsetof
""".split())

# Names the generated files or the standard headers they include already use, so a tensor
# named like one would shadow it inside <name>_run or be macro-expanded: standard typedefs,
# the runtime's namespace (aotc_/AOTC_), kernel functions (k<N>_...) and the macros of
# <stdint.h> and <math.h> that the kernels print.
_RESERVED = re.compile(r"(u?int\w*|size|ssize|ptrdiff|wchar|max_align|float|double)_t"
                       r"|aotc_\w*|AOTC_\w*|k\d+_\w*|U?INT\w*_(MIN|MAX|C)|SIZE_MAX|PTRDIFF_\w*"
                       r"|HUGE_VAL[FL]?|NAN|INFINITY|EOF|M_[A-Z0-9_]+")


def is_reserved(name: str) -> bool:
    """True if ``name`` must not be used as an identifier in generated code."""
    return name in C_KEYWORDS or _RESERVED.fullmatch(name) is not None


def c_ident(text: str, prefix: str = "v") -> str:
    """A valid, non-reserved C identifier derived from ``text`` (not yet unique)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", text)
    s = re.sub(r"_+", "_", s).strip("_")
    if not s:
        s = prefix
    if s[0].isdigit() or is_reserved(s):
        s = f"{prefix}_{s}"
    return s[:48]


class Namer:
    """Hands out unique identifiers; the same key always gets the same name.

    ``reserved`` names and names starting with one of ``reserved_prefixes`` (e.g. the bundle's
    own ``<name>_`` symbols) are never handed out."""

    def __init__(self, reserved: set[str] | None = None,
                 reserved_prefixes: tuple[str, ...] = ()) -> None:
        self._used: set[str] = set(reserved or ())
        self._prefixes = tuple(p for p in reserved_prefixes if p)
        self._by_key: dict[str, str] = {}

    def __call__(self, key: str, text: str | None = None, prefix: str = "v") -> str:
        if key in self._by_key:
            return self._by_key[key]
        base = c_ident(text if text is not None else key, prefix)
        if base.startswith(self._prefixes):
            # Try a few disambiguating prefixes: one of them cannot be a reserved prefix too
            # unless the caller reserved all of them.
            for p in (prefix, "v", "t"):
                cand = c_ident(f"{p}_{base}", p)
                if not cand.startswith(self._prefixes):
                    base = cand
                    break
        name, k = base, 1
        while name in self._used:
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
