"""docs/operators.md and `aotc ops` are generated from the registry and the node-suite files;
the exclusion list names real tests, each with a reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aotc.verification import coverage

REPO = Path(__file__).resolve().parents[2]


def test_operators_doc_is_current():
    doc = (REPO / "docs" / "operators.md").read_text()
    assert doc == coverage.render_markdown(), "run: python scripts/gen_operators_doc.py"


def test_aotc_ops_prints_the_same_table():
    out = subprocess.run([sys.executable, "-m", "aotc", "ops"], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == coverage.render_text().strip()
    passed, total, _ = coverage.totals(coverage.op_table())
    assert f"{passed}/{total} pass" in out


def test_exclusions_name_real_tests_with_reasons():
    names = {e.name for e in coverage.suite()}
    for pattern, reason in coverage.exclusions().items():
        assert any(coverage.exclusion_reason(n, {pattern: reason}) for n in names), pattern
        assert len(reason) > 10 and "\n" not in reason


def test_suite_counts_match_the_fact_sheet():
    entries = coverage.suite()
    assert len(entries) == 1765
    assert sum(e.static and e.reasons == "-" for e in entries) == 1358
    # Tests the fact sheet leaves out only for control flow (reason subgraph-op, with a shape it
    # could not infer through the subgraph) that aotc compiles: docs/control-flow.md.
    joined = [e for e in entries if e.static and e.reasons != "-"]
    assert len(joined) == 23
    assert all("subgraph-op" in e.reasons for e in joined)


def test_every_test_outside_the_subset_is_listed():
    excl = coverage.exclusions()
    missing = [e.name for e in coverage.suite()
               if not e.static and coverage.exclusion_reason(e.name, excl) is None]
    assert not missing, missing[:5]
