"""ONNX ModelProto -> Graph with concrete shapes and dtypes.

Checks everything a user can get wrong before any conversion (opset, unsupported ops -- all of
them in one error --, symbolic dims, cycles, types against the schema) and turns each problem
into one AotcError line. Reading the file (protobuf, external data, tensor sizes) is
aotc/frontend/onnx/file.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from aotc import dtypes
from aotc.errors import AotcError
from aotc.frontend.onnx import subgraph
from aotc.frontend.onnx.file import check_size, declared_nbytes, onnx_dtype_name
from aotc.ir.graph import Graph, Node, TensorType, Value
from aotc.ops import REQUIRED, resolve, values_known

MIN_OPSET = 1
_DEFAULT_DOMAINS = ("", "ai.onnx")


def _opset(model: onnx.ModelProto) -> int:
    versions = {o.domain: o.version for o in model.opset_import}
    v = versions.get("", versions.get("ai.onnx"))
    if v is None:
        raise AotcError("model imports no ai.onnx opset")
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= v <= newest:
        raise AotcError(f"opset {v} is not supported (aotc supports {MIN_OPSET} to {newest}); "
                        f"convert with onnx.version_converter")
    return v


def _tensor_type(vi: onnx.ValueInfoProto, bound: Mapping[str, tuple[int, ...]]) -> TensorType:
    tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if tt is None:
        raise AotcError(f"input {vi.name!r} is not a tensor (sequences, maps and optionals are "
                        f"not supported)")
    if tt.elem_type not in dtypes.BY_ONNX:
        name = onnx_dtype_name(tt.elem_type)
        raise AotcError(f"input {vi.name!r} has dtype {name}, which aotc does not support")
    dt = dtypes.BY_ONNX[tt.elem_type]
    tensor_type = _bound_type(vi, tt, dt, bound)
    check_size(f"input {vi.name!r}", tensor_type.shape, dt.name, dt.itemsize)
    return tensor_type


def _bound_type(vi: onnx.ValueInfoProto, tt: Any, dt: dtypes.DType,
                bound: Mapping[str, tuple[int, ...]]) -> TensorType:
    if vi.name in bound:
        shape = tuple(int(d) for d in bound[vi.name])
        if any(d < 0 for d in shape):
            raise AotcError(f"--input-shape {vi.name} has a negative dim {shape}")
        if tt.HasField("shape"):
            if len(tt.shape.dim) != len(shape):
                raise AotcError(f"--input-shape {vi.name} has rank {len(shape)}, the model says "
                                f"{len(tt.shape.dim)}")
            # A bound shape may only fill in symbolic dims: a fixed dim that differs would
            # make the C disagree with the model.
            for k, (d, want) in enumerate(zip(tt.shape.dim, shape)):
                if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != want:
                    raise AotcError(f"--input-shape {vi.name} dim {k} is {want}, but the model "
                                    f"fixes it to {d.dim_value}")
        return TensorType(shape, dt)
    if not tt.HasField("shape"):
        raise AotcError(f"input {vi.name!r} has no shape; bind it with --input-shape "
                        f"{vi.name}=D0,D1,...")
    dims = []
    for k, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        else:
            sym = d.dim_param or "?"
            raise AotcError(f"input {vi.name!r} dim {k} is symbolic ({sym!r}); bind it with "
                            f"--input-shape {vi.name}=D0,D1,... (API: input_shapes={{...}})")
    return TensorType(tuple(dims), dt)


def _attr_value(a: onnx.AttributeProto) -> Any:
    if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        raise ValueError("subgraph attributes are not supported")
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, list):
        return tuple(x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v)
    return v


def _const_value(arr: np.ndarray, name: str) -> Value:
    arr = np.asarray(arr)
    try:
        dt = dtypes.from_numpy(arr.dtype)
    except KeyError:
        raise AotcError(f"constant {name!r} has dtype {arr.dtype}, which aotc does not "
                        f"support") from None
    arr = np.asarray(arr, order="C")  # not ascontiguousarray: it turns scalars into [1]
    arr.setflags(write=False)
    return Value(name, TensorType(tuple(int(d) for d in arr.shape), dt), arr)


def _constant_node(n: onnx.NodeProto, opset: int) -> np.ndarray:
    if len(n.attribute) != 1:
        raise ValueError(f"a Constant node has exactly one attribute, this one has "
                         f"{len(n.attribute)}")
    a = n.attribute[0]
    kinds = {"value": None, "value_float": np.float32, "value_floats": np.float32,
             "value_int": np.int64, "value_ints": np.int64}
    if a.name not in kinds:
        raise ValueError(f"Constant attribute {a.name!r} is not supported")
    _check_attr_type(a, _schema("Constant", opset, ""))
    if a.type == onnx.AttributeProto.TENSOR:
        declared_nbytes(a.t)
    v = _attr_value(a)
    return np.asarray(v, dtype=kinds[a.name]) if kinds[a.name] else np.asarray(v)


def _check_attr_type(a: onnx.AttributeProto, schema: Any) -> None:
    """The attribute has the type its ONNX schema declares (ValueError otherwise)."""
    if schema is None or a.name not in schema.attributes:
        return
    want = schema.attributes[a.name].type
    if int(want.value) != a.type:
        try:
            got = onnx.AttributeProto.AttributeType.Name(a.type)
        except ValueError:
            got = f"type number {a.type}"
        raise ValueError(f"attribute {a.name!r} must be {want.name}, the model gives {got}")


def _check_arity(pn: onnx.NodeProto, node_name: str, schema: Any) -> None:
    """The node's input and output counts fit its ONNX schema, and no required input is left
    empty: done once, here, so no op's check or inference sees a missing or extra input."""
    if schema is None:
        return
    for kind, names, lo, hi, formals in (
            ("input", pn.input, schema.min_input, schema.max_input, schema.inputs),
            ("output", pn.output, schema.min_output, schema.max_output, schema.outputs)):
        if not lo <= len(names) <= hi:
            want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi < 2**31 - 1 else f"{lo} or more"
            raise AotcError(f"the node has {len(names)} {kind}(s); {pn.op_type} takes {want}",
                            node_name, pn.op_type)
        opt = onnx.defs.OpSchema.FormalParameterOption
        for k, name in enumerate(names):
            formal = formals[min(k, len(formals) - 1)] if formals else None
            if formal is None or name:
                continue
            if formal.option == opt.Single:
                raise AotcError(f"{kind} {k} ({formal.name}) is required but empty", node_name,
                                pn.op_type)
            if formal.option == opt.Variadic and kind == "input":
                raise AotcError(f"{kind} {k} ({formal.name}) is empty; a variadic input "
                                f"cannot be left out", node_name, pn.op_type)


def _toposort(nodes: list[onnx.NodeProto], available: set[str]) -> list[onnx.NodeProto]:
    """Kahn's algorithm, stable in the file's order; a leftover set means a cycle."""
    produced_by: dict[str, int] = {}
    for k, n in enumerate(nodes):
        for o in n.output:
            if not o:
                continue
            if o in produced_by or o in available:
                raise AotcError(f"value {o!r} is defined twice (ONNX values are assigned once)",
                                n.name or "?", n.op_type)
            produced_by[o] = k
    deps = [{produced_by[i] for i in [*n.input, *_implicit_inputs(n)]
             if i and i not in available and i in produced_by} for n in nodes]
    missing = [(n, i) for n in nodes for i in n.input
               if i and i not in available and i not in produced_by]
    if missing:
        n, i = missing[0]
        raise AotcError(f"input {i!r} is produced by no node, initializer or graph input",
                        n.name or "?", n.op_type)
    done: set[int] = set()
    order: list[int] = []
    progress = True
    while progress and len(order) < len(nodes):
        progress = False
        for k in range(len(nodes)):
            if k not in done and deps[k] <= done:
                done.add(k)
                order.append(k)
                progress = True
    if len(order) < len(nodes):
        cyc = [nodes[k].name or nodes[k].op_type for k in range(len(nodes)) if k not in done]
        raise AotcError(f"the graph has a cycle through nodes {', '.join(map(repr, cyc[:6]))}")
    return [nodes[k] for k in order]


def _float16_cast_to_float(g: onnx.GraphProto) -> set[str]:
    """The float16 initializers only Cast to float32 reads (float16 weights): imported as
    float32, the same values (the Cast then converts float32 to float32);
    --keep-float16-weights keeps them float16 in flash (aotc/lower/half.py)."""
    f16 = {t.name for t in g.initializer if t.data_type == onnx.TensorProto.FLOAT16}
    for n in g.node:
        to = next((a.i for a in n.attribute if a.name == "to"), None)
        if n.op_type != "Cast" or n.domain not in _DEFAULT_DOMAINS or to != onnx.TensorProto.FLOAT:
            f16 -= set(n.input)
    f16 -= {o.name for o in g.output}
    return f16


def import_model(model: onnx.ModelProto, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                 name: str = "model") -> Graph:
    input_shapes = dict(input_shapes or {})
    opset = _opset(model)
    g = model.graph
    values: dict[str, Value] = {}
    widened = _float16_cast_to_float(g)
    for t in g.initializer:
        if not t.name:
            raise AotcError("an initializer has an empty name")
        if t.name in values:
            raise AotcError(f"initializer {t.name!r} is defined twice (ONNX values are "
                            f"assigned once)")
        declared_nbytes(t)
        try:
            arr = numpy_helper.to_array(t)
            values[t.name] = _const_value(arr.astype(np.float32) if t.name in widened else arr,
                                          t.name)
        except AotcError:
            raise
        except Exception as e:
            raise AotcError(f"initializer {t.name!r} cannot be read: {e}") from None
    inputs = [vi for vi in g.input if vi.name not in values]
    if any(not vi.name for vi in inputs):
        raise AotcError("a graph input has an empty name")
    names = [vi.name for vi in g.input]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise AotcError(f"graph input {twice[0]!r} is listed twice")
    unknown = set(input_shapes) - {vi.name for vi in inputs}
    if unknown:
        raise AotcError(f"--input-shape names no graph input: {', '.join(sorted(unknown))} "
                        f"(inputs: {', '.join(vi.name for vi in inputs)})")
    for vi in inputs:
        values[vi.name] = Value(vi.name, _tensor_type(vi, input_shapes))

    _check_supported(g.node, opset, {o.domain for o in model.opset_import})
    known: dict[str, np.ndarray] = {}  # compile-time values of non-constant node outputs
    used_names: set[str] = set()

    def convert_nodes(protos: list[onnx.NodeProto], vals: dict[str, Value],
                      known: dict[str, np.ndarray], resolve: subgraph.Resolver,
                      prefix: str) -> list[Node]:
        nodes: list[Node] = []
        for k, pn in enumerate(protos):
            node_name = prefix + (pn.name or f"{pn.op_type}_{k}")
            while node_name in used_names:
                node_name += "_"
            used_names.add(node_name)
            _check_arity(pn, node_name, _schema(pn.op_type, opset, _domain(pn)))
            if pn.op_type == "Constant" and pn.domain in _DEFAULT_DOMAINS:
                try:
                    vals[pn.output[0]] = _const_value(_constant_node(pn, opset), pn.output[0])
                except ValueError as e:
                    raise AotcError(str(e), node_name, "Constant") from None
            elif pn.op_type in subgraph.CONTROL_OPS and pn.domain in _DEFAULT_DOMAINS:
                nodes += subgraph.convert(pn, node_name, ctx, vals, resolve)
            else:
                nodes.append(_convert_node(pn, node_name, opset, vals, known))
        return nodes

    ctx = subgraph.Context(opset, known, convert_nodes, _const_value)
    nodes = convert_nodes(_toposort(list(g.node), set(values)), values, known,
                          lambda n: n if n in values else None, "")

    # An output may also be an initializer, a graph input or another output: the schedule gives
    # each one its own buffer (aotc.steps.schedule._insert_output_copies).
    outputs = [o.name for o in g.output]
    for o in outputs:
        if o not in values:
            raise AotcError(f"graph output {o!r} is never produced")
    _check_declared(g, values)
    return Graph(name=name, inputs=[vi.name for vi in inputs], outputs=outputs, values=values,
                 nodes=nodes, opset=opset, meta={"producer": model.producer_name})


def _check_declared(g: onnx.GraphProto, values: Mapping[str, Value]) -> None:
    """Declared types of graph outputs, value_info and initializer-backed graph inputs agree
    with what aotc computes (the ONNX checker and onnxruntime reject a contradiction): the
    dtype when set, and the rank when a shape is given."""
    initialized = {t.name for t in g.initializer}
    decls = [("graph output", vi) for vi in g.output]
    decls += [("value_info", vi) for vi in g.value_info]
    decls += [("graph input", vi) for vi in g.input if vi.name in initialized]
    for kind, vi in decls:
        v = values.get(vi.name)
        if v is None:
            continue
        which = vi.type.WhichOneof("value")
        if which is not None and which != "tensor_type":
            raise AotcError(f"{kind} {vi.name!r} is declared with {which}; aotc computes "
                            f"tensors (sequences, maps and optionals are not supported)")
        if which is None:
            continue
        tt = vi.type.tensor_type
        if not tt.elem_type:
            raise AotcError(f"{kind} {vi.name!r} is declared as a tensor with no element type")
        got = v.type
        if tt.elem_type and dtypes.BY_ONNX.get(tt.elem_type) != got.dtype:
            raise AotcError(f"{kind} {vi.name!r} is declared "
                            f"{onnx_dtype_name(tt.elem_type)} but is {got.dtype.name}")
        if not tt.HasField("shape"):
            continue
        # The rank, and the dims of initializers: a stale fixed dim in an output or value_info
        # declaration is what onnxruntime tolerates (it warns and uses the computed shape),
        # except one that the model computes as empty (a dim of 0 declared non-zero: a broken
        # model, on which onnxruntime's kernels may crash).
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if len(dims) != len(got.shape) or any(
                d is not None and d != s and (kind == "graph input" or s == 0)
                for d, s in zip(dims, got.shape)):
            shown = ["?" if d is None else d for d in dims]
            raise AotcError(f"{kind} {vi.name!r} is declared with shape {shown} but has shape "
                            f"{list(got.shape)}")


def _all_nodes(nodes: Any) -> list[onnx.NodeProto]:
    """The nodes and, recursively, the nodes of their subgraphs."""
    out = []
    for pn in nodes:
        out.append(pn)
        for a in pn.attribute:
            for sg in ([a.g] if a.type == onnx.AttributeProto.GRAPH else
                       a.graphs if a.type == onnx.AttributeProto.GRAPHS else []):
                out += _all_nodes(sg.node)
    return out


def _implicit_inputs(pn: onnx.NodeProto) -> set[str]:
    """Outer-scope names a node's subgraphs read (the node runs after their producers)."""
    out: set[str] = set()
    for a in pn.attribute:
        if a.type != onnx.AttributeProto.GRAPH:
            continue
        defined = {vi.name for vi in a.g.input} | {t.name for t in a.g.initializer}
        for n in a.g.node:
            out |= {i for i in [*n.input, *_implicit_inputs(n)] if i and i not in defined}
            defined |= set(n.output)
        out |= {o.name for o in a.g.output if o.name not in defined}
    return out


def _check_supported(nodes: Any, opset: int, imported: set[str]) -> None:
    bad: dict[str, list[str]] = {}
    for pn in _all_nodes(nodes):
        if pn.domain not in imported:  # the ONNX checker's rule ("" and "ai.onnx" are two names)
            raise AotcError(f"no opset import for domain {pn.domain!r}", pn.name or "?",
                            pn.op_type)
        if pn.op_type == "Constant" and pn.domain in _DEFAULT_DOMAINS:
            continue
        domain = "" if pn.domain in _DEFAULT_DOMAINS else pn.domain
        if resolve(pn.op_type, opset, domain) is None:
            key = f"{pn.domain}.{pn.op_type}" if domain else pn.op_type
            bad.setdefault(key, []).append(pn.name or "?")
    if bad:
        parts = [f"{op} ({len(v)} node{'s' if len(v) > 1 else ''}, e.g. {v[0]!r})"
                 for op, v in sorted(bad.items())]
        raise AotcError(f"unsupported ops at opset {opset}: {'; '.join(parts)}")


def _domain(pn: onnx.NodeProto) -> str:
    return "" if pn.domain in _DEFAULT_DOMAINS else pn.domain


def _schema(op: str, opset: int, domain: str) -> Any:
    """The ONNX schema in force, or None for ops ONNX does not define (custom domains)."""
    try:
        return onnx.defs.get_schema(op, opset, domain)
    except Exception:
        return None


def _type_name(type_str: str) -> str:
    """'tensor(float)' -> 'float32', as aotc's messages name dtypes; other type strings as is."""
    m = re.fullmatch(r"tensor\((\w+)\)", type_str)
    if m is None:
        return type_str
    return {"float": "float32", "double": "float64"}.get(m.group(1), m.group(1))


def _check_type_constraints(pn: onnx.NodeProto, node_name: str, schema: Any,
                            ins: Sequence[Value | None]) -> None:
    """Input dtypes are allowed by the schema version in force, and inputs sharing a type
    parameter have one dtype (the checker and onnxruntime reject anything else)."""
    if schema is None or not schema.inputs:
        return
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    bound: dict[str, tuple[str, str]] = {}  # type parameter -> (type, "input k (name)")
    for k, v in enumerate(ins):
        if v is None:
            continue
        formal = schema.inputs[min(k, len(schema.inputs) - 1)]
        if k >= len(schema.inputs) and formal.option != variadic:
            continue
        t = f"tensor({onnx.TensorProto.DataType.Name(v.type.dtype.onnx).lower()})"
        ts = formal.type_str
        where = f"input {k} ({formal.name}) has type {_type_name(t)}"
        if ts in allowed:
            if t not in allowed[ts]:
                names = ", ".join(sorted(_type_name(a) for a in allowed[ts]))
                raise AotcError(f"{where}; {pn.op_type}-{schema.since_version} allows {names}",
                                node_name, pn.op_type)
            if ts in bound and bound[ts][0] != t and formal.is_homogeneous:
                raise AotcError(f"{where} but {bound[ts][1]} has {_type_name(bound[ts][0])}; "
                                f"{pn.op_type} takes one type for {ts}", node_name, pn.op_type)
            bound.setdefault(ts, (t, f"input {k} ({formal.name})"))
        elif ts.startswith("tensor(") and ts != t:
            raise AotcError(f"{where}; {pn.op_type}-{schema.since_version} needs "
                            f"{_type_name(ts)}", node_name, pn.op_type)


# Conv/ConvTranspose/pooling window attributes: one value per spatial dim (pads two), never empty.
_WINDOW_ATTRS = frozenset({"kernel_shape", "strides", "dilations", "pads", "output_padding",
                           "output_shape"})


# Where the weight of a convolution is (its spatial dims are the kernel's).
_WEIGHT_INPUT = {"Conv": 1, "ConvTranspose": 1, "ConvInteger": 1, "DeformConv": 1,
                 "QLinearConv": 3}


def _check_window(pn: onnx.NodeProto, node_name: str, schema: Any, attrs: dict[str, Any],
                  ins: Sequence[Value | None]) -> None:
    """Convolution and pooling windows: kernel_shape, strides and dilations positive, pads and
    output_padding not negative (the ONNX checker's rules), and a convolution's kernel_shape
    equal to its weight's spatial dims (onnxruntime's)."""
    if schema is None or "kernel_shape" not in schema.attributes:
        return
    for name, least in (("kernel_shape", 1), ("strides", 1), ("dilations", 1), ("pads", 0),
                        ("output_padding", 0)):
        vals = attrs.get(name)
        if isinstance(vals, (list, tuple)) and any(int(v) < least for v in vals):
            what = "positive" if least else "non-negative"
            raise AotcError(f"attribute {name} = {list(vals)} must be {what}", node_name,
                            pn.op_type)
    k = _WEIGHT_INPUT.get(pn.op_type)
    ks = attrs.get("kernel_shape")
    if k is None or not ks or k >= len(ins) or ins[k] is None:
        return
    spatial = tuple(ins[k].type.shape[2:])  # type: ignore[union-attr]
    # (a kernel_shape of another length is the op's check: one value per spatial dim)
    if len(ks) == len(spatial) and tuple(int(v) for v in ks) != spatial:
        raise AotcError(f"kernel_shape {list(ks)} does not match the weight's spatial dims "
                        f"{list(spatial)}", node_name, pn.op_type)


def _convert_node(pn: onnx.NodeProto, node_name: str, opset: int, values: dict[str, Value],
                  known: dict[str, np.ndarray]) -> Node:
    domain = _domain(pn)
    opdef = resolve(pn.op_type, opset, domain)
    assert opdef is not None
    defaults = opdef.attr_defaults()
    schema = _schema(pn.op_type, opset, domain)
    attrs: dict[str, Any] = {}
    for a in pn.attribute:
        if schema is not None and a.name not in schema.attributes:
            raise AotcError(f"attribute {a.name!r} does not exist in {pn.op_type}-"
                            f"{schema.since_version} (the version at opset {opset})",
                            node_name, pn.op_type)
        if a.name not in defaults:
            raise AotcError(f"attribute {a.name!r} is not supported", node_name, pn.op_type)
        try:
            _check_attr_type(a, schema)
            if a.type == onnx.AttributeProto.TENSOR:
                declared_nbytes(a.t)
            attrs[a.name] = _attr_value(a)
            if a.name in _WINDOW_ATTRS and a.type == onnx.AttributeProto.INTS and not a.ints:
                # The ops read an empty list as "not set"; ONNX says one value per dim.
                raise ValueError(f"attribute {a.name} is set but has no values")
        except ValueError as e:
            raise AotcError(str(e), node_name, pn.op_type) from None
    for k, v in defaults.items():
        if k not in attrs:
            if v is REQUIRED:
                raise AotcError(f"required attribute {k!r} is missing", node_name, pn.op_type)
            attrs[k] = v
    version = schema.since_version if schema is not None else opdef.since
    node = Node(pn.op_type, node_name, tuple(pn.input), tuple(pn.output), attrs, version, domain)
    ins = [_with_known(values[i], known) if i else None for i in node.inputs]
    _check_type_constraints(pn, node_name, schema, ins)
    _check_window(pn, node_name, schema, attrs, ins)
    opdef.check_attrs(node, [a.name for a in pn.attribute])
    opdef.check_quant_params(node, ins)
    opdef.check(node, ins)
    try:
        types = opdef.infer(node, ins)
    except AotcError:
        raise
    except Exception as e:
        raise AotcError(f"cannot infer output shape: {type(e).__name__}: {e}",
                        node_name, pn.op_type) from None
    outs = [o for o in node.outputs]
    if len(types) < len([o for o in outs if o]):
        raise AotcError(f"the node has {len(outs)} outputs; aotc supports {len(types)}",
                        node_name, pn.op_type)
    for o, t in zip(outs, types):
        if o:
            if any(d < 0 for d in t.shape):
                raise AotcError(f"output {o!r} has a negative dim {t.shape}", node_name, pn.op_type)
            check_size(f"output {o!r}", t.shape, t.dtype.name, t.dtype.itemsize, node_name,
                        pn.op_type)
            values[o] = Value(o, t)
    _propagate_known(opdef, node, ins, types, known)
    return node


# Shape arithmetic (Shape -> Gather -> Concat -> Reshape, ...) must be known while importing,
# because the ops downstream need the values to check and infer. The nodes stay in the graph
# (fold_constants turns them into constants); only small results are tracked (integer shape
# arithmetic, or float parameter chains such as an expanded window's Cast(size) feeding Range),
# small enough (<= 4 KB) that fold_constants always folds them.
_KNOWN_MAX = 512


def _with_known(v: Value, known: Mapping[str, np.ndarray]) -> Value:
    return Value(v.name, v.type, known[v.name]) if v.name in known else v


def _propagate_known(opdef: Any, node: Node, ins: list[Value | None], types: list[TensorType],
                     known: dict[str, np.ndarray]) -> None:
    if node.domain:
        return
    if not values_known(opdef, ins):
        return
    if not all(t.numel <= _KNOWN_MAX for t in types):
        return
    args = [None if v is None else v.const if v.const is not None
            else np.broadcast_to(np.zeros((), v.type.dtype.np), v.type.shape) for v in ins]
    try:
        outs = opdef.run_reference(node, args)
    except Exception:
        return  # not knowing a value is never an error: the op's own checks report problems
    for o, t, arr in zip(node.outputs, types, outs):
        if o and tuple(np.shape(arr)) == t.shape:
            known[o] = np.asarray(arr, dtype=t.dtype.np, order="C")
