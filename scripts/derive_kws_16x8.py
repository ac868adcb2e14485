"""How tests/fixtures/tflite_zoo/kws_ds_cnn_16x8.tflite was made (not run by the tests).

The MLPerf Tiny keyword-spotting DS-CNN (mlcommons/tiny at 1afd2c9, Apache-2.0: its float
SavedModel ``benchmark/training/keyword_spotting/trained_models/kws_ref_model``) converted by
TensorFlow's own converter in its 16x8 mode (int16 activations, int8 weights, int64 biases;
int16 input and output), calibrated on the benchmark's 4 reference inputs and 60 frames made
from them (scaled and with noise, seeded). With tensorflow-cpu 2.21.0 and tf-keras 2.21.0
(``TF_USE_LEGACY_KERAS=1``: the SavedModel is a Keras 2 one) it reproduces the fixture byte for
byte (sha256 in tests/fixtures/tflite_zoo/zoo.json).

    TF_USE_LEGACY_KERAS=1 python scripts/derive_kws_16x8.py SAVEDMODEL_DIR VECTORS.npz OUT.tflite

VECTORS.npz: an ``input`` array of 4 frames of shape (1, 49, 10, 1) (the models collection's
``vectors/kws_ref_model_float.npz``).
"""

from __future__ import annotations

import sys

import numpy as np


def main(saved_model: str, vectors: str, out: str) -> None:
    import tensorflow as tf

    x = np.load(vectors)["input"].reshape(4, 1, 49, 10, 1)
    rng = np.random.default_rng(0)

    def representative():
        for k in range(4):
            yield [x[k]]
        for k in range(60):
            frame = x[k % 4] * rng.uniform(0.5, 1.5) + rng.normal(0, 2, x[k % 4].shape)
            yield [frame.astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_saved_model(saved_model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [
        tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    conv.inference_input_type = tf.int16
    conv.inference_output_type = tf.int16
    data = conv.convert()
    with open(out, "wb") as f:
        f.write(data)
    print(f"wrote {out} ({len(data)} bytes)")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
