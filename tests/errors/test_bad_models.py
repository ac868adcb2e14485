"""Mutated models found by fuzzing (issue 9): each is a one-line user error (exit 2 through the
CLI, AotcError through the API) or, when the model is valid, a bundle that agrees with
onnxruntime. Never an internal error, a huge allocation or a silently wrong answer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_user_errors import assert_user_error, compile_cli, model, save, vi

import aotc
import aotc.api
import aotc.ops

TOL = dict(atol=1e-5, rtol=1e-5)  # float32 kernels against onnxruntime


def const(name: str, a: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(a, dtype), name)


def user_error(m: onnx.ModelProto, *needles: str) -> str:
    with pytest.raises(aotc.AotcError) as e:
        aotc.inspect(m, name="m")
    line = e.value.one_line()
    for n in needles:
        assert n in line, f"{n!r} not in {line!r}"
    return line


def agrees_with_onnxruntime(m: onnx.ModelProto, tmp: Path) -> None:
    aotc.api.verify(m, tmp / "o", name="m", **TOL)  # raises AotcError beyond the tolerance


# ------------------------------------------------------------------------------ external data
def _external(folder: Path, **fields: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "w.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    t = const("bias", np.arange(6).reshape(2, 3))
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in {"location": "w.bin", **fields}.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    m = model([helper.make_node("Add", ["x", "bias"], ["y"], name="ad")], [vi("x", [2, 3])],
              [vi("y", None)], [t])
    return save(m, folder / "m.onnx")


@pytest.mark.parametrize("fields, needle", [
    ({"location": "w\0.bin"}, "is not a file name"),
    ({"location": ""}, "is not a file name"),
    ({"offset": "abc"}, "offset 'abc' is not a non-negative integer"),
    ({"offset": "-4"}, "offset '-4' is not a non-negative integer"),
    ({"length": "-1"}, "length '-1' is not a non-negative integer"),
    ({"offset": "99999999999"}, "past the end"),
    ({"length": "99999999"}, "needs bytes 0 to 99999999"),
    ({"offset": "8"}, "has 16 bytes; its shape and dtype need 24"),
    ({"location": "../w.bin"}, "outside the model's folder"),
])
def test_external_data_fields(tmp_path: Path, fields: dict[str, str], needle: str) -> None:
    p = _external(tmp_path / "model", **fields)
    assert_user_error(compile_cli(p, tmp_path / "o"), "tensor 'bias'", needle)
    assert not (tmp_path / "o").exists()


def test_external_data_offset_and_length_inside_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    p = _external(folder, offset="8", length="24")
    (folder / "w.bin").write_bytes(b"\xff" * 8 + np.arange(6, dtype=np.float32).tobytes())
    agrees_with_onnxruntime(onnx.load(str(p)), tmp_path)


# ------------------------------------------------------------------------------ dtypes, Constant
def test_unknown_data_type_numbers() -> None:
    m = model([helper.make_node("Add", ["x", "b"], ["y"], name="ad")], [vi("x", [2, 3])],
              [vi("y", None)], [const("b", np.ones((2, 3)))])
    m.graph.initializer[0].data_type = 77
    user_error(m, "tensor 'b'", "77 (not an ONNX data type)")
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3], 77)],
              [vi("y", None)])
    user_error(m, "input 'x'", "77 (not an ONNX data type)")


@pytest.mark.parametrize("attr, value, kind", [
    ("value", 3.0, "TENSOR"), ("value_float", [1.0, 2.0], "FLOAT"), ("value_ints", 2.5, "INTS"),
    ("value_int", "abc", "INT"), ("value_floats", 3, "FLOATS")])
def test_constant_attribute_of_the_wrong_type(attr: str, value: Any, kind: str) -> None:
    c = helper.make_node("Constant", [], ["c"], name="k")
    c.attribute.append(helper.make_attribute(attr, value))
    m = model([c, helper.make_node("Add", ["x", "c"], ["y"], name="ad")], [vi("x", [2, 3])],
              [vi("y", None)])
    user_error(m, "node 'k' (Constant)", f"attribute {attr!r} must be {kind}")


# ------------------------------------------------------------------------------ arity
@pytest.mark.parametrize("op, ins, outs, needle", [
    ("Add", ["x"], ["y"], "has 1 input(s); Add takes 2"),
    ("Add", ["x", "x", "x"], ["y"], "has 3 input(s); Add takes 2"),
    ("Add", ["x", ""], ["y"], "input 1 (B) is required but empty"),
    ("Relu", [], ["y"], "has 0 input(s); Relu takes 1"),
    ("Relu", ["x"], ["y", "z"], "has 2 output(s); Relu takes 1"),
    ("Where", ["x", "x"], ["y"], "Where takes 3"),
    ("Concat", [], ["y"], "Concat takes 1 or more"),
    ("Clip", ["x", "", "", ""], ["y"], "Clip takes 1 to 3"),
])
def test_input_and_output_counts_follow_the_schema(op: str, ins: list[str], outs: list[str],
                                                   needle: str) -> None:
    m = model([helper.make_node(op, ins, outs, name="n", **({"axis": 0} if op == "Concat"
                                                             else {}))],
              [vi("x", [2, 3])], [vi("y", None)])
    user_error(m, f"node 'n' ({op})", needle)


def test_arity_through_the_cli(tmp_path: Path) -> None:
    m = model([helper.make_node("Mul", ["x"], ["y"], name="mu")], [vi("x", [2, 3])],
              [vi("y", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      "node 'mu' (Mul)", "Mul takes 2")


# ------------------------------------------------------------------------------ Conv groups
def _conv(op: str, group: int) -> onnx.ModelProto:
    w = const("w", np.ones((4, 2, 3, 3)))
    if op == "Conv":
        return model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", group=group)],
                     [vi("x", [1, 4, 5, 5])], [vi("y", None)], [w])
    inits = [const("xs", 0.1), const("xz", 0, np.uint8), const("w", np.ones((4, 2, 3, 3)), np.int8),
             const("ws", [0.05] * 4), const("wz", [0] * 4, np.int8), const("ys", 0.2),
             const("yz", 0, np.uint8)]
    return model([helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                                   ["y"], name="c", group=group)],
                 [vi("x", [1, 4, 5, 5], TensorProto.UINT8)], [vi("y", None, TensorProto.UINT8)],
                 inits)


@pytest.mark.parametrize("op", ["Conv", "QLinearConv"])
@pytest.mark.parametrize("group, needle", [(0, "group=0 is not valid; it must be an integer >= 1"),
                                           (-2, "group=-2 is not valid"),
                                           (3, "channels do not match group=3")])
def test_conv_group(op: str, group: int, needle: str) -> None:
    user_error(_conv(op, group), f"node 'c' ({op})", needle)


def test_conv_group_zero_through_the_cli(tmp_path: Path) -> None:
    assert_user_error(compile_cli(save(_conv("Conv", 0), tmp_path / "m.onnx"), tmp_path / "o"),
                      "node 'c' (Conv)", "group=0")


# ------------------------------------------------------------------------------ quantisation
@pytest.mark.parametrize("which, values, needle", [
    ("xs", [], "x_scale is empty"), ("xz", [], "x_zero_point is empty"),
    ("ws", [0.05, 0.05], "w_scale has 2 values; expected 1 or 4"),
    ("wz", [0, 0], "w_zero_point has 2 values; expected 1 or 4"),
    ("ws", [0.05, -2400.0, 1400.0, 0.1], "w_scale has 1 of 4 values that are not positive"),
    ("ws", [0.05, 0.0, 0.1, 0.1], "not positive"), ("ys", [np.inf], "not positive"),
    ("xs", [np.nan], "not positive"), ("ws", [1e-40] * 4, "not positive")])
def test_bad_quantisation_parameters(which: str, values: list[float], needle: str) -> None:
    m = _conv("QLinearConv", 2)  # a valid depth-2-group conv but for the one edit
    for t in m.graph.initializer:
        if t.name == which:
            t.CopyFrom(const(which, values, numpy_helper.to_array(t).dtype))
    with pytest.raises(aotc.AotcError) as e:  # some are found by prepare, at compile time
        aotc.compile(m, Path("/nonexistent/never-written"), name="m")
    assert needle in e.value.one_line() and "node 'c' (QLinearConv)" in e.value.one_line()


def test_qdq_model_with_negative_per_channel_scales(tmp_path: Path) -> None:
    """onnxruntime computes with negative scales; aotc refuses them with a clear message
    (the integer requantisation it would build has no meaning for them)."""
    rng = np.random.default_rng(0)
    scales = np.array([-2400.0, 1400.0, 3.0, -0.5], np.float32)
    inits = [const("wq", rng.integers(-100, 100, (4, 2, 3, 3)), np.int8),
             const("ws", scales), const("wz", [0] * 4, np.int8)]
    m = model([helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], name="dq",
                                axis=0),
               helper.make_node("Conv", ["x", "w"], ["y"], name="c")],
              [vi("x", [1, 2, 5, 5])], [vi("y", None)], inits)
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      "node 'dq' (DequantizeLinear)", "scale has 2 of 4 values",
                      "not positive normal floats (e.g. -2400)")


# ------------------------------------------------------------------------------ huge tensors
@pytest.mark.parametrize("case", ["input", "initializer", "tile", "expand", "constant_of_shape",
                                  "range"])
def test_huge_tensors_are_rejected_by_size_before_allocation(tmp_path: Path, case: str) -> None:
    big = np.array([1 << 20, 1 << 20], np.int64)
    nodes = {
        "input": ([helper.make_node("Relu", ["x"], ["y"], name="n")], [1 << 20, 1 << 20], []),
        "initializer": ([helper.make_node("Add", ["x", "b"], ["y"], name="n")], [2, 3],
                        [const("b", np.ones((2, 3)))]),
        "tile": ([helper.make_node("Tile", ["x", "r"], ["y"], name="n")], [2, 3],
                 [const("r", [1 << 19, 1 << 19], np.int64)]),
        "expand": ([helper.make_node("Expand", ["x", "s"], ["y"], name="n")], [1, 1],
                   [const("s", big, np.int64)]),
        "constant_of_shape": ([helper.make_node("ConstantOfShape", ["s"], ["c"], name="n"),
                               helper.make_node("Add", ["x", "c"], ["y"], name="a")], [1, 1],
                              [const("s", big, np.int64)]),
        "range": ([helper.make_node("Range", ["s0", "s1", "s2"], ["y"], name="n")], [1],
                  [const("s0", 0), const("s1", 1e12), const("s2", 1)]),
    }
    ns, shape, inits = nodes[case]
    m = model(ns, [vi("x", shape)], [vi("y", None)], inits)
    if case == "initializer":
        m.graph.initializer[0].dims[0] = 1 << 40  # a mutated dim; the data stays 24 bytes
    line = assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                             "would take", "TiB", "limit per tensor is 1.0 GiB")
    assert "MemoryError" not in line
    name = {"input": "input 'x'", "initializer": "tensor 'b'",
            "constant_of_shape": "output 'c'"}.get(case, "output 'y'")
    assert name in line


def test_shapes_inferred_without_running_the_reference(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Above INFER_BY_RUNNING_MAX elements the default infer asks ONNX's shape inference instead
    of running the reference on zeros; the shapes it gives make a bundle onnxruntime agrees
    with (the limit is lowered here so a small model takes that path)."""
    monkeypatch.setattr(aotc.ops.opdef, "INFER_BY_RUNNING_MAX", 16)
    calls: list[str] = []
    real = aotc.ops.OpDef.run_reference

    def spy(self: Any, node: Any, args: Any) -> Any:
        calls.append(node.op)
        return real(self, node, args)

    monkeypatch.setattr(aotc.ops.OpDef, "run_reference", spy)
    inits = [const("r", [2, 1, 3], np.int64), const("s", [2, 1, 1, 1], np.int64),
             const("p", [0, 0, 1, 0, 0, 0, 1, 2], np.int64)]
    m = model([helper.make_node("Tile", ["x", "r"], ["t"], name="ti"),
               helper.make_node("Expand", ["t", "s"], ["e"], name="ex"),
               helper.make_node("Pad", ["e", "p"], ["q"], name="pa"),
               helper.make_node("Transpose", ["q"], ["y"], name="tr", perm=[3, 1, 0, 2])],
              [vi("x", [2, 3, 5])], [vi("y", None)], inits)
    agrees_with_onnxruntime(m, tmp_path)
    assert not {"Tile", "Expand", "Pad", "Transpose"} & set(calls), calls


# ------------------------------------------------------------------------------ graph outputs
def _mlp(outputs: list[str]) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [const("W", rng.standard_normal((3, 7))), const("b", rng.standard_normal(7))]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["a"], name="ad"),
             helper.make_node("Tanh", ["a"], ["y"], name="th")]
    return model(nodes, [vi("x", [2, 3])], [vi(o, None) for o in outputs], inits)


@pytest.mark.parametrize("outputs", [
    ["y", "b"],        # the fused bias initializer is also an output (was 14 of 14 wrong)
    ["b", "y"], ["W", "y", "b"],
    ["y", "x"],        # a graph input is also an output
    ["x", "y", "x"],
    ["y", "y"],        # an output listed twice
    ["a", "y", "a"],   # an intermediate listed twice (it also stops the fusion)
])
def test_outputs_that_are_initializers_inputs_or_repeated(tmp_path: Path,
                                                          outputs: list[str]) -> None:
    agrees_with_onnxruntime(_mlp(outputs), tmp_path)


def test_repeated_output_writes_every_buffer(tmp_path: Path) -> None:
    """Runner.run returns a dict by name, which hides one of the two "y" buffers: read both C
    output buffers of ["y", "y"] directly."""
    import onnxruntime as ort

    from aotc.targets.host import Runner

    m = _mlp(["y", "y"])
    aotc.compile(m, tmp_path / "o", name="m")
    runner = Runner(tmp_path / "o")
    outs = runner.meta["outputs"]
    assert [o["name"] for o in outs] == ["y", "y"] and outs[0]["c_name"] != outs[1]["c_name"]
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    fn, args, _ = runner._prepare({"x": x})
    assert fn(*args) == 0
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    for k, spec in enumerate(outs):
        got = np.frombuffer(runner.ffi.buffer(args[1 + k]), np.float32).reshape(spec["shape"])
        np.testing.assert_allclose(got, want[k], **TOL)


# ------------------------------------------------------------------------------ attributes
@pytest.mark.parametrize("node, shape, needle", [
    (helper.make_node("AveragePool", ["x"], ["y"], name="n", kernel_shape=[2, 2], strides=[2, 2],
                      ceil_mode=2), [1, 1, 5, 5],
     "ceil_mode=2 is not valid; it must be one of 0, 1"),
    (helper.make_node("AveragePool", ["x"], ["y"], name="n", kernel_shape=[2, 2],
                      count_include_pad=-1), [1, 1, 5, 5], "count_include_pad=-1"),
    (helper.make_node("MaxPool", ["x"], ["y"], name="n", kernel_shape=[2, 2], auto_pad="SAME"),
     [1, 1, 5, 5], "auto_pad='SAME' is not valid; it must be one of 'NOTSET', 'SAME_UPPER'"),
    (helper.make_node("Gemm", ["x", "x"], ["y"], name="n", transA=2), [3, 3], "transA=2"),
    (helper.make_node("Gemm", ["x", "x"], ["y"], name="n", transB=-1), [3, 3], "transB=-1"),
    (helper.make_node("ReduceSum", ["x"], ["y"], name="n", keepdims=5), [3, 3], "keepdims=5"),
    (helper.make_node("ArgMax", ["x"], ["y"], name="n", select_last_index=2), [3, 3],
     "select_last_index=2"),
    (helper.make_node("Trilu", ["x"], ["y"], name="n", upper=7), [3, 3], "upper=7"),
    (helper.make_node("DepthToSpace", ["x"], ["y"], name="n", blocksize=0), [1, 4, 2, 2],
     "blocksize=0 is not valid; it must be an integer >= 1"),
])
def test_enum_like_attributes_are_checked(node: onnx.NodeProto, shape: list[int],
                                          needle: str) -> None:
    user_error(model([node], [vi("x", shape)], [vi("y", None)]), f"({node.op_type})", needle)


def test_ceil_mode_two_through_the_cli_and_one_against_onnxruntime(tmp_path: Path) -> None:
    def pool(ceil: int) -> onnx.ModelProto:
        return model([helper.make_node("AveragePool", ["x"], ["y"], name="p", kernel_shape=[2, 2],
                                       strides=[2, 2], ceil_mode=ceil)],
                     [vi("x", [1, 1, 5, 5])], [vi("y", None)])

    assert_user_error(compile_cli(save(pool(2), tmp_path / "m.onnx"), tmp_path / "o"),
                      "node 'p' (AveragePool)", "ceil_mode=2")
    agrees_with_onnxruntime(pool(1), tmp_path)


# ------------------------------------------------------------------------------ defined once
def test_initializer_defined_twice_with_different_values(tmp_path: Path) -> None:
    m = model([helper.make_node("Add", ["x", "b"], ["y"], name="ad")], [vi("x", [2, 3])],
              [vi("y", None)], [const("b", np.ones((2, 3))), const("b", np.zeros((2, 3)))])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      "initializer 'b' is defined twice")


def test_graph_input_listed_twice() -> None:
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3]),
              vi("x", [2, 3])], [vi("y", None)])
    user_error(m, "graph input 'x' is listed twice")


def test_node_output_redefines_an_initializer() -> None:
    m = model([helper.make_node("Relu", ["x"], ["b"], name="r"),
               helper.make_node("Add", ["x", "b"], ["y"], name="ad")], [vi("x", [2, 3])],
              [vi("y", None)], [const("b", np.ones((2, 3)))])
    user_error(m, "node 'r' (Relu)", "value 'b' is defined twice")


# ------------------------------------------------------------------------------ fuzz run (CI)
@pytest.mark.parametrize("op, attrs, needle", [
    ("Conv", dict(pads=[1, 1]), "attribute pads has 2 values; the input has 2 spatial dims "
                                "(expected 4)"),
    ("Conv", dict(strides=[1, 1, 1]), "attribute strides has 3 values"),
    ("Conv", dict(kernel_shape=[3]), "attribute kernel_shape has 1 values"),
    ("ConvTranspose", dict(dilations=[1]), "attribute dilations has 1 values"),
    ("ConvTranspose", dict(output_padding=[0, 0, 0]), "attribute output_padding has 3 values"),
])
def test_window_attributes_of_the_wrong_length(op: str, attrs: dict[str, Any],
                                               needle: str) -> None:
    m = model([helper.make_node(op, ["x", "w"], ["y"], name="c", **attrs)],
              [vi("x", [1, 4, 5, 5])], [vi("y", None)], [const("w", np.ones((4, 4, 3, 3)))])
    user_error(m, f"node 'c' ({op})", needle)


def test_attribute_not_in_the_schema_at_the_models_opset(tmp_path: Path) -> None:
    # ceil_mode arrived in AveragePool-10: at opset 7 the checker and onnxruntime reject it.
    m = model([helper.make_node("AveragePool", ["x"], ["y"], name="p", kernel_shape=[2, 2],
                                ceil_mode=1)], [vi("x", [1, 1, 4, 4])], [vi("y", None)], opset=7)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m)
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      "node 'p' (AveragePool)", "attribute 'ceil_mode' does not exist in "
                      "AveragePool-7 (the version at opset 7)")
    m.opset_import[0].version = 10  # the same node where ceil_mode exists
    agrees_with_onnxruntime(m, tmp_path)


def test_library_warnings_do_not_add_a_line_to_the_error(tmp_path: Path, monkeypatch: Any,
                                                         capsys: Any) -> None:
    # The old fuzz run's onnx "Ignoring unknown external data key(s)" UserWarning came before
    # the error line; aotc now reads external data itself, so a library warning is simulated
    # where the model is loaded. The CLI prints only its own one-line error.
    import warnings

    import aotc.cli
    import aotc.compiler as fe
    real = fe.load_model

    def noisy(path: Any) -> onnx.ModelProto:
        warnings.warn("Ignoring unknown external data key(s)", UserWarning, stacklevel=1)
        return real(path)

    monkeypatch.setattr(fe, "load_model", noisy)
    p = _external(tmp_path / "model", location="missing.bin")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        # Python's own display (pytest records warnings instead of printing them).
        warnings.showwarning = lambda m, c, f, n, file=None, line=None: sys.stderr.write(
            warnings.formatwarning(m, c, f, n, line))
        rc = aotc.cli.main(["compile", str(p), "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("aotc: error: ") and "'missing.bin' not found" in err[0], err


@pytest.mark.parametrize("where, needle", [
    ("out_dtype", "graph output 'y' is declared DOUBLE but is float32"),
    ("out_rank", "graph output 'y' is declared with shape [6] but has shape [2, 3]"),
    ("value_info", "value_info 't' is declared INT64 but is float32"),
    ("init_input", "graph input 'b' is declared with shape [3, 1] but has shape [2, 3]"),
])
def test_declared_types_that_contradict_the_model(where: str, needle: str) -> None:
    # The ONNX checker (full_check) and onnxruntime reject each of these models.
    y = {"out_dtype": vi("y", [2, 3], TensorProto.DOUBLE), "out_shape": vi("y", [2, 4]),
         "out_rank": vi("y", [6])}.get(where, vi("y", [2, 3]))
    m = model([helper.make_node("Add", ["x", "b"], ["t"], name="ad"),
               helper.make_node("Relu", ["t"], ["y"], name="r")],
              [vi("x", [2, 3])], [y], [const("b", np.ones((2, 3)))])
    if where == "value_info":
        m.graph.value_info.append(vi("t", [2, 3], TensorProto.INT64))
    if where == "init_input":
        m.graph.input.append(vi("b", [3, 1]))
    with pytest.raises((onnx.checker.ValidationError, onnx.shape_inference.InferenceError)):
        onnx.checker.check_model(m, full_check=True)
    user_error(m, needle)


def test_declared_symbolic_dims_and_missing_types_are_accepted(tmp_path: Path) -> None:
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])],
              [vi("y", ["n", 3])])
    agrees_with_onnxruntime(m, tmp_path)


def test_ir_version_newer_than_onnx_knows(tmp_path: Path) -> None:
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2])], [vi("y", [2])])
    m.ir_version = onnx.IR_VERSION + 1
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m)
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      f"has IR version {onnx.IR_VERSION + 1}, newer than")


def test_initializer_with_an_empty_name() -> None:
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2])], [vi("y", [2])],
              [const("", [1.0, 2.0])])
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m)
    user_error(m, "an initializer has an empty name")


@pytest.mark.parametrize("op, attr", [("MaxPool", "pads"), ("AveragePool", "strides"),
                                      ("Conv", "dilations"), ("ConvTranspose", "kernel_shape")])
def test_window_attribute_set_but_empty(op: str, attr: str) -> None:
    attrs: dict[str, Any] = {"kernel_shape": [3, 3]} if "Pool" in op else {}
    ins = ["x"] if "Pool" in op else ["x", "w"]
    node = helper.make_node(op, ins, ["y"], name="n", **attrs)
    node.attribute.append(helper.make_attribute(attr, [], attr_type=onnx.AttributeProto.INTS))
    m = model([node], [vi("x", [1, 4, 5, 5])],
              [vi("y", None)], [] if "Pool" in op else [const("w", np.ones((4, 4, 3, 3)))])
    with pytest.raises((onnx.checker.ValidationError, onnx.shape_inference.InferenceError)):
        onnx.checker.check_model(m, full_check=True)
    user_error(m, f"node 'n' ({op})", f"attribute {attr} is set but has no values")


# ------------------------------------------------------------------- schema type constraints
@pytest.mark.parametrize("case", ["dq_int64_zero_point", "pad_value_dtype", "resize_uint8_scales",
                                  "add_mixed_dtypes"])
def test_input_types_outside_the_schema_are_rejected(case: str, tmp_path: Path) -> None:
    """Input dtypes the op's schema version does not allow, or inputs sharing a type parameter
    with different dtypes: the ONNX checker and onnxruntime reject these models; aotc used to
    compile them with a guess (fuzz accepted-invalid)."""
    x = vi("x", [1, 2, 4, 4])
    if case == "dq_int64_zero_point":
        nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")]
        ins, inits = [vi("q", [4], TensorProto.INT64)], [const("s", 0.1), const("z", 0, np.int64)]
        needles = ["'dq'", "(DequantizeLinear)", "int64", "allows"]
    elif case == "pad_value_dtype":
        nodes = [helper.make_node("Pad", ["x", "p", "v"], ["y"], name="pd")]
        ins = [x]
        inits = [const("p", [0, 0, 1, 1, 0, 0, 1, 1], np.int64), const("v", 1, np.int32)]
        needles = ["'pd'", "(Pad)", "input 2 (constant_value) has type int32", "float32"]
    elif case == "resize_uint8_scales":
        nodes = [helper.make_node("Resize", ["x", "", "sc"], ["y"], name="rs")]
        ins, inits = [x], [const("sc", [1, 1, 2, 2], np.uint8)]
        needles = ["'rs'", "(Resize)", "input 2 (scales) has type uint8", "float32"]
    else:
        nodes = [helper.make_node("Add", ["x", "c"], ["y"], name="ad")]
        ins, inits = [x], [const("c", np.ones((1, 2, 4, 4)), np.int32)]
        needles = ["'ad'", "(Add)", "input 1 (B) has type int32", "float32", "but input 0 (A) has float32"]
    m = model(nodes, ins, [vi("y", None)], inits, opset=19)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m, full_check=True)
    line = user_error(m, *needles)
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), *needles)
    assert "\n" not in line


# ------------------------------------------------------------- the 5,000-case run's findings
def _conv_with(attrs: dict[str, Any], op: str = "Conv") -> onnx.ModelProto:
    w = np.ones((2, 2, 3, 3), np.float32)
    return model([helper.make_node(op, ["x", "w"], ["y"], name="cv", **attrs)],
                 [vi("x", [1, 2, 6, 6])], [vi("y", None)], [const("w", w)])


@pytest.mark.parametrize("op, attrs, needle", [
    ("Conv", {"kernel_shape": [3, 2]}, "kernel_shape [3, 2] does not match the weight's "
                                       "spatial dims [3, 3]"),
    ("ConvTranspose", {"kernel_shape": [1, 2]}, "kernel_shape [1, 2] does not match"),
    ("Conv", {"kernel_shape": [0, 3]}, "attribute kernel_shape = [0, 3] must be positive"),
    ("Conv", {"strides": [1, 0]}, "attribute strides = [1, 0] must be positive"),
    ("ConvTranspose", {"strides": [2, 0]}, "attribute strides = [2, 0] must be positive"),
    ("Conv", {"dilations": [-1, 1]}, "attribute dilations = [-1, 1] must be positive"),
    ("Conv", {"pads": [-1, 0, 0, 0]}, "attribute pads = [-1, 0, 0, 0] must be non-negative"),
    ("MaxPool", {"kernel_shape": [2, -2]}, "attribute kernel_shape = [2, -2] must be positive"),
])
def test_window_attributes_the_checker_rejects(op: str, attrs: dict[str, Any], needle: str,
                                               tmp_path: Path) -> None:
    """The ONNX checker rejects these windows and onnxruntime refuses them; aotc used to
    ignore kernel_shape (taking the weight's) or compute with a zero stride."""
    if op == "MaxPool":
        m = model([helper.make_node(op, ["x"], ["y"], name="cv", **attrs)],
                  [vi("x", [1, 2, 6, 6])], [vi("y", None)])
    else:
        m = _conv_with(attrs, op)
    with pytest.raises(Exception):
        onnx.checker.check_model(m, full_check=True)
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'cv'",
                      f"({op})", needle)


def test_a_domain_needs_its_opset_import(tmp_path: Path) -> None:
    """'ai.onnx' and '' name the same operator set, but the checker and onnxruntime want an
    opset import for the name a node uses."""
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r", domain="ai.onnx")],
              [vi("x", [2, 3])], [vi("y", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'r'",
                      "(Relu)", "no opset import for domain 'ai.onnx'")
    m.opset_import.append(helper.make_opsetid("ai.onnx", 17))
    agrees_with_onnxruntime(m, tmp_path)


@pytest.mark.parametrize("scales, needle", [
    ([1, 1, np.inf, 2], "must be finite and > 0"),
    ([1, 1, 1e38, 1], "interpolation table"),
])
def test_resize_scales_that_cannot_be_planned(scales: list[float], needle: str,
                                              tmp_path: Path) -> None:
    m = model([helper.make_node("Resize", ["x", "", "sc"], ["y"], name="rs", mode="linear")],
              [vi("x", [1, 1, 4, 4])], [vi("y", None)], [const("sc", scales)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'rs'",
                      "(Resize)", needle)


def test_resize_of_a_huge_axis_is_refused_before_allocating(tmp_path: Path) -> None:
    """A 65536 -> 131072 axis would need a 64 GiB compile-time table (a MemoryError before)."""
    m = model([helper.make_node("Resize", ["x", "", "sc"], ["y"], name="rs", mode="nearest")],
              [vi("x", [1, 1, 2, 65536])], [vi("y", None)], [const("sc", [1, 1, 1, 2])])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'rs'",
                      "(Resize)", "resizing 65536 to 131072")


def test_gru_with_a_scalar_recurrence_weight(tmp_path: Path) -> None:
    m = model([helper.make_node("GRU", ["x", "w", "r"], ["y"], name="g", hidden_size=2)],
              [vi("x", [1, 1, 3])], [vi("y", None)],
              [const("w", np.ones((1, 6, 3))), const("r", 0.5)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'g'",
                      "(GRU)", "R has rank 0; expected 3")


def test_an_output_declared_non_empty_that_is_computed_empty(tmp_path: Path) -> None:
    """A stale declared dim is tolerated (onnxruntime warns and runs), but not a declared
    non-zero dim that the model computes as 0: onnxruntime's kernels crash on such models."""
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")],
              [vi("x", [1, 0, 4])], [vi("y", [1, 1, 4])])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      "graph output 'y' is declared with shape [1, 1, 4] but has shape [1, 0, 4]")


def test_a_tensor_with_two_data_fields(tmp_path: Path) -> None:
    """raw_data and int64_data both set: the checker and onnxruntime refuse; which one is the
    value would be a guess."""
    t = const("axes", [1], np.int64)
    t.int64_data.append(0)
    m = model([helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="u")],
              [vi("x", [2, 3])], [vi("y", None)], [t], opset=13)
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      "tensor 'axes' holds data in raw_data and int64_data")


def test_dropout_ratio_must_be_a_scalar(tmp_path: Path) -> None:
    m = model([helper.make_node("Dropout", ["x", "r"], ["y"], name="d")],
              [vi("x", [2, 3])], [vi("y", None)], [const("r", [0.5, 0.5])], opset=13)
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'d'",
                      "(Dropout)", "ratio must be a scalar; it has shape [2]")


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_conv_bias_must_have_one_value_per_output_channel(op: str, tmp_path: Path) -> None:
    """A scalar B (a Constant value_float) indexed per channel was an internal error."""
    m = model([helper.make_node(op, ["x", "w", "b"], ["y"], name="cv")],
              [vi("x", [1, 2, 4, 4])], [vi("y", None)],
              [const("w", np.ones((2, 2, 3, 3))), const("b", 0.5)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'cv'",
                      f"({op})", "B has shape []; expected [2]")


def test_external_data_entry_that_is_not_utf8(tmp_path: Path) -> None:
    """A flipped bit in an external-data location: protobuf hands over bytes, not text."""
    path = _external(tmp_path / "m")
    data = path.read_bytes()
    assert data.count(b"w.bin") == 1
    path.write_bytes(data.replace(b"w.bin", b"w\xffbin"))
    assert_user_error(compile_cli(path, tmp_path / "o"), "tensor 'bias'",
                      "an external data entry is not valid UTF-8 text")


def test_output_declared_with_a_non_tensor_type(tmp_path: Path) -> None:
    y = onnx.ValueInfoProto()
    y.name = "y"
    y.type.optional_type.SetInParent()
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])], [y])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      "graph output 'y' is declared with optional_type")
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])],
              [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"),
                      "graph output 'y' is declared as a tensor with no element type")


def test_pool_pads_beyond_any_output(tmp_path: Path) -> None:
    """pads of 2^63 - 1: the window tables per output position never finished building."""
    m = model([helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2],
                                pads=[1, 1, 1, 2 ** 63 - 1])],
              [vi("x", [1, 1, 4, 4])], [vi("y", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'mp'",
                      "(MaxPool)", "positions along a spatial dim", "aotc supports up to")


def test_an_empty_variadic_input(tmp_path: Path) -> None:
    """Concat('', x): an omitted input in a variadic list (an internal error before)."""
    m = model([helper.make_node("Concat", ["", "x"], ["y"], name="cc", axis=0)],
              [vi("x", [2, 3])], [vi("y", None)])
    assert_user_error(compile_cli(save(m, tmp_path / "m.onnx"), tmp_path / "o"), "'cc'",
                      "(Concat)", "input 0 (inputs) is empty")
