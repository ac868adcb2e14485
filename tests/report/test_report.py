"""`aotc report`: the HTML page renders in headless Chromium (a non-blank screenshot; in the DOM
one timeline rectangle per arena buffer, one graph node per kernel and graph I/O, one table row
per kernel), its numbers are `aotc inspect --json`'s and, with --board, `aotc bench`'s; the BYOC
partition table; one-line errors for a bad model and a missing dot. The tools are installed by
scripts/setup.sh: a missing browser or dot fails these tests, never skips them."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from aotc.cli import main as cli_main

CMSIS_NN = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "cmsis-nn"
KWS_INT8 = "kws_ref_model_int8_qdq.onnx"
MODELS = [KWS_INT8, "vww_96_float.onnx"]


@pytest.fixture(scope="module")
def browser() -> str:
    for name in ("chromium-headless-shell", "chromium"):
        if shutil.which(name):
            return name
    pytest.fail("no headless Chromium (chromium-headless-shell or chromium): "
                "bash scripts/setup.sh installs it")


def _browse(browser: str, page: Path, png: Path, height: int = 1600) -> str:
    """Screenshot ``page`` into ``png``; returns the DOM as Chromium built it."""
    flags = [browser, "--no-sandbox", "--disable-gpu", "--headless", "--hide-scrollbars"]
    url = page.resolve().as_uri()
    subprocess.run([*flags, f"--screenshot={png}", f"--window-size=1400,{height}", url],
                   check=True, capture_output=True, timeout=120)
    dom = subprocess.run([*flags, "--dump-dom", url], check=True, capture_output=True,
                         text=True, timeout=120)
    return dom.stdout


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def _png_pixels(path: Path) -> np.ndarray:
    """(height, width, channels) uint8 of an 8-bit RGB or RGBA PNG (zlib + the five filters)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + size]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + size
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(idat)
    rows, prev = [], np.zeros(stride, np.uint8)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], np.frombuffer(raw, np.uint8, stride, start + 1)
        if kind == 0:
            cur = line.copy()
        elif kind == 1:  # sub: a running sum along each channel
            cur = np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint8).reshape(-1)
        elif kind == 2:
            cur = line + prev
        else:  # average, Paeth: sequential
            out, up = bytearray(line.tobytes()), prev.tobytes()
            for i in range(stride):
                a = out[i - bpp] if i >= bpp else 0
                c = up[i - bpp] if i >= bpp else 0
                pred = (a + up[i]) // 2 if kind == 3 else _paeth(a, up[i], c)
                out[i] = (out[i] + pred) & 0xFF
            cur = np.frombuffer(bytes(out), np.uint8)
        rows.append(cur)
        prev = cur
    return np.stack(rows).reshape(height, width, bpp)


class _Tags(HTMLParser):
    """Every start tag as (tag, attributes)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def with_class(self, tag: str, cls: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and cls in a.get("class", "").split()]

    def values(self) -> dict[str, str]:
        """data-key -> data-value of the summary table."""
        return {a["data-key"]: a["data-value"] for _, a in self.tags if "data-value" in a}


def _inspect(model: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    capsys.readouterr()
    assert cli_main(["inspect", str(model), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _report(model: Path, out: Path, *extra: str) -> None:
    assert cli_main(["report", str(model), "-o", str(out), *extra]) == 0
    assert out.is_file()


@pytest.mark.parametrize("stem", MODELS)
def test_report_renders_and_matches_inspect(stem, mlperf_dir, tmp_path, browser, capsys):
    model = mlperf_dir / stem
    _report(model, tmp_path / "report.html")
    dom = _browse(browser, tmp_path / "report.html", tmp_path / "report.png")

    pixels = _png_pixels(tmp_path / "report.png")
    colours = np.unique(pixels[..., :3].reshape(-1, 3), axis=0)
    not_white = (pixels[..., :3] < 250).any(axis=-1).mean()
    assert len(colours) > 100 and not_white > 0.03, (len(colours), not_white)

    rep = _inspect(model, capsys)
    tags = _Tags(dom)
    assert len(tags.with_class("rect", "buf")) == len(rep["memory"]["buffers"])
    io_nodes = len(rep["inputs"]) + len(rep["outputs"])
    assert len(tags.with_class("g", "node")) == len(rep["kernels"]) + io_nodes
    kernel_rows = tags.with_class("tr", "kernel")
    assert [r["data-kernel"] for r in kernel_rows] == rep["kernels"]
    assert [int(r["data-macs"]) for r in kernel_rows] == [k["macs"] for k in rep["schedule"]]
    assert [int(r["data-params"]) for r in kernel_rows] == [k["params"] for k in rep["schedule"]]
    shown = tags.values()
    m = rep["memory"]
    for key, want in [("arena_bytes", m["arena_bytes"]), ("lower_bound", m["lower_bound"]),
                      ("io_lower_bound", m["io_lower_bound"]), ("total_macs", rep["total_macs"]),
                      ("params", rep["params"]), ("weights_bytes", rep["weights_bytes"]),
                      ("kernels", len(rep["kernels"]))]:
        assert int(shown[key]) == want, key
    assert sum(k["macs"] for k in rep["schedule"]) == rep["total_macs"]
    assert "<script" not in (tmp_path / "report.html").read_text()


def _bench_table(stdout: str) -> tuple[int, dict[str, tuple[int, int | None]]]:
    """(instructions per inference, {row: (instructions, self)}) from `aotc bench`'s output
    (the estimated cycles columns after them are checked by _cycle_rows)."""
    total = re.search(r"([\d,]+) instructions per inference", stdout)
    assert total, stdout
    rows = re.findall(r"^(\S.*?)\s+([\d,]+)\s+[\d.]+%(?:\s+([\d,]+|-))?"
                      r"(?:\s+[\d,]+\s+[\d.]+%)?$", stdout, re.M)

    def number(text: str) -> int:
        return int(text.replace(",", ""))

    return number(total.group(1)), {k: (number(n), number(own) if own not in ("", "-") else None)
                                    for k, n, own in rows}


def _cycle_rows(stdout: str) -> tuple[int, list[int]]:
    """(estimated cycles per inference, each row's estimated cycles) from `aotc bench`."""
    total = re.search(r"([\d,]+) estimated cycles per inference", stdout)
    assert total, stdout
    rows = re.findall(r"^\S.*?\s+[\d,]+\s+[\d.]+%\s+(?:[\d,]+|-)\s+([\d,]+)\s+[\d.]+%$",
                      stdout, re.M)
    return int(total.group(1).replace(",", "")), [int(n.replace(",", "")) for n in rows]


def test_board_numbers_match_bench(mlperf_dir, tmp_path, capsys):
    model = mlperf_dir / KWS_INT8
    _report(model, tmp_path / "report.html", "--board", "cortex-m4f")
    capsys.readouterr()
    assert cli_main(["bench", str(model), "--board", "cortex-m4f", "-o",
                     str(tmp_path / "bundle")]) == 0
    out = capsys.readouterr().out
    total, table = _bench_table(out)
    # Inclusive kernel rows and the run function's row add up to the inference; a kernel's
    # inclusive count is at least its own (self) instructions.
    assert sum(n for n, _ in table.values()) == total
    assert all(n >= own for n, own in table.values() if own is not None)
    # The estimated cycles beside them: one per row, adding up to the inference's (rounding).
    cycles, rows = _cycle_rows(out)
    assert len(rows) == len(table) and abs(sum(rows) - cycles) <= len(rows)
    assert "cycle model: cortex-m4 (" in out

    tags = _Tags((tmp_path / "report.html").read_text())
    bench_rows = {r["data-key"]: (int(r["data-instructions"]),
                                  int(r["data-self"]) if r["data-self"] else None)
                  for r in tags.with_class("tr", "bench")}
    assert bench_rows == table
    (foot,) = tags.with_class("tr", "bench-total")
    assert int(foot["data-instructions"]) == total == int(tags.values()["instructions"])
    # Each kernel row shows the count of the function it is in (folded kernels share one).
    per_kernel = {k: n for key, (n, _) in table.items() for k in key.split("=")}
    for row in tags.with_class("tr", "kernel"):
        assert int(row["data-instructions"]) == per_kernel[row["data-kernel"]]
        assert int(row["data-flash"]) > 0


def test_partition_table_with_byoc(mlperf_dir, tmp_path, capsys):
    if not (CMSIS_NN / "Include" / "arm_nnfunctions.h").is_file():
        pytest.fail(f"pinned CMSIS-NN not found at {CMSIS_NN} (../shared/third_party)")
    model = mlperf_dir / KWS_INT8
    byoc = ["--byoc", "cmsis-nn", "--cmsis-nn-path", str(CMSIS_NN)]
    _report(model, tmp_path / "report.html", *byoc)
    rep = _inspect(model, capsys, *byoc)
    tags = _Tags((tmp_path / "report.html").read_text())
    rows = tags.with_class("tr", "partition")
    assert [(r["data-kernel"], r["data-backend"]) for r in rows] == \
        [(p["kernel"], p["backend"]) for p in rep["partition"]]
    assert any(r["data-backend"] == "cmsis-nn" for r in rows)


def test_report_without_byoc_has_no_partition(mlperf_dir, tmp_path):
    _report(mlperf_dir / KWS_INT8, tmp_path / "report.html")
    assert not _Tags((tmp_path / "report.html").read_text()).with_class("tr", "partition")


def test_report_is_deterministic(mlperf_dir, tmp_path):
    for name in ("a.html", "b.html"):
        _report(mlperf_dir / KWS_INT8, tmp_path / name)
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("aotc: error: ") and err.count("\n") == 1, err
    return err


def test_bad_model_path_is_one_line(tmp_path, capsys):
    _one_line_error(capsys, ["report", str(tmp_path / "missing.onnx"), "-o",
                             str(tmp_path / "r.html")])
    assert not (tmp_path / "r.html").exists()


def test_missing_dot_is_one_line(mlperf_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no dot
    err = _one_line_error(capsys, ["report", str(mlperf_dir / KWS_INT8), "-o",
                                   str(tmp_path / "r.html")])
    assert err == "aotc: error: graphviz's dot is not installed (apt-get install graphviz)\n"
    assert not (tmp_path / "r.html").exists()


def test_timeline_geometry():
    """Rectangles sit at their offsets and lifetimes, inside the plot; the bound line is at or
    below the arena line."""
    from aotc.report.timeline import timeline

    buffers = [{"name": "a", "offset": 0, "size": 64, "first": 0, "last": 1, "kind": "tensor",
                "kernel": "k0", "tensors": ["a"]},
               {"name": "s", "offset": 64, "size": 32, "first": 1, "last": 1, "kind": "scratch",
                "kernel": "k1", "tensors": ["s"]}]
    t = timeline({"arena_bytes": 96, "lower_bound": 80, "buffers": buffers}, ["k0", "k1", "k2"])
    a, s = t["rects"]
    assert a["x"] == t["left"] and a["w"] == pytest.approx(2 * t["plot_w"] / 3)
    assert a["y"] + a["h"] == pytest.approx(t["bottom"])  # offset 0 on the axis
    assert s["y"] == pytest.approx(t["top"]) and s["fill"] != a["fill"]  # top of a full arena
    assert "scratch of k1" in s["title"] and "written by k0" in a["title"]
    arena, bound = t["lines"]
    assert arena["y"] == pytest.approx(t["top"]) and bound["y"] > arena["y"]


def test_report_shows_the_state_of_a_streaming_model(tmp_path, capsys):
    """A model with --state: the summary's "State between calls" row and inspect's
    state_bytes give the state buffer's bytes; the state input is not listed as an input."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in
          ("x", "s", "y", "s_next")]
    g = helper.make_graph([helper.make_node("Add", ["x", "s"], ["s_next"]),
                           helper.make_node("Mul", ["s_next", "two"], ["y"])], "acc",
                          vi[:2], vi[2:],
                          [numpy_helper.from_array(np.full((1, 4), 2.0, np.float32), "two")])
    model = tmp_path / "acc.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    rep = _inspect(model, capsys, "--state", "s=s_next")
    assert rep["memory"]["state_bytes"] == 16
    assert [t["name"] for t in rep["inputs"]] == ["x"]
    assert [t["name"] for t in rep["state"]] == ["s"]
    _report(model, tmp_path / "report.html", "--state", "s=s_next")
    html = (tmp_path / "report.html").read_text()
    assert 'data-key="state_bytes" data-value="16"' in html
