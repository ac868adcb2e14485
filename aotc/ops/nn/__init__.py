"""Neural-network layers: convolution, pooling, normalisation, Gemm/MatMul, softmax, losses."""
