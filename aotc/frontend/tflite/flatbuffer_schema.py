"""The part of TensorFlow Lite's schema (schema.fbs, as the ``tflite`` package's generated
accessors read it) that flatbuffer.py verifies: every table a .tflite file can hold, each as its
fields in vtable order, and the member tables of each union in type-code order.

Field kinds: ``1`` ``2`` ``4`` ``8`` a scalar of that many bytes; ``str`` a string; ``[n]`` a
vector of n-byte scalars; ``[str]`` a vector of strings; ``Name`` a table; ``[Name]`` a vector of
tables; ``<Union>`` a union's value (its type code is the field before it); ``-`` a deprecated
field (not verified). Fields are named in the tables whose names the errors use; the fields of
an options table are "field k". tests/frontend/test_tflite_flatbuffer.py checks these tables
against the ``tflite`` package's accessors.
"""

from __future__ import annotations

_CORE = {
    "Model": (
        "version:4 operator_codes:[OperatorCode] subgraphs:[SubGraph] description:str "
        "buffers:[Buffer] metadata_buffer:[4] metadata:[Metadata] signature_defs:[SignatureDef]"
    ),
    "SubGraph": (
        "tensors:[Tensor] inputs:[4] outputs:[4] operators:[Operator] name:str "
        "debug_metadata_index:4"
    ),
    "Tensor": (
        "shape:[4] type:1 buffer:4 name:str quantization:QuantizationParameters is_variable:1 "
        "sparsity:SparsityParameters shape_signature:[4] has_rank:1 "
        "variant_tensors:[VariantSubType]"
    ),
    "Operator": (
        "opcode_index:4 inputs:[4] outputs:[4] builtin_options_type:1 "
        "builtin_options:<BuiltinOptions> custom_options:[1] custom_options_format:1 "
        "mutating_variable_inputs:[1] intermediates:[4] large_custom_options_offset:8 "
        "large_custom_options_size:8 builtin_options2_type:1 builtin_options2:<BuiltinOptions2> "
        "debug_metadata_index:4"
    ),
    "OperatorCode": "deprecated_builtin_code:1 custom_code:str version:4 builtin_code:4",
    "Buffer": "data:[1] offset:8 size:8",
    "Metadata": "name:str buffer:4",
    "SignatureDef": "inputs:[TensorMap] outputs:[TensorMap] signature_key:str -:- subgraph_index:4",
    "TensorMap": "name:str tensor_index:4",
    "QuantizationParameters": (
        "min:[4] max:[4] scale:[4] zero_point:[8] details_type:1 details:<QuantizationDetails> "
        "quantized_dimension:4"
    ),
    "CustomQuantization": "custom:[1]",
    "SparsityParameters": "traversal_order:[4] block_map:[4] dim_metadata:[DimensionMetadata]",
    "DimensionMetadata": (
        "format:1 dense_size:4 array_segments_type:1 array_segments:<SparseIndexVector> "
        "array_indices_type:1 array_indices:<SparseIndexVector>"
    ),
    "Int32Vector": "values:[4]",
    "Uint16Vector": "values:[2]",
    "Uint8Vector": "values:[1]",
    "VariantSubType": "shape:[4] type:1 has_rank:1",
}
# The options tables with fields (every other union member has none).
_OPTIONS = {
    "Conv2DOptions": "1 4 4 1 4 4 1",
    "DepthwiseConv2DOptions": "1 4 4 4 1 4 4",
    "ConcatEmbeddingsOptions": "4 [4] [4]",
    "LSHProjectionOptions": "1",
    "Pool2DOptions": "1 4 4 4 4 1",
    "SVDFOptions": "4 1 1",
    "RNNOptions": "1 1",
    "FullyConnectedOptions": "1 1 1 1 1",
    "SoftmaxOptions": "4",
    "ConcatenationOptions": "4 1",
    "AddOptions": "1 1",
    "L2NormOptions": "1",
    "LocalResponseNormalizationOptions": "4 4 4 4",
    "LSTMOptions": "1 4 4 1 1",
    "ResizeBilinearOptions": "- - 1 1",
    "CallOptions": "4",
    "ReshapeOptions": "[4]",
    "SkipGramOptions": "4 4 1",
    "SpaceToDepthOptions": "4",
    "EmbeddingLookupSparseOptions": "1",
    "MulOptions": "1",
    "GatherOptions": "4 4",
    "ReducerOptions": "1",
    "SubOptions": "1 1",
    "DivOptions": "1",
    "SqueezeOptions": "[4]",
    "SequenceRNNOptions": "1 1 1",
    "StridedSliceOptions": "4 4 4 4 4 1",
    "SplitOptions": "4",
    "CastOptions": "1 1",
    "ArgMaxOptions": "1",
    "TransposeConvOptions": "1 4 4 1 1",
    "SparseToDenseOptions": "1",
    "ShapeOptions": "1",
    "ArgMinOptions": "1",
    "FakeQuantOptions": "4 4 4 1",
    "PackOptions": "4 4",
    "OneHotOptions": "4",
    "UnpackOptions": "4 4",
    "BidirectionalSequenceLSTMOptions": "1 4 4 1 1 1",
    "BidirectionalSequenceRNNOptions": "1 1 1 1",
    "UnidirectionalSequenceLSTMOptions": "1 4 4 1 1 1",
    "ResizeNearestNeighborOptions": "1 1",
    "LeakyReluOptions": "4",
    "MirrorPadOptions": "1",
    "SplitVOptions": "4",
    "UniqueOptions": "1",
    "ReverseSequenceOptions": "4 4",
    "IfOptions": "4 4",
    "WhileOptions": "4 4",
    "DepthToSpaceOptions": "4",
    "BatchMatMulOptions": "1 1 1",
    "CumsumOptions": "1 1",
    "CallOnceOptions": "4",
    "Conv3DOptions": "1 4 4 4 1 4 4 4",
    "HashtableOptions": "4 1 1",
    "VarHandleOptions": "str str",
    "RandomOptions": "8 8",
    "BucketizeOptions": "[4]",
    "GeluOptions": "1",
    "StablehloConcatenateOptions": "8",
    "StablehloBroadcastInDimOptions": "[8]",
    "StablehloSliceOptions": "[8] [8] [8]",
    "StablehloConvolutionOptions": "[8] [8] [8] [8] [1] 8 8 [8] 8 8 [8] 8 8 [8] 8 8 [4]",
    "StablehloCustomCallOptions": "str 1 str 4 [4] [1]",
    "StablehloReduceOptions": "[8] 4",
    "StablehloScatterOptions": "1 [8] [8] [8] 8 1 4",
    "StablehloCompareOptions": "4 4",
    "StablehloDynamicSliceOptions": "[8]",
    "StablehloPadOptions": "[8] [8] [8]",
    "StablehloIotaOptions": "8",
    "StablehloDotGeneralOptions": "[8] [8] [8] [8] [4]",
    "StablehloReduceWindowOptions": "[8] [8] [8] [8] [8] 4",
    "StablehloSortOptions": "8 1 4",
    "StablehloWhileOptions": "4 4",
    "StablehloGatherOptions": "[8] [8] [8] 8 [8] 1",
    "StablehloTransposeOptions": "[8]",
    "StablehloRngBitGeneratorOptions": "1",
    "ReduceWindowOptions": "4",
    "StableHLOCompositeOptions": "str 4 [1] 1 4",
}
UNIONS_TEXT = {
    "BuiltinOptions": (
        "Conv2DOptions DepthwiseConv2DOptions ConcatEmbeddingsOptions LSHProjectionOptions "
        "Pool2DOptions SVDFOptions RNNOptions FullyConnectedOptions SoftmaxOptions "
        "ConcatenationOptions AddOptions L2NormOptions LocalResponseNormalizationOptions "
        "LSTMOptions ResizeBilinearOptions CallOptions ReshapeOptions SkipGramOptions "
        "SpaceToDepthOptions EmbeddingLookupSparseOptions MulOptions PadOptions GatherOptions "
        "BatchToSpaceNDOptions SpaceToBatchNDOptions TransposeOptions ReducerOptions SubOptions "
        "DivOptions SqueezeOptions SequenceRNNOptions StridedSliceOptions ExpOptions TopKV2Options "
        "SplitOptions LogSoftmaxOptions CastOptions DequantizeOptions MaximumMinimumOptions "
        "ArgMaxOptions LessOptions NegOptions PadV2Options GreaterOptions GreaterEqualOptions "
        "LessEqualOptions SelectOptions SliceOptions TransposeConvOptions SparseToDenseOptions "
        "TileOptions ExpandDimsOptions EqualOptions NotEqualOptions ShapeOptions PowOptions "
        "ArgMinOptions FakeQuantOptions PackOptions LogicalOrOptions OneHotOptions "
        "LogicalAndOptions LogicalNotOptions UnpackOptions FloorDivOptions SquareOptions "
        "ZerosLikeOptions FillOptions BidirectionalSequenceLSTMOptions "
        "BidirectionalSequenceRNNOptions UnidirectionalSequenceLSTMOptions FloorModOptions "
        "RangeOptions ResizeNearestNeighborOptions LeakyReluOptions SquaredDifferenceOptions "
        "MirrorPadOptions AbsOptions SplitVOptions UniqueOptions ReverseV2Options AddNOptions "
        "GatherNdOptions CosOptions WhereOptions RankOptions ReverseSequenceOptions "
        "MatrixDiagOptions QuantizeOptions MatrixSetDiagOptions HardSwishOptions IfOptions "
        "WhileOptions DepthToSpaceOptions NonMaxSuppressionV4Options NonMaxSuppressionV5Options "
        "ScatterNdOptions SelectV2Options DensifyOptions SegmentSumOptions BatchMatMulOptions "
        "CumsumOptions CallOnceOptions BroadcastToOptions Rfft2dOptions Conv3DOptions "
        "HashtableOptions HashtableFindOptions HashtableImportOptions HashtableSizeOptions "
        "VarHandleOptions ReadVariableOptions AssignVariableOptions RandomOptions BucketizeOptions "
        "GeluOptions DynamicUpdateSliceOptions UnsortedSegmentProdOptions "
        "UnsortedSegmentMaxOptions UnsortedSegmentMinOptions UnsortedSegmentSumOptions "
        "ATan2Options SignOptions BitcastOptions BitwiseXorOptions RightShiftOptions"
    ),
    "BuiltinOptions2": (
        "StablehloConcatenateOptions StablehloBroadcastInDimOptions StablehloSliceOptions "
        "StablehloConvolutionOptions StablehloCustomCallOptions StablehloReduceOptions "
        "StablehloScatterOptions StablehloCompareOptions StablehloDynamicSliceOptions "
        "StablehloPadOptions StablehloIotaOptions StablehloDotGeneralOptions "
        "StablehloReduceWindowOptions StablehloSortOptions StablehloWhileOptions "
        "StablehloGatherOptions StablehloTransposeOptions DilateOptions "
        "StablehloRngBitGeneratorOptions ReduceWindowOptions StableHLOCompositeOptions "
        "StablehloShiftLeftOptions"
    ),
    "QuantizationDetails": (
        "CustomQuantization"
    ),
    "SparseIndexVector": (
        "Int32Vector Uint16Vector Uint8Vector"
    ),
}


def _fields(text: str, named: bool) -> tuple[tuple[str, str], ...]:
    out = []
    for k, item in enumerate(text.split()):
        name, _, kind = item.rpartition(":") if named else ("", "", item)
        out.append((name.replace("_", " ") if named else f"field {k}", kind))
    return tuple(out)


# Table name -> ((field name, kind), ...); union name -> member table names by type code
# (code 0, NONE, is "").
TABLES = {name: _fields(text, True) for name, text in _CORE.items()}
TABLES.update({name: _fields(text, False) for name, text in _OPTIONS.items()})
UNIONS = {name: ("", *text.split()) for name, text in UNIONS_TEXT.items()}
TABLES.update({name: () for members in UNIONS.values() for name in members
               if name and name not in TABLES})
