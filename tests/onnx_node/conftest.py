"""Prints the node-suite tally at the end of a run: `onnx-node: N passed, M failed, K excluded`
(over the static-numeric subset; excluded = listed in exclusions.txt)."""

from __future__ import annotations


def _tally(terminalreporter):  # type: ignore[no-untyped-def]
    passed = failed = excluded = 0
    for key in ("passed", "failed", "error"):
        for rep in terminalreporter.stats.get(key, []):
            props = dict(getattr(rep, "user_properties", []))
            if "onnx_node" not in props or not props.get("onnx_node_static"):
                continue
            if getattr(rep, "when", "call") != "call" and key == "passed":
                continue
            if props["onnx_node"] == "excluded":
                excluded += 1
            elif key == "passed":
                passed += 1
            else:
                failed += 1
    return passed, failed, excluded


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    passed, failed, excluded = _tally(terminalreporter)
    if passed or failed or excluded:
        total = passed + failed + excluded
        terminalreporter.write_line(
            f"onnx-node: {passed} passed, {failed} failed, {excluded} excluded "
            f"(static-numeric subset of onnx 1.22.0: {total} tests)")
