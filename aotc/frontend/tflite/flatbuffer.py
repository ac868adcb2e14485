"""A flatbuffer verifier of a whole .tflite file, run before the ``tflite`` package's generated
accessors read it (importer.convert calls it first): the checks of flatbuffers' C++
``Verifier`` (LiteRT runs it on every model; TFLM's reader fails where it fails) on every table,
vector and string the schema (flatbuffer_schema.py) reaches from the root Model table. The
accessors check no bounds: a truncated or corrupted file would otherwise raise deep inside
them (struct.error, IndexError) or give garbage.

For each table: its offset inside the file and 4-byte aligned, its vtable inside the file and
2-byte aligned, the vtable's size even and inside the file, and each field the vtable gives
inside the file and aligned to its size (the table's own size, which neither the C++ verifier
nor the Python accessors use, is not checked; a field absent from a short vtable reads as its
default in both). For each offset field: nonzero, forward, inside the file; each vector (and
string) 4-byte aligned with its elements inside the file; each string zero-terminated; each
table of a vector of tables, each nested table and each union member (by its type code; an
unknown code is not followed, like the C++ verifier) verified the same way. Like the C++
verifier: nesting at most ``MAX_DEPTH`` tables deep and at most ``max_tables`` tables visited
(here one per 4 bytes of the file, at least 1024: without sharing each table needs its own
offset and header; the C++ default is 1,000,000), so that offsets shared between tables cannot
make the walk exponential.

A failure is one line naming what is broken, e.g. "tensor 12 of subgraph 0: shape vector
(1073741824 elements) runs past the end of the file" (the first broken thing in breadth-first
order). The walk is iterative (a queue), so a deep file cannot exhaust Python's recursion
limit.
"""

from __future__ import annotations

import struct
from collections import deque

from aotc.frontend.tflite.flatbuffer_schema import TABLES, UNIONS

MAX_DEPTH = 64  # the C++ verifier's default max_depth
MAX_TABLES = 1_000_000  # the C++ verifier's default max_tables
MAX_SIZE = (1 << 31) - 1  # FLATBUFFERS_MAX_BUFFER_SIZE

# How the elements of a vector of tables are named in errors, by the vector's field name.
NOUNS = {"subgraphs": "subgraph", "tensors": "tensor", "operators": "operator",
         "operator codes": "operator code", "buffers": "buffer", "metadata": "metadata",
         "signature defs": "signature def", "inputs": "input", "outputs": "output",
         "dim metadata": "dimension", "variant tensors": "variant subtype"}
ROOT = "the Model table"

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from


class _Broken(Exception):
    """What is wrong (the one line check_flatbuffer returns)."""


def check_flatbuffer(data: bytes) -> str | None:
    """What flatbuffers' verifier finds wrong in the .tflite flatbuffer ``data`` (one line), or
    None when every table, vector and string the schema reaches is well formed."""
    try:
        _Verifier(data).run()
    except _Broken as e:
        return str(e)
    return None


class _Verifier:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)
        self.max_tables = min(MAX_TABLES, max(1024, self.n // 4))
        self.tables = 0
        # (table name, its byte position, its nesting depth, how errors name it)
        self.queue: deque[tuple[str, int, int, str]] = deque()

    def run(self) -> None:
        if self.n < 8:
            raise _Broken("shorter than a flatbuffer header (8 bytes)")
        if self.n > MAX_SIZE:
            raise _Broken(f"{self.n} bytes, more than a flatbuffer can hold (2 GiB)")
        self.queue.append(("Model", self.offset(0, "the root offset", ROOT), 1, ROOT))
        while self.queue:
            self.table(*self.queue.popleft())

    def offset(self, at: int, what: str, where: str) -> int:
        """The byte an offset field at ``at`` points to (the C++ verifier's VerifyOffset)."""
        o = _U32(self.data, at)[0]
        if o == 0 or o >= 1 << 31 or at + o >= self.n:
            prefix = "" if what == "the root offset" else f"{where}: "
            raise _Broken(f"{prefix}{what} points outside the file (offset {o} at byte {at})")
        return at + o

    def table(self, name: str, pos: int, depth: int, where: str) -> None:
        """Verify the table ``name`` at ``pos``, its scalars, vectors and strings; push the
        tables it leads to."""
        self.tables += 1
        if self.tables > self.max_tables:
            raise _Broken(f"more than {self.max_tables} tables in a file of {self.n} bytes "
                          f"(offsets shared between tables?)")
        if depth > MAX_DEPTH:
            raise _Broken(f"{where}: tables nested more than {MAX_DEPTH} deep")
        data, n = self.data, self.n
        if pos % 4 or pos + 4 > n:
            raise _Broken(f"{where}: the table at byte {pos} is outside the file or misaligned")
        vt = pos - _I32(data, pos)[0]
        if vt < 0 or vt % 2 or vt + 2 > n:
            raise _Broken(f"{where}: its vtable (byte {vt}) is outside the file or misaligned")
        vsize = _U16(data, vt)[0]
        if vsize % 2 or vt + vsize > n:
            raise _Broken(f"{where}: its vtable's size {vsize} is odd or runs past the end of "
                          f"the file")
        fields = TABLES[name]
        for k in range(min(len(fields), (vsize - 4) // 2)):
            off = _U16(data, vt + 4 + 2 * k)[0]
            fname, kind = fields[k]
            if off == 0 or kind == "-":
                continue
            size = int(kind) if kind.isdigit() else 4
            at = pos + off
            if at + size > n:
                raise _Broken(f"{where}: {fname} (at offset {off}) runs past the end of the file")
            if at % size:
                raise _Broken(f"{where}: {fname} (byte {at}) is not {size}-byte aligned")
            if kind.isdigit():
                continue
            target = self.offset(at, fname, where)
            if kind[0] == "[":
                self.vector(kind[1:-1], target, fname, depth, where)
            elif kind == "str":
                self.string(target, fname, where)
            elif kind[0] == "<":
                self.union(kind[1:-1], target, fields, vt, vsize, pos, k, depth, where)
            else:
                self.queue.append((kind, target, depth + 1, f"the {fname} of {where}"))

    def vector(self, elem: str, at: int, fname: str, depth: int, where: str) -> None:
        """A vector of ``elem`` (a scalar size, "str" or a table name) at ``at``."""
        if at % 4:
            raise _Broken(f"{where}: {fname} vector (byte {at}) is not 4-byte aligned")
        if at + 4 > self.n:
            raise _Broken(f"{where}: {fname} vector runs past the end of the file")
        count = _U32(self.data, at)[0]
        if at + 4 + count * (int(elem) if elem.isdigit() else 4) > self.n:
            raise _Broken(f"{where}: {fname} vector ({count} elements) runs past the end of "
                          f"the file")
        if elem.isdigit():
            return
        for e in range(count):
            p = at + 4 + 4 * e
            if elem == "str":
                self.string(self.offset(p, f"{fname} string {e}", where), f"{fname} string {e}",
                            where)
                continue
            label = f"{NOUNS.get(fname, fname + ' element')} {e}"
            self.queue.append((elem, p + _U32(self.data, p)[0], depth + 1,
                               label if where == ROOT else f"{label} of {where}"))
            if len(self.queue) > self.max_tables:
                raise _Broken(f"more than {self.max_tables} tables in a file of {self.n} "
                              f"bytes (offsets shared between tables?)")

    def string(self, at: int, fname: str, where: str) -> None:
        if at % 4:
            raise _Broken(f"{where}: {fname} string (byte {at}) is not 4-byte aligned")
        if at + 4 > self.n or at + 4 + _U32(self.data, at)[0] >= self.n:
            raise _Broken(f"{where}: {fname} string runs past the end of the file")
        if self.data[at + 4 + _U32(self.data, at)[0]] != 0:
            raise _Broken(f"{where}: {fname} string is not zero-terminated")

    def union(self, union: str, target: int, fields: tuple[tuple[str, str], ...], vt: int,
              vsize: int, pos: int, k: int, depth: int, where: str) -> None:
        """The value of union field ``k``: its member table by the type code in field k-1."""
        off = _U16(self.data, vt + 2 + 2 * k)[0] if k and 4 + 2 * (k - 1) < vsize else 0
        code = self.data[pos + off] if off else 0
        members = UNIONS[union]
        if 0 < code < len(members):  # NONE: nothing to verify; unknown codes: not followed
            self.queue.append((members[code], target, depth + 1,
                               f"the {fields[k][0]} ({members[code]}) of {where}"))
