"""IF and WHILE: TFLite's control flow, whose branches, condition and body are other subgraphs
of the model, become ONNX If and Loop (aotc/ops/control, docs/control-flow.md), each subgraph
converted with its inputs bound to the ONNX names of the operator's inputs (Builder.subgraph).

IF: the branches read those names from the graph around them (ONNX outer-scope references,
which the import turns into captures). A condition known at compile time keeps only its taken
branch; a run-time one runs one branch's kernels (both branches' outputs need the same static
shape and type, as in TFLM's static arena).

WHILE (``while cond(v): v = body(v)``): the condition subgraph runs once before the loop on
the initial values (the Loop's initial condition) and again in the Loop's body after the body
subgraph (its stop condition). The C loop runs while the condition holds, as TFLM's WHILE does:
aotc's Loop needs no trip count, and none is imposed (a condition that never turns false loops
forever, in TFLM too). Loop variables keep their shape and type across iterations.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper

from aotc.errors import AotcError
from aotc.frontend.tflite.builder import Builder
from aotc.frontend.tflite.helpers import _ins, _outs
from aotc.frontend.tflite.options import _opts


def _outputs(names: list[str]) -> list[Any]:
    return [helper.make_empty_tensor_value_info(n) for n in names]


def _typed(b: Builder, name: str, t: int) -> Any:
    dt = helper.np_dtype_to_tensor_dtype(b.dtype(t))
    return helper.make_tensor_value_info(name, dt, list(b.shape(t)))


def if_(b: Builder, op: Any) -> None:
    o = _opts(op, "IfOptions")
    if o is None:
        raise AotcError("IfOptions are missing")
    ins, outs = _ins(op), _outs(op)
    cond = ins[0]
    if b.dtype(cond) != np.bool_ or int(np.prod(b.shape(cond), dtype=np.int64)) != 1:
        raise AotcError(f"the condition must be one bool, it is {b.dtype(cond).name}"
                        f"{list(b.shape(cond))}")
    c = b.get(cond)
    args = [b.get(t, "nhwc") for t in ins[1:]]
    branches = {}
    for attr, index in (("then_branch", o.ThenSubgraphIndex()),
                        ("else_branch", o.ElseSubgraphIndex())):
        nodes, inits, results = b.subgraph(b, int(index), args)
        if len(results) != len(outs):
            raise AotcError(f"{attr.split('_')[0]} subgraph {index} has {len(results)} "
                            f"outputs, the operator {len(outs)}")
        branches[attr] = helper.make_graph(nodes, f"{b.node_name(op)}.{attr}", [],
                                           _outputs(results), inits)
    if b.shape(cond) != ():
        c = b.add("Reshape", [c, b.init(np.zeros(0, np.int64), "shape")], "cond")[0]
    names = [b.out_name(y) for y in outs]
    b.nodes.append(helper.make_node("If", [c], names, name=names[0], **branches))
    for y, n in zip(outs, names):
        b.define(y, n, "nhwc")


def while_(b: Builder, op: Any) -> None:
    o = _opts(op, "WhileOptions")
    if o is None:
        raise AotcError("WhileOptions are missing")
    ins, outs = _ins(op), _outs(op)
    if len(ins) != len(outs) or not ins:
        raise AotcError(f"{len(ins)} inputs and {len(outs)} outputs: WHILE carries each input "
                        f"to the output of the same index")
    for k, (x, y) in enumerate(zip(ins, outs)):
        if (b.shape(x), b.dtype(x)) != (b.shape(y), b.dtype(y)):
            raise AotcError(f"loop variable {k} enters as {b.dtype(x).name}"
                            f"{list(b.shape(x))} and leaves as {b.dtype(y).name}"
                            f"{list(b.shape(y))}; aotc needs a static shape and type")
    cond_index, body_index = int(o.CondSubgraphIndex()), int(o.BodySubgraphIndex())
    args = [b.get(t, "nhwc") for t in ins]
    name = b.node_name(op)

    def condition(bind: list[str]) -> tuple[list[Any], list[Any], str]:
        nodes, inits, results = b.subgraph(b, cond_index, bind)
        if len(results) != 1:
            raise AotcError(f"condition subgraph {cond_index} has {len(results)} outputs; "
                            f"it must give one bool")
        return nodes, inits, results[0]

    nodes, inits, c0 = condition(args)
    b.nodes += nodes
    b.inits += inits
    it, c_in = b._claim(f"{name}/iteration"), b._claim(f"{name}/cond")
    states = [b._claim(f"{b.tname(y)}/loop") for y in outs]
    body_nodes, body_inits, results = b.subgraph(b, body_index, states)
    if len(results) != len(outs):
        raise AotcError(f"body subgraph {body_index} has {len(results)} outputs; the operator "
                        f"carries {len(outs)} loop variables")
    cond_nodes, cond_inits, c_out = condition(results)
    body = helper.make_graph(
        body_nodes + cond_nodes, f"{name}.body",
        [helper.make_tensor_value_info(it, TensorProto.INT64, []),
         helper.make_tensor_value_info(c_in, TensorProto.BOOL, []),
         *[_typed(b, s, y) for s, y in zip(states, outs)]],
        _outputs([c_out, *results]), body_inits + cond_inits)
    names = [b.out_name(y) for y in outs]
    b.nodes.append(helper.make_node("Loop", ["", c0, *args], names, name=names[0], body=body))
    for y, n in zip(outs, names):
        b.define(y, n, "nhwc")


CONVERTERS = {"IF": if_, "WHILE": while_}
ONNX_OPS = {"IF": ("If",), "WHILE": ("Loop",)}
