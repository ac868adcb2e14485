"""Every test of the ONNX 1.22.0 node suite through the generated C (see harness.py).

Not excluded: must compile, run and match the expected outputs (rtol 1e-3, atol 1e-7).
Excluded (aotc/data/onnx_node_exclusions.txt, one reason each): must be rejected with an
AotcError; a test that compiles is a failure either way (wrong numbers, or a pass that should
leave the list). An entry whose reason starts with ``[atol=X]`` is a reference-data precision
exception: it runs and must match at that absolute tolerance instead.
"""

from __future__ import annotations

import node_harness as harness
import pytest

from aotc.errors import AotcError

SUITE = harness.suite()
EXCLUDED = harness.exclusions()


@pytest.fixture(scope="session")
def node_data():
    return harness.data_root()


@pytest.mark.parametrize("entry", SUITE, ids=[e.name for e in SUITE])
def test_node(entry: harness.SuiteEntry, node_data, record_property) -> None:
    test_dir = node_data / entry.name
    reason = harness.exclusion_reason(entry.name, EXCLUDED)
    record_property("onnx_node_static", entry.static)
    if reason is None and not entry.static:
        reason = f"outside the static subset: {entry.reasons}"
    loose = harness.tolerance_exception(reason)
    if loose is not None:
        # Listed as not passing at ONNX's tolerance, with the reason; still run and checked at
        # the stated looser tolerance, so the numbers are right.
        record_property("onnx_node", "excluded")
        model, _, want = harness.load_case(test_dir)
        harness.compare(model, harness.run_case(entry, test_dir), want, atol=loose)
        return
    if reason is not None:
        record_property("onnx_node", "excluded")
        try:
            harness.run_case(entry, test_dir)
        except AotcError:
            return
        pytest.fail(f"excluded ({reason}) but compiled: it must raise AotcError, or leave "
                    f"exclusions.txt if it now passes")
    record_property("onnx_node", "expected-pass")
    model, _, want = harness.load_case(test_dir)
    got = harness.run_case(entry, test_dir)
    harness.compare(model, got, want)
