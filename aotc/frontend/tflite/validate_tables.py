"""The tables of the TFLite validation step (validate.py): per builtin, what TFLM's and
LiteRT's kernels require of a model (operand counts and types, options, quantisation rules),
and the form of their one-line errors."""

from __future__ import annotations

from aotc.errors import AotcError

TYPE_NAMES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string",
              6: "bool", 7: "int16", 8: "complex64", 9: "int8", 10: "float64",
              11: "complex128", 12: "uint64", 13: "resource", 14: "variant", 15: "uint32",
              16: "uint16", 17: "int4", 18: "bfloat16"}

PLACEHOLDER = 127  # BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES
# Builtins TFLM has no kernel for (LiteRT's reference kernels are the only reference): the
# highest opcode version LiteRT's reference op resolver registers; it refuses a model above.
LITERT_ONLY_MAX_VERSION = {"TILE": 2}
# Options tables whose fused activation clamps the output (TFLM's CalculateActivationRange).
CLAMPING = {"Conv2DOptions", "DepthwiseConv2DOptions", "FullyConnectedOptions",
            "Pool2DOptions", "AddOptions", "SubOptions", "MulOptions", "DivOptions",
            "TransposeConvOptions", "L2NormOptions", "Conv3DOptions"}
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
# TFLite type code -> bytes per element (int4: two per byte, counted apart).
ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1, 10: 8, 12: 8, 15: 4, 16: 2, 18: 2}
# (builtin, bias input index, weight input index, data input index)
BIASED = {"CONV_2D": (2, 1, 0), "DEPTHWISE_CONV_2D": (2, 1, 0), "FULLY_CONNECTED": (2, 1, 0),
          "TRANSPOSE_CONV": (3, 1, 2)}


_UNARY = ("SOFTMAX", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1",
          "HARD_SWISH", "LEAKY_RELU", "ELU", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT",
          "SQUARE", "SIN", "COS", "FLOOR", "CEIL", "ROUND", "SIGN", "LOG_SOFTMAX", "QUANTIZE",
          "DEQUANTIZE", "L2_NORMALIZATION", "GELU", "AVERAGE_POOL_2D", "MAX_POOL_2D",
          "L2_POOL_2D", "SQUEEZE", "LOGICAL_NOT", "ZEROS_LIKE", "CAST", "SHAPE")
_BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW",
           "FLOOR_DIV", "FLOOR_MOD", "PRELU", "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN",
           "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL", "TRANSPOSE", "GATHER", "GATHER_ND",
           "EXPAND_DIMS", "TILE", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "BATCH_MATMUL",
           "MIRROR_PAD", "ARG_MAX", "ARG_MIN", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL",
           "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "BROADCAST_TO", "CUMSUM",
           "EMBEDDING_LOOKUP", "FILL")
# builtin -> (fewest inputs, most inputs, outputs): TFLM's and LiteRT's kernels check these
# counts (NumInputs / NumOutputs); -1 (no tensor) only as an input past the fewest.
ARITY: dict[str, tuple[int, int, int | None]] = {
    **{k: (1, 1, 1) for k in _UNARY}, **{k: (2, 2, 1) for k in _BINARY},
    "CONV_2D": (2, 3, 1), "DEPTHWISE_CONV_2D": (2, 3, 1), "FULLY_CONNECTED": (2, 3, 1),
    "TRANSPOSE_CONV": (3, 4, 1), "RESHAPE": (1, 2, 1), "PADV2": (2, 3, 1), "PAD": (2, 3, 1),
    "SPACE_TO_BATCH_ND": (3, 3, 1), "BATCH_TO_SPACE_ND": (3, 3, 1),
    "STRIDED_SLICE": (4, 4, 1), "SLICE": (3, 3, 1), "SPLIT": (2, 2, None),
    "SPLIT_V": (3, 3, None), "SELECT_V2": (3, 3, 1), "SVDF": (4, 5, 1),
    "DEPTH_TO_SPACE": (1, 1, 1), "SPACE_TO_DEPTH": (1, 1, 1), "REVERSE_V2": (2, 2, 1),
    "VAR_HANDLE": (0, 0, 1), "READ_VARIABLE": (1, 1, 1), "ASSIGN_VARIABLE": (2, 2, 0),
    "CALL_ONCE": (0, 0, 0),
}
# The weight's per-channel dimension (the output channels) of the weighted builtins.
WEIGHT_AXIS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0, "TRANSPOSE_CONV": 0}
# Builtins whose inputs all have one type.
SAME_INPUTS = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE",
               "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
               "CONCATENATION", "PACK", "ADD_N", "FLOOR_DIV", "FLOOR_MOD", "POW", "PRELU",
               "LOGICAL_AND", "LOGICAL_OR"}
# int8/int16 builtins whose output has the input's scale and zero point: TFLM's kernels move
# or compare the integers (and refuse or ignore other parameters); aotc would requantise.
SAME_PARAMS = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "AVERAGE_POOL_2D", "MAX_POOL_2D", "RELU6",
               "TRANSPOSE", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "SPACE_TO_DEPTH",
               "DEPTH_TO_SPACE", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "GATHER"}
# Builtins whose outputs have the type of their data input (KIND_FROM's operand): TFLM's and
# LiteRT's kernels refuse another output type.
SAME_TYPE = {"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED",
             "CONCATENATION", "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM",
             "AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D", "RESHAPE", "SQUEEZE", "TRANSPOSE",
             "PAD", "PADV2", "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "LOGISTIC",
             "TANH", "RELU", "RELU6", "LEAKY_RELU", "HARD_SWISH", "STRIDED_SLICE", "SLICE",
             "SPLIT", "SPLIT_V", "PACK", "UNPACK", "GATHER", "EXPAND_DIMS", "TILE",
             "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "BATCH_MATMUL", "PRELU",
             "SQUARED_DIFFERENCE", "ELU", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT",
             "MIRROR_PAD", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "LOG_SOFTMAX", "SVDF"}


# Builtins whose options table is not named after them (the others: CamelCase + "Options").
OPTIONS_OF = {"AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions",
              "L2_POOL_2D": "Pool2DOptions", "L2_NORMALIZATION": "L2NormOptions",
              "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
              "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
              "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions",
              **{k: "ReducerOptions" for k in ("MEAN", "SUM", "REDUCE_PROD", "REDUCE_MAX",
                                                "REDUCE_MIN", "REDUCE_ANY", "REDUCE_ALL")}}
# Builtins whose options TFLM needs: without the table it runs on zeros (a stride, a count, a
# softmax beta, an SVDF rank of 0: a division by zero, an empty loop) where aotc's converters
# assume other defaults.
NEEDS_OPTIONS = {"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "AVERAGE_POOL_2D",
                 "MAX_POOL_2D", "L2_POOL_2D", "SVDF", "PACK", "UNPACK", "SPLIT", "SPLIT_V",
                 "SOFTMAX", "LEAKY_RELU", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH",
                 "UNIDIRECTIONAL_SEQUENCE_LSTM", "CONV_3D", "VAR_HANDLE", "CALL_ONCE"}
# (options class, field, what it counts): the count must be the operator's.
COUNTS = {"PACK": ("ValuesCount", "inputs"), "UNPACK": ("Num", "outputs"),
          "SPLIT": ("NumSplits", "outputs"), "SPLIT_V": ("NumSplits", "outputs")}


def _err(i: int, name: str, reason: str) -> AotcError:
    """The one-line error of operator ``i`` (builtin ``name``)."""
    return AotcError(f"operator {i} {name}: {reason}")
