"""An example BYOC backend, written as a user would: only the public interface (aotc.byoc).

It hands aotc's float32 MaxPool kernels (2-D, with a fused Relu or not) and standalone Relu
kernels to the C functions in user_kernels.c; everything else stays with aotc's own kernels.

    aotc verify model.onnx --byoc examples/byoc_user_kernels/backend.py
"""

from __future__ import annotations

from pathlib import Path

from aotc.byoc import Backend, Emitted, Library, Pattern, Subgraph

HERE = Path(__file__).resolve().parent


def _maxpool_check(sub: Subgraph) -> str | None:
    x = sub.input_type(0)
    a = sub.node.attrs
    if x is None or len(x.shape) != 4:
        return "only 2-D pooling (NCHW input)"
    if any(int(d) != 1 for d in a.get("dilations") or [1, 1]):
        return "dilations are not supported"
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return f"auto_pad={a['auto_pad']} is not supported"
    if len([o for o in sub.node.outputs if o]) != 1:
        return "the Indices output is not supported"
    return None


class UserKernels(Backend):
    name = "user-kernels"
    layout = "NCHW"

    def patterns(self) -> list[Pattern]:
        return [
            Pattern("maxpool", "MaxPool", epilogue=("Relu",), dtypes=("float32",),
                    check=_maxpool_check),
            Pattern("relu", "Relu", dtypes=("float32",)),
        ]

    def libraries(self) -> list[Library]:
        return [Library("user-kernels", include_dirs=(HERE,),
                        sources=(HERE / "user_kernels.c",), cflags=("-std=c99", "-O2"))]

    def codegen(self, sub: Subgraph, symbol: str) -> Emitted:
        x, y = sub.input_type(0), sub.output_type(0)
        assert x is not None and y is not None
        if sub.op == "Relu":
            body = f"return user_relu_f32(x, y, {x.numel});"
        else:
            a = sub.node.attrs
            kh, kw = (int(k) for k in a["kernel_shape"])
            sh, sw = (int(s) for s in a.get("strides") or [1, 1])
            pads = [int(p) for p in a.get("pads") or [0, 0, 0, 0]]
            n, c, h, w = x.shape
            relu = int(bool(sub.epilogue))
            body = (f"return user_maxpool2d_f32(x, y, {n}, {c}, {h}, {w}, {kh}, {kw}, {sh}, "
                    f"{sw}, {pads[0]}, {pads[1]}, {y.shape[2]}, {y.shape[3]}, {relu});")
        source = f"static int {symbol}(const float *x, float *y)\n{{\n    {body}\n}}\n"
        return Emitted(source, includes=("user_kernels.h",), comment=f"user kernel for {sub.op}")


BACKEND = UserKernels
