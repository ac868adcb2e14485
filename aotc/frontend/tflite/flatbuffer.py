"""A partial flatbuffer verifier of a .tflite file's root Model table (importer.convert calls
it first): the fields aotc never reads must still be well formed, since LiteRT's verifier
refuses a file where they are not (a finding of ``scripts/fuzz.py --format tflite``)."""

from __future__ import annotations

# The Model table's fields (schema.fbs order): "u" a scalar, "t" a vector of tables, "i" a
# vector of int32, "s" a string.
MODEL_FIELDS = ("u", "t", "t", "s", "t", "i", "t", "t")


def check_flatbuffer(data: bytes) -> str | None:
    """What flatbuffers' verifier (LiteRT runs it, TFLM's reader fails on it) finds wrong in the
    root Model table of ``data``, or None: the table and its vtable inside the buffer, every
    field inside the table, every vector, string and table a field leads to inside the buffer
    and aligned, the vtable of each table of a vector inside the buffer. A partial verifier:
    aotc reads the fields it uses with bounds checks; this covers the fields it skips."""
    n = len(data)

    def u32(p: int) -> int:
        return int.from_bytes(data[p:p + 4], "little")

    def table(pos: int) -> str | None:
        if pos % 4 or pos + 4 > n:
            return f"a table at byte {pos} outside the buffer or misaligned"
        vt = pos - int.from_bytes(data[pos:pos + 4], "little", signed=True)
        if vt < 0 or vt % 2 or vt + 4 > n:
            return f"the vtable of the table at byte {pos} is outside the buffer"
        vsize, tsize = (int.from_bytes(data[vt + k:vt + k + 2], "little") for k in (0, 2))
        if vsize < 4 or vsize % 2 or vt + vsize > n or tsize < 4 or pos + tsize > n:
            return f"the vtable of the table at byte {pos} has sizes {vsize}, {tsize}"
        return None

    def field(pos: int, k: int) -> int:
        vt = pos - int.from_bytes(data[pos:pos + 4], "little", signed=True)
        vsize = int.from_bytes(data[vt:vt + 2], "little")
        return int.from_bytes(data[vt + 4 + 2 * k:vt + 6 + 2 * k], "little") \
            if 4 + 2 * k < vsize else 0

    if n < 8:
        return "shorter than a flatbuffer header"
    root = u32(0)
    bad = table(root)
    if bad:
        return bad
    tsize = int.from_bytes(data[root - int.from_bytes(data[root:root + 4], "little",
                                                       signed=True) + 2:][:2], "little")
    for k, kind in enumerate(MODEL_FIELDS):
        off = field(root, k)
        if not off:
            continue
        size = 4
        if off + size > tsize or (root + off) % 4:
            return (f"Model field {k} at table offset {off}: outside its table of {tsize} "
                    f"bytes or misaligned")
        if kind == "u":
            continue
        at = root + off + u32(root + off)
        if at % 4 or at + 4 > n:
            return f"Model field {k} points outside the buffer (byte {at})"
        count = u32(at)
        if at + 4 + count * (1 if kind == "s" else 4) + (kind == "s") > n:
            return f"Model field {k}: a vector of {count} elements past the buffer's end"
        if kind == "t":
            for e in range(count):
                p = at + 4 + 4 * e
                bad = table(p + u32(p))
                if bad:
                    return f"Model field {k} element {e}: {bad}"
    return None
