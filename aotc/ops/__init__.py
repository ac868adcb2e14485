"""Operators, one place per op: its schema, dtype and shape rules, numpy reference and lowering
(opdef.py: OpDef and the registry), grouped in family packages: nn/, tensor/, math/, image/,
sequence/, quant/, control/. An op registers with @register; resolve() picks the version in
force for the model's opset."""

from aotc.ops.opdef import (
    ATTR_CHOICES,
    INFER_BY_RUNNING_MAX,
    REQUIRED,
    AtLeast,
    OpDef,
    all_ops,
    onnx_infer,
    register,
    resolve,
    values_known,
)

__all__ = ["ATTR_CHOICES", "INFER_BY_RUNNING_MAX", "REQUIRED", "AtLeast", "OpDef", "all_ops",
           "onnx_infer", "register", "resolve", "values_known"]
