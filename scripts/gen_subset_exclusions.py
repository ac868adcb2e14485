"""Append to aotc/data/onnx_node_exclusions.txt one line per ONNX node test outside the
static-numeric subset, with its reason in words (from the suite list's reason codes). Run once
when the suite list changes; the entries are plain lines afterwards."""

from __future__ import annotations

from aotc.verification.coverage import DATA, exclusions, suite

WORDS = {
    "dtype": "a data type aotc does not support (float8, int4/int2, float4 or string)",
    "dtype-ext-only": "float16/bfloat16/float64 data (aotc computes float32 and integers)",
    "shape-not-inferable": "an output shape that is not known at compile time",
    "data-dependent-shape-op": "an op whose output shape depends on the data",
    "subgraph-op": "control flow with subgraphs (If, Loop, Scan, SequenceMap)",
    "dynamic-declared-shape": "a dynamic declared input/output shape",
    "non-tensor-io": "sequence or optional inputs/outputs",
    "string": "string tensors",
    "non-default-domain": "an op outside the ai.onnx domain (ai.onnx.ml, training, preview)",
    "random-op": "a random op (non-deterministic output)",
}

if __name__ == "__main__":
    have = exclusions()
    lines = ["", "# Outside the static-numeric subset (research fact sheet section 4): every one "
             "must be rejected with an AotcError."]
    for e in suite():
        if e.static or e.name in have:
            continue
        codes = []
        for r in e.reasons.split(","):
            w = WORDS[r.split(":")[0]]
            if w not in codes:
                codes.append(w)
        lines.append(f"{e.name} outside the static subset: {'; '.join(codes)}")
    path = DATA / "onnx_node_exclusions.txt"
    path.write_text(path.read_text().rstrip("\n") + "\n" + "\n".join(lines) + "\n")
    print(f"appended {len(lines) - 2} entries to {path}")
