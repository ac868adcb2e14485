"""An operator's builtin options: read as the class its builtin takes (``_opts``, the converters'
reader: a table of another type is refused), or as its union tag says (``options_table``, the
validation's)."""

from __future__ import annotations

from typing import Any

from aotc.errors import AotcError


def _option_classes() -> dict[int, str]:
    import tflite

    return {v: k for k, v in vars(tflite.BuiltinOptions).items()
            if not k.startswith("_") and isinstance(v, int)}


def options_table(op: Any) -> tuple[str, Any] | None:
    """(class name, table) of an operator's builtin options, as its union tag says."""
    import tflite

    t = op.BuiltinOptions()
    name = _option_classes().get(op.BuiltinOptionsType())
    if t is None or name is None or not hasattr(tflite, name):
        return None
    o = getattr(tflite, name)()
    o.Init(t.Bytes, t.Pos)
    return name, o


def _opts(op: Any, cls: str) -> Any:
    import tflite

    t = op.BuiltinOptions()
    if t is None:
        return None
    tag = op.BuiltinOptionsType()
    if tag != getattr(tflite.BuiltinOptions, cls):
        raise AotcError(f"builtin options of type {_option_classes().get(tag, tag)}; the "
                        f"operator takes {cls}")
    o = getattr(tflite, cls)()
    o.Init(t.Bytes, t.Pos)
    return o
