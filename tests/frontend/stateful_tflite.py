"""TFLite models with resource variables (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, CALL_ONCE
with its init subgraph), built with the flatbuffers builder and TFLite's schema
(tflite_builder.Net), and TFLM's interpreter run frame by frame on them (it keeps the variables
between invoke calls).

- ``accumulator(quant)``: state s [1, 8], initialised by CALL_ONCE; per frame
  s = s * a + x, out = relu(FC(s)).
- ``ring(quant)``: a streaming window, state [1, 3, 4] (the last three frames, no initialiser:
  TFLM's default); per frame window = concat(state, x), state = window[:, 1:], out = FC(window).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as S
from tflite_builder import Net, options

_RESOURCE = S.TensorType.RESOURCE


def _resource(net: Net, name: str) -> int:
    t = S.TensorT()
    t.shape = np.array([], np.int32)
    t.type = _RESOURCE
    t.name = name
    t.buffer = 0
    net.tensors.append(t)
    return len(net.tensors) - 1


def _op(net: Net, code: str, inputs: Sequence[int], outputs: Sequence[int],
        opts: Any = None) -> Any:
    c = getattr(S.BuiltinOperator, code)
    if c not in net.codes:
        net.codes.append(c)
    o = S.OperatorT()
    o.opcodeIndex = net.codes.index(c)
    o.inputs = np.array(inputs, np.int32)
    o.outputs = np.array(outputs, np.int32)
    if opts is not None:
        o.builtinOptionsType = getattr(S.BuiltinOptions, type(opts).__name__[:-1])
        o.builtinOptions = opts
    return o


def _handle(net: Net, name: str) -> int:
    h = _resource(net, f"{name}_handle_{len(net.tensors)}")
    net.ops.append(_op(net, "VAR_HANDLE", [], [h],
                       options("VarHandleOptions", container="", sharedName=name)))
    return h


def _activation(net: Net, shape: Sequence[int], name: str, q: tuple[float, int]) -> int:
    if net.quant:
        return net._tensor(shape, np.int8, name, None, q[0], q[1])
    return net._tensor(shape, np.float32, name)


def _with_init(net: Net, main_outputs: Sequence[int], init_ops: list[Any]) -> bytes:
    """The model with subgraph 1 (CALL_ONCE's) holding ``init_ops`` (their tensors are in the
    net's list too: each subgraph gets the whole list, unused entries are harmless)."""
    import flatbuffers

    main = S.SubGraphT()
    main.tensors, main.operators = net.tensors, net.ops
    main.inputs = np.array(net.inputs, np.int32)
    main.outputs = np.array(main_outputs, np.int32)
    main.name = "main"
    subs = [main]
    if init_ops:
        init = S.SubGraphT()
        init.tensors, init.operators = net.tensors, init_ops
        init.inputs = np.array([], np.int32)
        init.outputs = np.array([], np.int32)
        init.name = "init"
        subs.append(init)
    m = S.ModelT()
    m.version = 3
    m.subgraphs = subs
    m.buffers = net.buffers
    m.operatorCodes = []
    for c in net.codes:
        oc = S.OperatorCodeT()
        oc.builtinCode = c
        oc.deprecatedBuiltinCode = min(c, 127)
        oc.version = 1
        m.operatorCodes.append(oc)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


# Quantisation of the int8 tensors (scale, zero point): the state and what is assigned to it
# share one, as TFLite requires of a variable.
Q_IN = (1 / 64, 0)
Q_STATE = (1 / 16, -3)
Q_MUL = (1 / 20, 2)
Q_OUT = (1 / 8, -128)


def accumulator(quant: bool, seed: int = 0, init: bool = True) -> bytes:
    rng = np.random.default_rng(seed)
    net = Net(quant, seed=seed)
    x = net.input([1, 8]) if not quant else net._tensor([1, 8], np.int8, "input0", None, *Q_IN)
    if quant:
        net.inputs.append(x)
    init_ops = []
    if init:
        start = rng.uniform(-2, 2, size=(1, 8)).astype(np.float32)
        if quant:
            data = np.clip(np.round(start / Q_STATE[0]) + Q_STATE[1], -128, 127).astype(np.int8)
            c = net._tensor([1, 8], np.int8, "s_init", data, *Q_STATE)
        else:
            c = net._tensor([1, 8], np.float32, "s_init", start)
        h1 = _resource(net, "init_handle")
        init_ops = [_op(net, "VAR_HANDLE", [], [h1],
                        options("VarHandleOptions", container="", sharedName="acc")),
                    _op(net, "ASSIGN_VARIABLE", [h1, c], [])]
        net.ops.append(_op(net, "CALL_ONCE", [], [],
                           options("CallOnceOptions", initSubgraphIndex=1)))
    h = _handle(net, "acc")
    s = _activation(net, [1, 8], "s", Q_STATE)
    net.ops.append(_op(net, "READ_VARIABLE", [h], [s]))
    a = rng.uniform(0.3, 0.9, size=(1, 8)).astype(np.float32)
    ac = (net._tensor([1, 8], np.int8, "a", np.round(a * 127).astype(np.int8), 1 / 127, 0)
          if quant else net._tensor([1, 8], np.float32, "a", a))
    sa = _activation(net, [1, 8], "sa", Q_MUL)
    net.ops.append(_op(net, "MUL", [s, ac], [sa], options("MulOptions")))
    s_new = _activation(net, [1, 8], "s_new", Q_STATE)
    net.ops.append(_op(net, "ADD", [sa, x], [s_new], options("AddOptions")))
    net.ops.append(_op(net, "ASSIGN_VARIABLE", [h, s_new], []))
    w = net.weight(rng.normal(scale=0.4, size=(4, 8)))
    b = net.bias(rng.normal(scale=0.1, size=4), s_new, w)
    out = _activation(net, [1, 4], "out", Q_OUT)
    net.ops.append(_op(net, "FULLY_CONNECTED", [s_new, w, b], [out],
                       options("FullyConnectedOptions", fusedActivationFunction=1)))
    return _with_init(net, [out], init_ops)


def ring(quant: bool, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    net = Net(quant, seed=seed)
    x = net._tensor([1, 1, 4], np.int8, "input0", None, *Q_STATE) if quant else \
        net._tensor([1, 1, 4], np.float32, "input0")
    net.inputs.append(x)
    h = _handle(net, "ring")
    s = _activation(net, [1, 3, 4], "frames", Q_STATE)
    net.ops.append(_op(net, "READ_VARIABLE", [h], [s]))
    win = _activation(net, [1, 4, 4], "window", Q_STATE)
    net.ops.append(_op(net, "CONCATENATION", [s, x], [win],
                       options("ConcatenationOptions", axis=1)))
    nxt = _activation(net, [1, 3, 4], "next", Q_STATE)
    begin, end, strides = net.ints([0, 1, 0]), net.ints([1, 4, 4]), net.ints([1, 1, 1])
    net.ops.append(_op(net, "STRIDED_SLICE", [win, begin, end, strides], [nxt],
                       options("StridedSliceOptions")))
    net.ops.append(_op(net, "ASSIGN_VARIABLE", [h, nxt], []))
    flat = _activation(net, [1, 16], "flat", Q_STATE)
    net.ops.append(_op(net, "RESHAPE", [win, net.ints([1, 16])], [flat]))
    w = net.weight(rng.normal(scale=0.3, size=(3, 16)))
    b = net.bias(rng.normal(scale=0.1, size=3), flat, w)
    out = _activation(net, [1, 3], "out", Q_OUT)
    net.ops.append(_op(net, "FULLY_CONNECTED", [flat, w, b], [out],
                       options("FullyConnectedOptions")))
    return _with_init(net, [out], [])


def frames(model_quant: bool, shape: Sequence[int], n: int, seed: int = 1) -> list[np.ndarray]:
    """``n`` input frames: float ~ N(0, 1), or int8 round(40 x) clipped (any int8 value is a
    valid input whatever the model's input scale)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        f = rng.normal(size=shape).astype(np.float32)
        out.append(np.clip(np.round(f * 40), -128, 127).astype(np.int8) if model_quant else f)
    return out


def tflm_frames(model: bytes, xs: Sequence[np.ndarray], reset_at: int | None = None
                ) -> list[np.ndarray]:
    """TFLM's output for each frame, one interpreter invoked once per frame (its variables
    live between invokes); ``reset_at``: call its reset() before that frame."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    outs = []
    for k, x in enumerate(xs):
        if k == reset_at:
            it.reset()
        it.set_input(x, 0)
        it.invoke()
        outs.append(it.get_output(0).copy())
    return outs


def svdf(quant: bool, state_dtype: Any = np.int16, seed: int = 0, rank: int = 2,
         act: int = 1, int16x8: bool = False) -> bytes:
    """x [1, 16] -> SVDF (8 filters, memory 10, rank ``rank``: 8 / rank units, activation
    state [1, 80] a variable tensor) -> out. int8: int8 input, feature weights and output,
    ``state_dtype`` (int16 or int8) time weights and state, int32 bias with scale state x
    time weights, as TFLite's converter writes them. ``int16x8``: int16 input and output
    instead (a model TFLM refuses)."""
    rng = np.random.default_rng(seed)
    n_in, n_filter, n_memory = 16, 8, 10
    n_unit = n_filter // rank
    net = Net(quant, seed=seed)
    wf = rng.normal(scale=0.3, size=(n_filter, n_in))
    wt = rng.normal(scale=0.3, size=(n_filter, n_memory))
    bias = rng.normal(scale=0.2, size=n_unit)
    if not quant:
        x = net._tensor([1, n_in], np.float32, "input0")
        twf = net._tensor(wf.shape, np.float32, "weights_feature", wf.astype(np.float32))
        twt = net._tensor(wt.shape, np.float32, "weights_time", wt.astype(np.float32))
        tb = net._tensor(bias.shape, np.float32, "bias", bias.astype(np.float32))
        st = net._tensor([1, n_filter * n_memory], np.float32, "activation_state")
        out = net._tensor([1, n_unit], np.float32, "out")
    else:
        wide = np.dtype(state_dtype) == np.int16
        qmax = 32767 if wide else 127
        xt = np.int16 if int16x8 else np.int8
        x = net._tensor([1, n_in], xt, "input0", None,
                        *((1 / 4096, 0) if int16x8 else (1 / 40, 3)))
        s1 = float(np.abs(wf).max() / 127)
        twf = net._tensor(wf.shape, np.int8, "weights_feature",
                          np.round(wf / s1).astype(np.int8), s1, 0)
        s2 = float(np.abs(wt).max() / qmax)
        twt = net._tensor(wt.shape, state_dtype, "weights_time",
                          np.round(wt / s2).astype(state_dtype), s2, 0)
        sst, zst = (8 / 32767, 0) if wide else (8 / 127, 2)
        sb = float(np.float32(np.float32(sst) * np.float32(s2)))
        tb = net._tensor(bias.shape, np.int32, "bias", np.round(bias / sb).astype(np.int32),
                         sb, 0)
        st = net._tensor([1, n_filter * n_memory], state_dtype, "activation_state", None,
                         sst, zst)
        out = net._tensor([1, n_unit], xt, "out", None,
                          *((1 / 4096, 0) if int16x8 else (1 / 32, -5)))
    net.tensors[st].isVariable = True
    net.inputs.append(x)
    net.ops.append(_op(net, "SVDF", [x, twf, twt, tb, st], [out],
                       options("SVDFOptions", rank=rank, fusedActivationFunction=act)))
    return _with_init(net, [out], [])
