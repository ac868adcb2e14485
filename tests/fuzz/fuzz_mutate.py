"""Structure-aware mutations of a seed model. Each mutation is a function of a seeded
``random.Random`` and a ``Case`` that edits the case in place and returns a one-line description
(or None when it does not apply to this model); MUTATIONS maps each to its class tag.

``make_case(seed, index)`` is deterministic: the same (seed, index) gives the same bytes, whatever
the number of jobs or the order cases run in.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from fuzz_seeds import SEEDS, seed_model
from onnx import AttributeProto, TensorProto, helper, numpy_helper


@dataclass
class Case:
    model: onnx.ModelProto
    files: dict[str, bytes] = field(default_factory=dict)  # extra files next to model.onnx
    byte_ops: list[Callable[[bytes], bytes]] = field(default_factory=list)

    def serialise(self) -> bytes:
        data = self.model.SerializeToString()
        for op in self.byte_ops:
            data = op(data)
        return data


Mutation = Callable[[random.Random, Case], "str | None"]

INTS = [0, -1, 1, 2, 3, -2**31, 2**31, 2**31 - 1, 2**63 - 1, -2**63, 1_000_000, 7, 100]
FLOATS = [0.0, -1.0, float("nan"), float("inf"), float("-inf"), 1e38, -1e38, 1e-45, 3.5, 1e6]
STRINGS = ["", "bogus", "NOTSET", "\x00", "SAME_UPPER", "VALID", "linear", "nearest", "cubic",
           "reflect", "tf_crop_and_resize", "ü", "x" * 300]
KNOWN_ATTRS = ["axis", "axes", "group", "pads", "strides", "kernel_shape", "dilations",
               "ceil_mode", "keepdims", "alpha", "beta", "mode", "perm", "to", "auto_pad",
               "transA", "transB", "count_include_pad", "direction", "hidden_size", "epsilon",
               "select_last_index", "storage_order", "output_padding", "layout", "foo"]
DIMS = [0, -1, 1, 2, 2**31, 2**31 - 1, 2**40, 3, 5, 9, 65536]
C_WORDS = ["int", "return", "static", "float", "m_run", "main", "m", "arena", "NULL", "auto",
           "_Bool", "restrict", "m_inputs", "aotc_status_t", "i0", "x0", "__LINE__", "errno"]


def _pick(rng: random.Random, seq):  # type: ignore[no-untyped-def]
    seq = list(seq)
    return seq[rng.randrange(len(seq))] if seq else None


def _tensor_names(m: onnx.ModelProto) -> list[str]:
    g = m.graph
    names = [v.name for v in g.input] + [t.name for t in g.initializer]
    names += [o for n in g.node for o in n.output if o]
    return sorted(set(names), key=names.index)


def _rename(m: onnx.ModelProto, old: str, new: str) -> None:
    g = m.graph
    for n in g.node:
        n.input[:] = [new if x == old else x for x in n.input]
        n.output[:] = [new if x == old else x for x in n.output]
    for coll in (g.input, g.output, g.value_info, g.initializer):
        for v in coll:
            if v.name == old:
                v.name = new


# --- attributes -------------------------------------------------------------------------------

def attr_value(rng: random.Random, c: Case) -> str | None:
    nodes = [n for n in c.model.graph.node if n.attribute]
    n = _pick(rng, nodes)
    if n is None:
        return None
    a = _pick(rng, n.attribute)
    if rng.random() < 0.15:
        n.attribute.remove(a)
        return f"removed attribute {a.name} of {n.op_type}"
    if a.type == AttributeProto.INT:
        a.i = _pick(rng, INTS)
        return f"{n.op_type}.{a.name} = {a.i}"
    if a.type == AttributeProto.INTS:
        vals = list(a.ints)
        r = rng.random()
        if r < 0.2:
            vals = []
        elif r < 0.4:
            vals.append(_pick(rng, INTS))
        elif vals:
            vals[rng.randrange(len(vals))] = _pick(rng, INTS)
        del a.ints[:]
        a.ints.extend(vals)
        return f"{n.op_type}.{a.name} = {vals}"
    if a.type == AttributeProto.FLOAT:
        a.f = _pick(rng, FLOATS)
        return f"{n.op_type}.{a.name} = {a.f}"
    if a.type == AttributeProto.STRING:
        s = _pick(rng, STRINGS)
        a.s = s.encode()
        return f"{n.op_type}.{a.name} = {s[:20]!r}"
    return None


def attr_add(rng: random.Random, c: Case) -> str | None:
    n = _pick(rng, c.model.graph.node)
    try:  # mostly an attribute the op has (so it is not rejected just for existing)
        own = sorted(onnx.defs.get_schema(n.op_type, n.domain).attributes)
    except Exception:  # noqa: BLE001 - not an ONNX op (an earlier mutation)
        own = []
    name = _pick(rng, own if own and rng.random() < 0.8 else KNOWN_ATTRS)
    value = _pick(rng, [_pick(rng, INTS), [_pick(rng, INTS) for _ in range(rng.randrange(5))],
                        _pick(rng, FLOATS), _pick(rng, STRINGS)])
    keep = [a for a in n.attribute if a.name != name]
    del n.attribute[:]
    n.attribute.extend(keep)
    n.attribute.append(helper.make_attribute(name, value) if value != [] else
                       helper.make_attribute(name, [], attr_type=AttributeProto.INTS))
    return f"{n.op_type}.{name} := {value!r:.40}"


def attr_type(rng: random.Random, c: Case) -> str | None:
    nodes = [n for n in c.model.graph.node if n.attribute]
    n = _pick(rng, nodes)
    if n is None:
        return None
    i = rng.randrange(len(n.attribute))
    old = n.attribute[i]
    kind = _pick(rng, ["float", "int", "string", "ints", "floats", "tensor", "strings"])
    value = {"float": 1.5, "int": 2, "string": "2", "ints": [1, 2], "floats": [0.5, 2.0],
             "strings": ["a", "b"],
             "tensor": numpy_helper.from_array(np.array([2], np.int64))}[kind]
    new = helper.make_attribute(old.name, value)
    n.attribute[i].CopyFrom(new)
    return f"{n.op_type}.{old.name} retyped to {kind}"


# --- shapes and types -------------------------------------------------------------------------

def dim(rng: random.Random, c: Case) -> str | None:
    g = c.model.graph
    r = rng.random()
    if r < 0.7:
        v = _pick(rng, list(g.input) + (list(g.output) if r < 0.2 else []))
        if v is None or not v.type.tensor_type.HasField("shape"):
            return None
        dims = v.type.tensor_type.shape.dim
        if rng.random() < 0.15:
            if rng.random() < 0.5 and len(dims):
                del dims[len(dims) - 1]
                return f"{v.name}: dropped the last dim"
            dims.add().dim_value = _pick(rng, [1, 2, 3])
            return f"{v.name}: added a dim"
        if not len(dims):
            return None
        d = dims[rng.randrange(len(dims))]
        if rng.random() < 0.15:
            d.dim_param = _pick(rng, ["N", "batch", "", "1"])
            return f"{v.name}: a dim is symbolic {d.dim_param!r}"
        d.dim_value = _pick(rng, DIMS)
        return f"{v.name}: a dim = {d.dim_value}"
    t = _pick(rng, g.initializer)
    if t is None or not len(t.dims):
        return None
    k = rng.randrange(len(t.dims))
    t.dims[k] = _pick(rng, DIMS)
    return f"initializer {t.name}: dim {k} = {t.dims[k]}"


DTYPES = [TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32,
          TensorProto.INT64, TensorProto.BOOL, TensorProto.DOUBLE, TensorProto.FLOAT16,
          TensorProto.INT16, TensorProto.UINT64, TensorProto.BFLOAT16, TensorProto.STRING]


def dtype(rng: random.Random, c: Case) -> str | None:
    g = c.model.graph
    r = rng.random()
    if r < 0.45:
        v = _pick(rng, list(g.input) + list(g.output))
        if v is None:
            return None
        v.type.tensor_type.elem_type = _pick(rng, DTYPES)
        return f"{v.name}: elem_type {v.type.tensor_type.elem_type}"
    t = _pick(rng, g.initializer)
    if t is None:
        return None
    if r < 0.8:
        new = _pick(rng, [d for d in DTYPES if d != TensorProto.STRING])
        arr = numpy_helper.to_array(t)
        np_t = helper.tensor_dtype_to_np_dtype(new)
        with np.errstate(all="ignore"):
            conv = numpy_helper.from_array(arr.astype(np_t), t.name)
        t.CopyFrom(conv)
        return f"initializer {t.name} converted to type {new}"
    t.data_type = _pick(rng, [0, 99, 17, 21, 2**31 - 1, TensorProto.STRING, TensorProto.DOUBLE])
    return f"initializer {t.name}: data_type number {t.data_type}"


def init_data(rng: random.Random, c: Case) -> str | None:
    t = _pick(rng, c.model.graph.initializer)
    if t is None:
        return None
    arr = numpy_helper.to_array(t)
    raw = t.raw_data or arr.tobytes()
    r = rng.random()
    if r < 0.4:
        cut = rng.randrange(0, max(len(raw), 1))
        t.ClearField("float_data")
        t.ClearField("int32_data")
        t.ClearField("int64_data")
        t.raw_data = raw[:cut]
        return f"initializer {t.name}: raw_data {len(raw)} -> {cut} bytes"
    if r < 0.6:
        t.raw_data = raw + raw[: rng.randrange(1, 9)]
        return f"initializer {t.name}: raw_data longer by a few bytes"
    if r < 0.8 and t.data_type == TensorProto.FLOAT:
        t.ClearField("raw_data")
        del t.float_data[:]
        t.float_data.extend([0.5] * max(0, arr.size + rng.choice([-1, 1, 5])))
        return f"initializer {t.name}: float_data of the wrong count"
    t.raw_data = raw
    t.float_data.append(1.0)
    t.int64_data.append(1)
    return f"initializer {t.name}: raw_data and typed data both set"


def extreme_values(rng: random.Random, c: Case) -> str | None:
    t = _pick(rng, c.model.graph.initializer)
    if t is None:
        return None
    arr = numpy_helper.to_array(t).copy()
    if arr.size == 0:
        return None
    flat = arr.reshape(-1)
    k = rng.randrange(1, flat.size + 1)
    idx = rng.sample(range(flat.size), k)
    if arr.dtype.kind == "f":
        pool = [np.nan, np.inf, -np.inf, 3e38, -3e38, 0.0, 1e-40, 1e4, -1e4]
    elif arr.dtype.kind in "iu":
        info = np.iinfo(arr.dtype)
        pool = [info.min, info.max, 0, -1 if info.min < 0 else 1, 1]
    else:
        return None
    for i in idx:
        flat[i] = _pick(rng, pool)
    t.CopyFrom(numpy_helper.from_array(arr, t.name))
    return f"initializer {t.name}: {k} extreme values"


# --- graph structure --------------------------------------------------------------------------

def names_missing(rng: random.Random, c: Case) -> str | None:
    g = c.model.graph
    r = rng.random()
    if r < 0.35:
        n = _pick(rng, [n for n in g.node if n.input])
        if n is None:
            return None
        i = rng.randrange(len(n.input))
        new = _pick(rng, ["", "ghost"])
        old, n.input[i] = n.input[i], new
        return f"{n.op_type} input {i} ({old}) -> {new!r}"
    if r < 0.5:
        n = _pick(rng, g.node)
        if rng.random() < 0.5:
            n.input.append(_pick(rng, _tensor_names(c.model)))
            return f"{n.op_type}: an extra input"
        n.output.append(f"extra_{rng.randrange(100)}")
        return f"{n.op_type}: an extra output"
    if r < 0.7:
        t = _pick(rng, g.initializer)
        if t is None:
            return None
        g.initializer.remove(t)
        return f"removed initializer {t.name}"
    if r < 0.85:
        n = _pick(rng, g.node)
        g.node.remove(n)
        return f"removed node {n.name} ({n.op_type})"
    v = _pick(rng, g.input)
    g.input.remove(v)
    return f"removed graph input {v.name}"


def names_duplicate(rng: random.Random, c: Case) -> str | None:
    g = c.model.graph
    r = rng.random()
    if r < 0.35 and len(g.initializer):
        t = _pick(rng, g.initializer)
        arr = numpy_helper.to_array(t)
        twin = numpy_helper.from_array((arr + 1).astype(arr.dtype) if arr.dtype != bool
                                       else ~arr, t.name)
        g.initializer.insert(rng.randrange(len(g.initializer) + 1), twin)
        return f"initializer {t.name} defined twice with different values"
    if r < 0.55 and len(g.node) > 1:
        a, b = rng.sample(range(len(g.node)), 2)
        g.node[b].output[0] = g.node[a].output[0]
        return f"nodes {g.node[a].name} and {g.node[b].name} write the same tensor"
    if r < 0.7 and len(g.initializer) and len(g.input):
        t = _pick(rng, g.initializer)
        _rename(c.model, g.input[0].name, t.name)
        return f"graph input renamed to initializer {t.name}"
    if r < 0.85:
        g.output.append(g.output[0])
        return f"graph output {g.output[0].name} listed twice"
    n = _pick(rng, g.node)
    n2 = _pick(rng, g.node)
    n2.name = n.name
    return f"node name {n.name!r} used twice"


def cycle(rng: random.Random, c: Case) -> str | None:
    g = c.model.graph
    if not len(g.node):
        return None
    j = rng.randrange(len(g.node))
    k = rng.randrange(j, len(g.node))
    dst, src = g.node[j], g.node[k]
    if not dst.input or not src.output:
        return None
    i = rng.randrange(len(dst.input))
    dst.input[i] = src.output[0]
    return f"{dst.name} input {i} <- {src.name} output (a cycle)"


def unknown_op(rng: random.Random, c: Case) -> str | None:
    n = _pick(rng, c.model.graph.node)
    if rng.random() < 0.5:
        old, n.op_type = n.op_type, _pick(rng, ["FooBar", "", n.op_type.lower(), "Conv\x00x",
                                                 "Loop", "If", "Scan", "Upsample", "Dropout",
                                                 "QLinearAdd", "Einsum", "NonZero"])
        return f"{n.name}: op {old} -> {n.op_type!r}"
    n.domain = _pick(rng, ["com.evil", "ai.onnx.ml", "com.microsoft", "ai.onnx", " ",
                           "ai.onnx.preview.training"])
    return f"{n.name}: domain -> {n.domain!r}"


def opset(rng: random.Random, c: Case) -> str | None:
    m = c.model
    r = rng.random()
    if r < 0.2:
        del m.opset_import[:]
        return "no opset_import"
    if r < 0.35:
        m.ir_version = _pick(rng, [0, 1, 3, 99, -1])
        return f"ir_version {m.ir_version}"
    if r < 0.45:
        m.opset_import.append(helper.make_opsetid("", 11))
        return "default domain imported twice"
    if not len(m.opset_import):
        return None
    m.opset_import[0].version = _pick(rng, [1, 99, 0, -1, 6, 7, 9, 11, 13, 18, 21, 22, 2**40])
    return f"opset {m.opset_import[0].version}"


def external_data(rng: random.Random, c: Case) -> str | None:
    """Moves an initializer to a file next to the model; then maybe spoils the entry."""
    t = _pick(rng, c.model.graph.initializer)
    if t is None:
        return None
    arr = numpy_helper.to_array(t)
    data = arr.tobytes()
    pad = b"\0" * rng.choice([0, 16])
    c.files["weights.bin"] = c.files.get("weights.bin", b"") + pad
    offset = len(c.files["weights.bin"])
    c.files["weights.bin"] += data
    info = {"location": "weights.bin", "offset": str(offset), "length": str(len(data))}
    what = rng.choice(["valid", "location", "location", "offset", "length", "key", "checksum"])
    if what == "location":
        info["location"] = _pick(rng, ["weights\0.bin", "../../../etc/passwd", "/etc/passwd",
                                       "missing.bin", "", ".", "sub/../weights.bin",
                                       "weights.bin\0../x", "/proc/self/mem", "C:\\w.bin"])
    elif what == "offset":
        info["offset"] = _pick(rng, ["abc", "-5", "99999999999", "1e3", "", " 4", "0x10",
                                     str(offset + 1)])
    elif what == "length":
        info["length"] = _pick(rng, ["-1", "0", "99999999999", "x", str(len(data) + 4),
                                     str(max(len(data) - 4, 0))])
    elif what == "key":
        info["rogue\0key"] = "1"
    elif what == "checksum":
        info["checksum"] = "deadbeef"
    t.ClearField("raw_data")
    for f in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
        t.ClearField(f)
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    for k, v in info.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    return f"initializer {t.name} external ({what}): {info!r:.80}"


def hostile_names(rng: random.Random, c: Case) -> str | None:
    m = c.model
    r = rng.random()
    if r < 0.2:
        text = _pick(rng, ["*/ #error x", "\n\n#include <stdio.h>\n", "\x00\x01", "ü" * 2000,
                           "\\", "??/", "a" * 100_000])
        target = _pick(rng, ["doc", "node_doc", "producer", "graph", "meta"])
        if target == "doc":
            m.doc_string = text
        elif target == "node_doc":
            _pick(rng, m.graph.node).doc_string = text
        elif target == "producer":
            m.producer_name = text
        elif target == "graph":
            m.graph.name = text
        else:
            p = m.metadata_props.add()
            p.key, p.value = text[:50], text
        return f"hostile {target} string {text[:12]!r}"
    if r < 0.4:
        names = _tensor_names(m)
        if len(names) < 2:
            return None
        a, b = rng.sample(names, 2)
        stem = _pick(rng, ["x", "in put", "out", "m"])
        pair = _pick(rng, [(f"{stem}.1", f"{stem}_1"), (f"{stem}-a", f"{stem}+a"),
                           (stem.upper(), stem.lower() + "\u0301"), ("1x", "_1x")])
        _rename(m, a, pair[0])
        _rename(m, b, pair[1])
        return f"tensors {a!r}, {b!r} renamed {pair!r} (collide after sanitising)"
    if r < 0.5:
        n = _pick(rng, m.graph.node)
        n.name = _pick(rng, C_WORDS + ["", "*/", "n" * 5000, "名前"])
        return f"node name {n.name[:20]!r}"
    old = _pick(rng, _tensor_names(m))
    new = _pick(rng, C_WORDS + ["名前", "x y", "0abc", "a\nb", "a" * 5000, "", "__aotc",
                                "m_ARENA_SIZE", "*/", "%s%n", "${x}", "{{ x }}"])
    _rename(m, old, new)
    return f"tensor {old!r} renamed {new[:20]!r}"


def graph_io(rng: random.Random, c: Case) -> str | None:
    g = c.model.graph
    r = rng.random()
    if r < 0.4 and len(g.initializer):
        t = _pick(rng, g.initializer)
        g.output.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        return f"initializer {t.name} is also a graph output"
    if r < 0.7:
        try:
            typed = onnx.shape_inference.infer_shapes(c.model).graph.value_info
        except Exception:  # noqa: BLE001 - an earlier mutation broke inference
            return None
        v = _pick(rng, [v for v in typed if v.name not in {o.name for o in g.output}])
        if v is None:
            return None
        g.output.append(v)
        return f"intermediate {v.name} is also a graph output"
    if r < 0.85 and len(g.input):
        v = g.input[0]
        g.output.append(v)
        return f"graph input {v.name} is also a graph output"
    if len(g.output) > 1:
        v = _pick(rng, g.output)
        g.output.remove(v)
        return f"graph output {v.name} removed"
    return None


UNARY = ["HardSwish", "Elu", "Sigmoid", "Relu", "Tanh", "Abs", "Neg", "Softsign", "Selu",
         "HardSigmoid", "Exp", "Sqrt", "LeakyRelu", "Mish"]


def chain(rng: random.Random, c: Case) -> str | None:
    """A long chain of unary elementwise ops on a float graph output (fusion stress)."""
    g = c.model.graph
    outs = [v for v in g.output if v.type.tensor_type.elem_type == TensorProto.FLOAT]
    v = _pick(rng, outs)
    if v is None:
        return None
    length = _pick(rng, [5, 12, 20, 40, 80, 300])
    op = _pick(rng, UNARY + ["mixed"])
    name = v.name
    _rename(c.model, name, "chain_in")
    v.name = name  # the graph output is now the end of the chain
    prev = "chain_in"
    for i in range(length):
        kind = _pick(rng, UNARY) if op == "mixed" else op
        out = name if i == length - 1 else f"chain_{i}"
        g.node.append(helper.make_node(kind, [prev], [out], name=f"chain_node_{i}"))
        prev = out
    return f"chain of {length} {op} after {name}"


def constant_node(rng: random.Random, c: Case) -> str | None:
    """Moves an initializer into a Constant node, with a well- or ill-typed value attribute."""
    g = c.model.graph
    t = _pick(rng, g.initializer)
    if t is None:
        return None
    g.initializer.remove(t)
    arr = numpy_helper.to_array(t)
    how = rng.choice(["value", "value", "value_float", "value_ints", "value_string",
                      "value_floats", "two", "none", "value_as_float"])
    if how == "value":
        attrs = {"value": t}
    elif how == "value_float":
        attrs = {"value_float": float(arr.reshape(-1)[0]) if arr.size else 0.0}
    elif how == "value_ints":
        attrs = {"value_ints": [int(v) for v in arr.reshape(-1)[:8]]}
    elif how == "value_floats":
        attrs = {"value_floats": [float(v) for v in arr.reshape(-1)[:8]]}
    elif how == "value_string":
        attrs = {"value_string": "1.0"}
    elif how == "two":
        attrs = {"value": t, "value_float": 1.0}
    else:
        attrs = {}
    node = helper.make_node("Constant", [], [t.name], name=f"const_{t.name}",
                            **{k: v for k, v in attrs.items() if how != "value_as_float"})
    if how == "value_as_float":  # 'value' given as a float: the wrong attribute type
        node.attribute.append(helper.make_attribute("value", 2.5))
    g.node.insert(0, node)
    return f"initializer {t.name} as a Constant node ({how})"


# --- bytes ------------------------------------------------------------------------------------

def proto_truncate(rng: random.Random, c: Case) -> str | None:
    frac = rng.random()
    c.byte_ops.append(lambda b: b[: int(len(b) * frac)])
    return f"protobuf truncated to {frac:.3f} of its length"


def proto_bitflip(rng: random.Random, c: Case) -> str | None:
    flips = [(rng.random(), rng.randrange(8)) for _ in range(rng.randrange(1, 6))]

    def flip(b: bytes) -> bytes:
        out = bytearray(b)
        for pos, bit in flips:
            out[int(pos * (len(out) - 1))] ^= 1 << bit
        return bytes(out)

    c.byte_ops.append(flip)
    return f"{len(flips)} bit flips in the protobuf"


MUTATIONS: dict[str, Mutation] = {f.__name__: f for f in (
    attr_value, attr_add, attr_type, dim, dtype, init_data, extreme_values, names_missing,
    names_duplicate, cycle, unknown_op, opset, external_data, hostile_names, graph_io, chain,
    constant_node, proto_truncate, proto_bitflip)}


def make_case(seed: int, index: int) -> tuple[str, str, list[str], Case]:
    """(class tag, seed model name, mutation descriptions, case) for case ``index`` of the run
    with ``seed``. Most cases get one mutation; one in four gets two or three (tag 'multi')."""
    rng = random.Random(f"aotc-fuzz:{seed}:{index}")
    seed_name = _pick(rng, SEEDS)
    case = Case(seed_model(seed_name))
    count = 1 if rng.random() < 0.75 else rng.choice([2, 3])
    done: list[tuple[str, str]] = []
    attempts = 0
    while len(done) < count and attempts < 50:
        attempts += 1
        tag = _pick(rng, MUTATIONS)
        try:
            desc = MUTATIONS[tag](rng, case)
        except Exception:  # noqa: BLE001 - e.g. reading a tensor an earlier mutation spoilt
            desc = None  # nothing this mutation can edit: pick another (still deterministic)
        if desc is not None:
            done.append((tag, desc))
    tag = done[0][0] if len(done) == 1 else "multi"
    return tag, seed_name, [f"{t}: {d}" for t, d in done], case
