"""After the conversion: every TFLite operator output's declared shape is the one the operator
computes (ONNX shape inference over the converted graph; validate.py checks the rest of the
model's structure before the conversion)."""

from __future__ import annotations

from typing import Any

from aotc.errors import AotcError
from aotc.frontend.tflite.validate_tables import _err


def check_shapes(b: Any, sub: Any, m: Any, used: list[str]) -> None:
    """Every operator output's declared shape is the one its operator computes (ONNX shape
    inference of the converted graph, strict, with the declared shapes as value_info): TFLM
    uses the declared shape of an intermediate tensor, LiteRT recomputes it, so a model where
    the two differ has no single answer."""
    import onnx
    from onnx import helper, shape_inference

    from aotc.frontend.tflite.builder import TO_NCHW

    producer = {int(sub.Operators(i).Outputs(k)): i for i in range(sub.OperatorsLength())
                for k in range(sub.Operators(i).OutputsLength())}
    outs = set(producer)
    graph_names = {o for n in m.graph.node for o in n.output}
    known = {o.name for o in m.graph.output}
    extra = []
    for (t, layout), name in b.names.items():
        if t not in outs or layout not in ("nhwc", "nchw") or name not in graph_names \
                or name in known:
            continue
        shape = list(b.shape(t))
        if any(d <= 0 for d in shape):
            continue
        if layout == "nchw":
            if len(shape) != 4:
                continue
            shape = [shape[p] for p in TO_NCHW]
        dt = helper.np_dtype_to_tensor_dtype(b.declared(t))
        extra.append(helper.make_tensor_value_info(name, dt, shape))
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    probe.graph.value_info.extend(extra)
    # A graph output's declared shape is checked through an Identity to a declared copy (ONNX
    # does not compare a graph output's own declaration with the inferred shape).
    for o in probe.graph.output:
        if not o.type.tensor_type.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else 0
                for d in o.type.tensor_type.shape.dim]
        if any(d <= 0 for d in dims):
            continue
        probe.graph.node.append(helper.make_node("Identity", [o.name], [o.name + "/declared"],
                                                 name=o.name))
        probe.graph.value_info.append(helper.make_tensor_value_info(
            o.name + "/declared", o.type.tensor_type.elem_type, dims))
        o.type.tensor_type.ClearField("shape")
    _standard_domain(probe)
    try:
        shape_inference.infer_shapes(probe, strict_mode=True)
    except shape_inference.InferenceError as e:
        text = " ".join(str(e).split())
        if "existing shape differ" not in text and "rank" not in text.lower():
            return  # an operator ONNX cannot infer: no verdict
        import re

        if re.search(r"op_type:(Loop|If|Scan)\b", text):
            return  # ONNX's inference through a body (IF, WHILE): no verdict; control.py
            # checks the branches' and the body's shapes against the operator's

        node = re.search(r"node name: ([^)]*)\)", text)
        detail = text.split("): ", 1)[-1][:200]
        value_of = {b.tname(t): t for t in producer}  # a graph output keeps its tensor's name
        value_of.update({v: t for (t, _), v in b.names.items()})
        for n in probe.graph.node:
            if node is None or n.name != node.group(1):
                continue
            for o in n.output:
                t = value_of.get(o)
                if t in producer:
                    i = producer[t]
                    raise _err(i, used[i], f"output {b.tname(t)!r} is declared "
                                           f"{list(b.shape(t))}, the operator computes another "
                                           f"shape ({detail})") from None
        raise AotcError(f"a tensor's declared shape differs from the one its operator "
                        f"computes ({text[:240]})") from None


def _standard_domain(m: Any) -> None:
    """aotc's own int16/int64 QuantizeLinear and DequantizeLinear (domain "aotc") as a Cast to
    their output type, which ONNX shape inference knows (the same shape); other nodes of
    aotc's domain stay (their outputs get no inferred shape)."""
    from onnx import TensorProto, helper

    types = {i.name: i.data_type for i in m.graph.initializer}
    for k, n in enumerate(m.graph.node):
        if n.domain != "aotc" or n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        to = TensorProto.FLOAT if n.op_type == "DequantizeLinear" else types.get(
            n.input[2] if len(n.input) > 2 else "", TensorProto.INT16)
        m.graph.node[k].CopyFrom(helper.make_node("Cast", [n.input[0]], list(n.output),
                                                  name=n.name, to=to))
