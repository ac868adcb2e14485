"""The .tflite flatbuffer verifier (aotc/frontend/tflite/flatbuffer.py): its schema tables agree
with the ``tflite`` package's generated accessors (what the importer reads); every real model of
the zoo and of MLPerf Tiny verifies; a model cut at every 1/64 of its length is refused in one
line (exit 2); byte flips in vtables, offsets and vector lengths of real models are either
refused in one line (and then LiteRT refuses the file too: the verifier is not stricter than
flatbuffers' C++ verifier that LiteRT runs) or, when the file still verifies, imported without a
traceback and without an accessor failing on the bytes (the importer's catch-all "not a valid
TFLite flatbuffer (<exception>)" never fires after the verifier passed); each kind of break is
named.
"""

from __future__ import annotations

import importlib
import inspect
import random
import re
import sys
import time
from pathlib import Path

import pytest

import aotc.frontend.tflite.flatbuffer as fb
from aotc.cli import main as cli_main
from aotc.errors import AotcError
from aotc.frontend.tflite.flatbuffer import check_flatbuffer
from aotc.frontend.tflite.flatbuffer_schema import TABLES, UNIONS
from aotc.frontend.tflite.importer import convert

# LiteRT runs in a forked child (a malformed model may crash it): the fuzz oracle's.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from tflite_oracle import in_child  # noqa: E402

ZOO = Path(__file__).resolve().parents[1] / "fixtures" / "tflite_zoo"
MLPERF = Path(__file__).resolve().parents[3] / "shared" / "models" / "mlperf_tiny"
WIDTH = {"Bool": 1, "Int8": 1, "Uint8": 1, "Int16": 2, "Uint16": 2, "Int32": 4, "Uint32": 4,
         "Float32": 4, "Int64": 8, "Uint64": 8, "Float64": 8}
UNION_OF = {"BuiltinOptions": "BuiltinOptions", "BuiltinOptions2": "BuiltinOptions2",
            "Details": "QuantizationDetails", "ArraySegments": "SparseIndexVector",
            "ArrayIndices": "SparseIndexVector"}


def _accessor_kinds(cls: str) -> list[str]:
    """The field kinds (flatbuffer_schema's notation) of table ``cls`` as the tflite package's
    generated accessors read them, in vtable order ("-" where no accessor reads a slot)."""
    src = inspect.getsource(importlib.import_module(f"tflite.{cls}"))
    kinds: dict[int, str] = {}
    for m in re.finditer(r"    def (\w+)\(self(, j)?\):\n(.*?)(?=\n    #|\n    def |\Z)", src,
                         re.S):
        name, j, body = m.groups()
        off = re.search(r"Offset\((\d+)\)", body)
        if not off or name.endswith(("AsNumpy", "Length", "IsNone")):
            continue
        cls_ = re.search(r"from tflite\.(\w+) import", body)
        scalar = re.search(r"Get\(flatbuffers\.number_types\.(\w+)Flags", body)
        if "Union(" in body:
            kind = f"<{UNION_OF[name]}>"
        elif "Indirect" in body:
            kind = cls_.group(1) if cls_ else "?"
        elif "String(" in body:
            kind = "str"
        else:
            kind = str(WIDTH[scalar.group(1)]) if scalar else "?"
        kinds[(int(off.group(1)) - 4) // 2] = f"[{kind}]" if j else kind
    return [kinds.get(k, "-") for k in range(max(kinds) + 1 if kinds else 0)]


def test_schema_matches_the_tflite_package():
    import tflite

    for union, members in UNIONS.items():
        enum = getattr(importlib.import_module(f"tflite.{union}"), union)
        codes = {v: k for k, v in vars(enum).items() if not k.startswith("_")}
        assert members == tuple("" if c == 0 else codes[c] for c in range(len(codes))), union
    for name, fields in TABLES.items():
        assert hasattr(tflite, name), name
        assert [k for _, k in fields] == _accessor_kinds(name), name


def _real_models() -> list[Path]:
    return sorted(ZOO.glob("*.tflite")) + sorted(MLPERF.glob("*.tflite"))


def test_real_models_verify():
    """Every zoo fixture and MLPerf Tiny .tflite model verifies; the time is printed (pytest
    -s) and bounded loosely (a shared machine)."""
    assert len(_real_models()) >= 20, "the zoo or the MLPerf Tiny models are missing"
    for path in _real_models():
        data = path.read_bytes()
        t = time.perf_counter()
        assert check_flatbuffer(data) is None, path.name
        ms = (time.perf_counter() - t) * 1e3
        print(f"{path.name}: {len(data)} bytes verified in {ms:.2f} ms")
        assert ms < 500, (path.name, ms)


def test_truncation_at_every_64th_is_refused_in_one_line(tmp_path, capsys):
    data = (ZOO / "face_detection_short_range_fp16.tflite").read_bytes()
    for k in range(1, 64):
        cut = len(data) * k // 64
        path = tmp_path / "model.tflite"
        path.write_bytes(data[:cut])
        rc = cli_main(["compile", str(path), "-o", str(tmp_path / "b")])
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert rc == 2 and len(err) == 1, (cut, rc, err)
        assert "not a valid TFLite flatbuffer: " in err[0], (cut, err[0])


class _Walk(fb._Verifier):
    """The verifier's walk, recording the bytes of every vtable, every offset (including each
    table's offset to its vtable) and every vector and string length."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.vtables: list[int] = []
        self.offsets: list[int] = []
        self.lengths: list[int] = []

    def offset(self, at: int, what: str, where: str) -> int:
        self.offsets.append(at)
        return super().offset(at, what, where)

    def table(self, name: str, pos: int, depth: int, where: str) -> None:
        vt = pos - int.from_bytes(self.data[pos:pos + 4], "little", signed=True)
        self.vtables.extend(range(vt, vt + int.from_bytes(self.data[vt:vt + 2], "little")))
        self.offsets.append(pos)
        super().table(name, pos, depth, where)

    def vector(self, elem: str, at: int, fname: str, depth: int, where: str) -> None:
        self.lengths.append(at)
        if not elem.isdigit():
            count = int.from_bytes(self.data[at:at + 4], "little")
            self.offsets.extend(range(at + 4, at + 4 + 4 * count, 4))
        super().vector(elem, at, fname, depth, where)

    def string(self, at: int, fname: str, where: str) -> None:
        self.lengths.append(at)
        super().string(at, fname, where)


def _litert_loads(data: bytes) -> bool:
    def load() -> bool:
        from ai_edge_litert.interpreter import Interpreter

        Interpreter(model_content=data)
        return True

    return in_child(load)[0]


def _outcome(data: bytes) -> str:
    """"refused" (by the verifier, in one line; LiteRT refuses it too), "refused later" (by the
    importer, one line) or "imported"; any other exception fails the test."""
    bad = check_flatbuffer(data)
    if bad is not None:
        assert "\n" not in bad and bad, bad
        assert not _litert_loads(data), f"LiteRT loads a model the verifier refuses: {bad}"
        return "refused"
    try:
        convert(data, "m.tflite")
    except AotcError as e:
        assert "\n" not in e.reason, e.reason
        # the importer's catch-all around the generated accessors: never after verification
        assert "is not a valid TFLite flatbuffer (" not in e.reason, e.reason
        return "refused later"
    return "imported"


@pytest.mark.parametrize("name", ["micro_speech_int8", "mnist_lstm_int8", "magic_wand_int8"])
def test_byte_flips_refuse_in_one_line_or_import(name):
    """30 seeded flips in each of: vtable bytes, offsets, vector/string lengths."""
    data = (ZOO / f"{name}.tflite").read_bytes()
    walk = _Walk(data)
    walk.run()
    rng = random.Random(f"flips {name}")
    seen: dict[str, int] = {}
    for kind, where in (("vtable", walk.vtables), ("offset", walk.offsets),
                        ("length", walk.lengths)):
        assert len(where) > 30, (kind, len(where))
        for _ in range(30):
            pos = rng.choice(where) + (rng.randrange(4) if kind != "vtable" else 0)
            bad = bytearray(data)
            bad[pos] ^= rng.choice([0x01, 0x02, 0x04, 0x10, 0x80, 0xFF])
            out = _outcome(bytes(bad))
            seen[out] = seen.get(out, 0) + 1
    assert seen.get("refused", 0) >= 30, seen  # the flips do reach the verifier


def _tensor0_field(data: bytes, slot: int) -> int:
    """The byte a field (vtable slot) of tensor 0 of subgraph 0 points to."""
    import tflite

    t = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0).Tensors(0)
    o = t._tab.Offset(4 + 2 * slot)
    return t._tab.Pos + o + int.from_bytes(data[t._tab.Pos + o:t._tab.Pos + o + 4], "little")


def test_each_break_is_named():
    data = (ZOO / "micro_speech_int8.tflite").read_bytes()

    def edit(at: int, value: bytes) -> str | None:
        b = bytearray(data)
        b[at:at + len(value)] = value
        return check_flatbuffer(bytes(b))

    shape = _tensor0_field(data, 0)
    assert edit(shape, (1 << 30).to_bytes(4, "little")) == \
        "tensor 0 of subgraph 0: shape vector (1073741824 elements) runs past the end of the file"
    name = _tensor0_field(data, 3)
    n = int.from_bytes(data[name:name + 4], "little")
    assert edit(name + 4 + n, b"x") == "tensor 0 of subgraph 0: name string is not zero-terminated"
    assert edit(name, (len(data)).to_bytes(4, "little")) == \
        "tensor 0 of subgraph 0: name string runs past the end of the file"
    root = int.from_bytes(data[:4], "little")
    assert edit(0, (len(data) + 4).to_bytes(4, "little")).startswith(
        "the root offset points outside the file")
    assert edit(root, (root + 2).to_bytes(4, "little", signed=True)).startswith(
        "the Model table: its vtable (byte -2) is outside the file")
    assert check_flatbuffer(data[:7]) == "shorter than a flatbuffer header (8 bytes)"
    assert check_flatbuffer(data[:len(data) // 2]) is not None


def test_depth_and_table_limits(monkeypatch):
    """The TFLite schema nests at most 6 tables deep (Model, SubGraph, Tensor, SparsityParameters,
    DimensionMetadata, Int32Vector), so the limits are tested lowered."""
    data = (ZOO / "face_detection_full_range_sparse_fp16.tflite").read_bytes()
    monkeypatch.setattr(fb, "MAX_DEPTH", 5)
    assert check_flatbuffer(data).endswith(": tables nested more than 5 deep")
    monkeypatch.setattr(fb, "MAX_DEPTH", 6)
    assert check_flatbuffer(data) is None
    monkeypatch.setattr(fb, "MAX_TABLES", 50)
    assert check_flatbuffer(data).startswith("more than 50 tables in a file of ")
