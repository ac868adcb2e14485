"""What a .tflite file contains: its builtins (with counts), the tensor types of its
activations and of its constants, its inputs and outputs, and its size.

    python3 scripts/tflite_ops.py MODEL.tflite [MODEL2.tflite ...] [--json]

Reads the flatbuffer with TensorFlow Lite's schema (ai_edge_litert.schema_py_generated);
nothing is run. Useful before compiling a model to see which builtins and types it needs;
custom operators are listed as CUSTOM:<name>.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ai_edge_litert import schema_py_generated as S

_BUILTIN = {v: k for k, v in vars(S.BuiltinOperator).items() if not k.startswith("_")}
_TYPE = {v: k for k, v in vars(S.TensorType).items() if not k.startswith("_")}


def _opcode_name(code: Any) -> str:
    # The deprecated int8 field holds codes < 127; the int32 field holds every code.
    num = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
    name = _BUILTIN.get(num, f"BUILTIN_{num}")
    if name == "CUSTOM":
        custom = code.customCode
        name = "CUSTOM:" + (custom.decode() if isinstance(custom, bytes) else str(custom))
    return name


def _io(model: Any, sg: Any, idx: Any) -> list[dict[str, Any]]:
    out = []
    for i in idx if idx is not None else []:
        t = sg.tensors[i]
        q = t.quantization
        entry: dict[str, Any] = {"name": t.name.decode() if isinstance(t.name, bytes) else t.name,
                                 "shape": [int(d) for d in (t.shape if t.shape is not None
                                                            else [])],
                                 "type": _TYPE.get(t.type, str(t.type))}
        if q is not None and q.scale is not None and len(q.scale):
            entry["scale"] = float(q.scale[0])
            entry["zero_point"] = int(q.zeroPoint[0])
        out.append(entry)
    return out


def describe(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    model = S.ModelT.InitFromPackedBuf(data, 0)
    ops: Counter[str] = Counter()
    act: Counter[str] = Counter()
    const: Counter[str] = Counter()
    for sg in model.subgraphs:
        for op in sg.operators or []:
            ops[_opcode_name(model.operatorCodes[op.opcodeIndex])] += 1
        for t in sg.tensors or []:
            buf = model.buffers[t.buffer] if t.buffer < len(model.buffers) else None
            has_data = buf is not None and ((buf.data is not None and len(buf.data))
                                            or (buf.size or 0) > 0)
            (const if has_data else act)[_TYPE.get(t.type, str(t.type))] += 1
    sg0 = model.subgraphs[0]
    return {
        "file": str(path),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "subgraphs": len(model.subgraphs),
        "builtins": dict(sorted(ops.items())),
        "activation_types": dict(sorted(act.items())),
        "constant_types": dict(sorted(const.items())),
        "inputs": _io(model, sg0, sg0.inputs),
        "outputs": _io(model, sg0, sg0.outputs),
    }


def _print(d: dict[str, Any]) -> None:
    print(f"{d['file']}: {d['bytes']} bytes, sha256 {d['sha256']}, {d['subgraphs']} subgraph(s)")
    print("  builtins:  " + ", ".join(f"{k} x{v}" for k, v in d["builtins"].items()))
    print("  activations: " + ", ".join(f"{k} x{v}" for k, v in d["activation_types"].items()))
    print("  constants:   " + ", ".join(f"{k} x{v}" for k, v in d["constant_types"].items()))
    for kind in ("inputs", "outputs"):
        for t in d[kind]:
            q = f" q=({t['scale']:.6g}, {t['zero_point']})" if "scale" in t else ""
            print(f"  {kind[:-1]:6s} {t['name']}: {t['type']} {t['shape']}{q}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--json", action="store_true", help="one JSON list on stdout")
    args = ap.parse_args(argv)
    found = []
    for p in args.models:
        try:
            found.append(describe(p))
        except (OSError, ValueError, IndexError, TypeError, AttributeError) as e:
            print(f"{p}: cannot read as a .tflite file ({type(e).__name__}: {e})",
                  file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(found, indent=1))
    else:
        for d in found:
            _print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
