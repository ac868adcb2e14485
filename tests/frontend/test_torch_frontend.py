"""The PyTorch front door: small modules exported in the test (torch.onnx.export, dynamo=True,
in memory), compiled to C, built on the host and run through cffi, against torch's own output
(atol 1e-4) on an input other than the example one; the weight-size guard's line on each, and
its error on a model whose export duplicates a weight; .pt2 files through the CLI; a clear
error naming the extra when torch is missing."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import aotc
from aotc.cli import main
from aotc.errors import AotcError
from aotc.targets.host import Runner

ATOL = 1e-4
REPO = Path(__file__).resolve().parents[2]


class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 4, 3, stride=2)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv1(x)))
        return self.fc(torch.flatten(torch.relu(self.conv2(y)), 1))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.ln, self.b = nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(nn.functional.gelu(self.ln(self.a(x))))


class Linear3D(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [batch, time, 8]
        return self.fc(x)


class Recurrent(nn.Module):
    def __init__(self, cell: type[nn.Module]) -> None:
        super().__init__()
        self.rnn = cell(6, 10, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


class ShapeIf(nn.Module):
    """A Python ``if`` on the input shape: the export takes the example input's branch."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 1:
            return self.fc(x).sum(0)
        return torch.tanh(self.fc(x)[0])


class BroadcastWeight(nn.Module):
    """The known failure: a Linear weight expanded over the batch for bmm; the exporter folds
    the Expand into a constant holding the weight once per batch row."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.fc.weight.t().expand(x.shape[0], 32, 32)
        return torch.bmm(x, w) + self.fc.bias


def _bytes(tensors: object) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)  # type: ignore[attr-defined]


def _module_bytes(m: nn.Module) -> int:
    return _bytes(m.parameters()) + _bytes(m.buffers())


CASES = {
    "conv_bn": (ConvBN, (1, 3, 8, 8)),
    "mlp_layernorm_gelu": (MLP, (2, 16)),
    "linear_3d": (Linear3D, (2, 3, 8)),
    "lstm": (lambda: Recurrent(nn.LSTM), (1, 5, 6)),
    "gru": (lambda: Recurrent(nn.GRU), (1, 5, 6)),
    "shape_if_batch": (ShapeIf, (3, 8)),
    "shape_if_single": (ShapeIf, (1, 8)),
}


def _ratio_line(text: str) -> tuple[int, int, str]:
    m = re.search(r"weights: ([\d,]+) B in the bundle vs ([\d,]+) B of parameters and buffers "
                  r"\((\d+\.\d\d)x\)", text)
    assert m, text
    return int(m[1].replace(",", "")), int(m[2].replace(",", "")), m[3]


@pytest.mark.parametrize("case", list(CASES))
def test_module_matches_torch(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                              ) -> None:
    torch.manual_seed(0)
    make, shape = CASES[case]
    module = make()
    if isinstance(module, ConvBN):  # statistics that are not the identity
        with torch.no_grad():
            module.bn.running_mean.uniform_(-0.5, 0.5)
            module.bn.running_var.uniform_(0.5, 2.0)
            module.bn.weight.uniform_(0.5, 1.5)
    bundle = aotc.compile(module, tmp_path, name="net", example_inputs=(torch.randn(shape),))
    assert module.training  # exported in eval mode, the module's mode restored

    x = torch.randn(shape)  # not the example input: the bundle is not specialised to its values
    got = bundle.load().run({"x": x.numpy()})
    with torch.no_grad():
        want = module.eval()(x).numpy()
    (out,) = got.values()
    assert out.shape == want.shape
    err = float(np.abs(out - want).max())
    assert err <= ATOL, f"{case}: max abs error {err:.3g} vs torch"

    in_bundle, params, ratio = _ratio_line(capsys.readouterr().err)
    assert params == _module_bytes(module)
    assert in_bundle == bundle.weights_bytes
    if isinstance(module, ConvBN):
        # BatchNorm is folded into conv1's weights and bias: its 4 vectors (and its batch
        # counter) are not in the bundle, everything else is, once.
        assert in_bundle == params - _module_bytes(module.bn)
    else:
        assert (in_bundle, ratio) == (params, "1.00")


def test_duplicated_weight_is_refused(tmp_path: Path) -> None:
    module, x = BroadcastWeight(), torch.randn(4, 3, 32)
    with pytest.raises(AotcError, match=r"\(3\.91x\): more than 1\.05x \+ 1 KB.*"
                                        r"--allow-weight-growth"):
        aotc.compile(module, tmp_path / "a", example_inputs=(x,))
    assert not (tmp_path / "a").exists()  # refused before anything is written
    bundle = aotc.compile(module, tmp_path / "b", example_inputs=(x,), allow_weight_growth=True)
    assert bundle.weights_bytes == 4 * 32 * 32 * 4 + 32 * 4  # the weight four times
    got = bundle.load().run({"x": x.numpy()})
    with torch.no_grad():
        want = module(x).numpy()
    assert float(np.abs(next(iter(got.values())) - want).max()) <= ATOL


def test_verify_compares_with_torch() -> None:
    torch.manual_seed(1)
    rep = aotc.verify(MLP(), name="mlp", example_inputs=torch.randn(2, 16))
    assert rep["vectors"] == 2 and max(rep["max_abs_error"].values()) <= ATOL
    with pytest.raises(AotcError, match="needs example_inputs"):
        aotc.compile(MLP(), "unused")


def _save_pt2(module: nn.Module, x: torch.Tensor, path: Path) -> Path:
    torch.export.save(torch.export.export(module.eval(), (x,)), str(path))
    return path


def test_pt2_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch.manual_seed(2)
    module = MLP()
    pt2 = _save_pt2(module, torch.randn(2, 16), tmp_path / "mlp.pt2")
    assert main(["compile", str(pt2), "-o", str(tmp_path / "b"), "-q"]) == 0
    _, params, ratio = _ratio_line(capsys.readouterr().err)
    assert (params, ratio) == (_module_bytes(module), "1.00")
    # the provenance header names the .pt2 file and its hash
    digest = hashlib.sha256(pt2.read_bytes()).hexdigest()[:16]
    assert f"Model: mlp.pt2 (sha256 {digest})" in (tmp_path / "b" / "mlp.c").read_text()

    x = torch.randn(2, 16)
    runner = Runner(tmp_path / "b")
    with torch.no_grad():
        want = module(x).numpy()
    got = next(iter(runner.run({"x": x.numpy()}).values()))
    assert float(np.abs(got - want).max()) <= ATOL

    assert main(["verify", str(pt2), "-q"]) == 0
    assert " vs torch, " in capsys.readouterr().out


def test_pt2_cli_weight_growth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pt2 = _save_pt2(BroadcastWeight(), torch.randn(4, 3, 32), tmp_path / "dup.pt2")
    assert main(["compile", str(pt2), "-o", str(tmp_path / "b"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("aotc: error: weights: 16,512 B in the bundle "
                                               "vs 4,224 B of parameters and buffers (3.91x)")
    args = ["compile", str(pt2), "-o", str(tmp_path / "b"), "-q", "--allow-weight-growth"]
    assert main(args) == 0
    assert "(3.91x)" in capsys.readouterr().err


def test_pt2_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    assert main(["compile", str(bad), "-o", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aotc: error: cannot load bad.pt2 as a torch.export program")


def test_without_torch(tmp_path: Path) -> None:
    """aotc imports and compiles ONNX without torch; a .pt2 asks for the extra."""
    script = (
        "import sys; sys.modules['torch'] = None  # as if torch were not installed\n"
        "from aotc.cli import main\n"
        f"rc = main(['compile', {str(tmp_path / 'm.pt2')!r}, '-o', {str(tmp_path / 'b')!r}])\n"
        "sys.exit(rc)\n")
    (tmp_path / "m.pt2").write_bytes(b"")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == ("aotc: error: torch is not installed; PyTorch models need the "
                                "torch extra: pip install 'aotc[torch]'")
    r = subprocess.run([sys.executable, "-c", "import sys, aotc, aotc.cli, aotc.api; "
                        "sys.exit('torch' in sys.modules)"], cwd=REPO, timeout=120)
    assert r.returncode == 0  # importing aotc does not import torch


def test_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """docs/pytorch.md's Python example, as written (its printed weight line too)."""
    doc = (REPO / "docs" / "pytorch.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    exec(compile(code, "docs/pytorch.md", "exec"), {})
    claimed = re.search(r"# stderr: (aotc: weights: .*)", code)[1]  # type: ignore[index]
    assert claimed in capsys.readouterr().err
    assert (tmp_path / "build" / "net" / "net.c").is_file()


def test_pt2_dynamic_dim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A dimension exported as dynamic takes the saved example's size, or --input-shape's."""
    torch.manual_seed(3)
    batch = torch.export.Dim("batch", min=1, max=16)
    program = torch.export.export(MLP().eval(), (torch.randn(2, 16),),
                                  dynamic_shapes={"x": {0: batch}})
    pt2 = tmp_path / "dyn.pt2"
    torch.export.save(program, str(pt2))
    for args, rows in (([], 2), (["--input-shape", "x=5,16"], 5)):
        out = tmp_path / f"b{rows}"
        assert main(["verify", str(pt2), "-q", "-o", str(out), *args]) == 0
        assert " vs torch, " in capsys.readouterr().out
        meta = json.loads((out / "bundle.json").read_text())
        assert meta["inputs"][0]["shape"] == [rows, 16]
