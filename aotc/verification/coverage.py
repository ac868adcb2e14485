"""Operator coverage: the registry joined with the ONNX backend node-test suite (onnx 1.22.0).

``data/onnx_node_suite-1.22.0.tsv`` lists every node test with its op type and whether it is in the
static-numeric subset (tensor-only I/O, numeric dtypes, static shapes once small parameter inputs
are frozen; see the research fact sheet; plus 23 tests it leaves out only for their If/Loop/Scan,
which aotc compiles: static 1, reason codes kept). ``data/onnx_node_exclusions.txt`` gives, for each
test of the subset that is not expected to pass, a one-line reason; tests/onnx_node runs the whole
suite through the generated C in CI and fails if an excluded test compiles or a listed one does not
pass. ``aotc ops`` and docs/operators.md (scripts/gen_operators_doc.py) render the same table from
these two files and the registry. """

from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import dataclass, field

from aotc.paths import package_data_dir

ONNX_VERSION = "1.22.0"


@dataclass(frozen=True)
class SuiteEntry:
    name: str
    op_type: str
    opset: int
    static: bool
    reasons: str  # why a test is outside the static subset ("-" when inside)


def suite() -> list[SuiteEntry]:
    table = package_data_dir() / f"onnx_node_suite-{ONNX_VERSION}.tsv"
    rows = table.read_text().splitlines()[1:]
    out = []
    for r in rows:
        name, op, opset, static, reasons, _ort = r.split("\t")
        out.append(SuiteEntry(name, op, int(opset), static == "1", reasons))
    return out


def exclusions() -> dict[str, str]:
    """test name (or fnmatch pattern) -> reason."""
    out: dict[str, str] = {}
    for line in (package_data_dir() / "onnx_node_exclusions.txt").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        if not reason.strip():
            raise ValueError(f"onnx_node_exclusions.txt: {name} has no reason")
        out[name] = reason.strip()
    return out


def exclusion_reason(name: str, excl: dict[str, str]) -> str | None:
    if name in excl:
        return excl[name]
    for pat, reason in excl.items():
        if any(ch in pat for ch in "*?[") and fnmatch.fnmatchcase(name, pat):
            return reason
    return None


@dataclass
class OpRow:
    name: str
    domain: str
    since: str
    kind: str
    dtypes: str
    passed: int = 0
    total: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    tflite: str = ""  # the TFLite builtins imported as this op

    @property
    def label(self) -> str:
        return f"{self.domain}.{self.name}" if self.domain else self.name


def op_table() -> list[OpRow]:
    """One row per op: registered ops, plus ops of the static subset aotc does not implement."""
    from aotc.ops import all_ops

    rows: dict[tuple[str, str], OpRow] = {}
    for (domain, name), versions in sorted(all_ops().items()):
        if domain == "aotc":  # internal kernels (QLut, Copy): not ONNX ops
            continue
        dts: list[str] = []
        for v in versions:
            dts += [d for d in v.dtypes if d not in dts]
        rows[(domain, name)] = OpRow(name, domain, ",".join(str(v.since) for v in versions),
                                     versions[-1].kind, ", ".join(dts))
    excl = exclusions()
    for e in suite():
        if not e.static:
            continue
        row = rows.get(("", e.op_type))
        if row is None:
            row = rows[("", e.op_type)] = OpRow(e.op_type, "", "-", "-", "not supported")
        row.total += 1
        reason = exclusion_reason(e.name, excl)
        if reason is None:
            row.passed += 1
        else:
            row.reasons[reason] += 1
    for label, builtins in tflite_builtins().items():
        domain, _, name = label.rpartition(".")
        if (domain, name) in rows:
            rows[(domain, name)].tflite = ", ".join(builtins)
    return sorted(rows.values(), key=lambda r: (r.domain, r.name.lower()))


def tflite_builtins() -> dict[str, list[str]]:
    """ONNX op label -> the TFLite builtins the TFLite frontend imports as it."""
    from aotc.frontend.tflite.builtins import ONNX_OPS

    out: dict[str, list[str]] = {}
    for builtin, labels in sorted(ONNX_OPS.items()):
        for label in labels:
            out.setdefault(label, []).append(builtin)
    return out


def _builtins() -> list[str]:
    from aotc.frontend.tflite.builtins import CONVERTERS

    return sorted(CONVERTERS)


def totals(rows: list[OpRow]) -> tuple[int, int, int]:
    """(static tests passed, static tests, ops registered)."""
    return (sum(r.passed for r in rows), sum(r.total for r in rows),
            sum(1 for r in rows if r.since != "-"))


def _reasons(r: OpRow) -> str:
    return "; ".join(f"{reason} ({n})" for reason, n in r.reasons.most_common())


def render_text() -> str:
    rows = op_table()
    out = [f"{'op':<34} {'since':<12} {'kind':<12} {'node tests':>10}  dtypes"]
    for r in rows:
        tests = f"{r.passed}/{r.total}" if r.total else "-"
        line = f"{r.label:<34} {r.since:<12} {r.kind:<12} {tests:>10}  {r.dtypes}"
        if r.tflite:
            line += f"\n{'':<34} TFLite: {r.tflite}"
        if r.reasons:
            line += f"\n{'':<34} not passing: {_reasons(r)}"
        out.append(line)
    passed, total, nops = totals(rows)
    out.append(f"{nops} ops; ONNX {ONNX_VERSION} node tests (static-numeric subset): "
               f"{passed}/{total} pass through the generated C")
    out.append(f"TFLite builtins ({len(_builtins())}): {', '.join(_builtins())}; any other is "
               f"rejected by name")
    return "\n".join(out)


def render_markdown() -> str:
    rows = op_table()
    passed, total, nops = totals(rows)
    out = ["# Operators", "",
           "Generated by `scripts/gen_operators_doc.py` from the op registry and the ONNX "
           f"{ONNX_VERSION} node-test results; `aotc ops` prints the same table.", "",
           f"**{nops} ops. Node tests of the static-numeric subset: {passed} of {total} pass** "
           "through aotc's generated C (compiled with the memory plan and fusion on, run through "
           "cffi, compared at rtol 1e-3, atol 1e-7). Every test not passing is listed with a "
           "reason in `aotc/data/onnx_node_exclusions.txt` and is rejected at compile time with "
           "an error naming the reason, except entries marked `[atol=X]`: tests whose reference "
           "data is less precise than ONNX's tolerance, run and checked at that tolerance. The "
           "407 tests outside the subset are listed there too, each with its reason.", "",
           "Kinds: *elementwise* ops fuse as epilogues; *anchor* ops (Conv, Gemm, MatMul, pools) "
           "take a fused epilogue; *view* ops cost no copy; *kernel* ops are standalone.", "",
           f"TFLite: the {len(_builtins())} TFLite builtins `aotc compile model.tflite` imports "
           "as the op (float32, and int8 through the integer kernels; "
           "[docs/frontends.md](frontends.md)); any other builtin is rejected by name: "
           f"{', '.join(_builtins())}.", "",
           "| op | since | kind | dtypes | node tests | not passing (reason, count) | TFLite |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        tests = f"{r.passed}/{r.total}" if r.total else "–"
        out.append(f"| {r.label} | {r.since} | {r.kind} | {r.dtypes} | {tests} | "
                   f"{_reasons(r) or ''} | {r.tflite} |")
    out += ["", "## Defined results", "",
            "Whatever the inputs, the generated C has no undefined behaviour and no access "
            "outside a tensor (`scripts/sanitize.sh` runs the op tests with the host bundles "
            "built with ASan and UBSan). Where ONNX or C leaves a result undefined, aotc defines "
            "it, on the host and on every board:", "",
            "- Integer add, subtract, multiply and negate (Add, Sub, Mul, Neg, Sum, CumSum, "
            "ReduceSum/Prod/SumSquare, Einsum, MatMulInteger, ...) wrap around modulo 2^N, "
            "as onnxruntime's elementwise ops and numpy do: the C computes in the unsigned type "
            "and converts back. Abs of the minimum value is the minimum value (onnxruntime). "
            "onnxruntime 1.32's integer ReduceSum/ReduceProd/ReduceSumSquare do not wrap "
            "(ReduceSum of [INT_MAX, 1] gives INT_MAX there); aotc follows numpy's np.sum and "
            "np.prod in the dtype, which do.",
            "- Integer division and remainder by zero give 0 (numpy; onnxruntime refuses the "
            "run); INT_MIN / -1 is INT_MIN (numpy; onnxruntime dies of SIGFPE on x86) and "
            "INT_MIN % -1 is 0 (both).",
            "- float -> integer conversions saturate: NaN gives 0, values beyond the type give "
            "its minimum or maximum, the rest truncate toward zero (onnxruntime gives whatever "
            "the CPU's conversion instruction gives; x86 makes every int32 overflow INT_MIN). "
            "This covers Cast, Round/Floor/Ceil + Cast, and integer Pow with a float exponent.",
            "- Run-time indices never address memory outside a tensor; the ops below say what "
            "they give instead.", "",
            "| op | defined result |", "|---|---|"]
    out += [f"| {label} | {text} |" for label, text in defined_notes()]
    return "\n".join(out) + "\n"


def defined_notes() -> list[tuple[str, str]]:
    """(op label, OpDef.defined) for every op that defines a result ONNX leaves open."""
    from aotc.ops import all_ops

    notes = []
    for (domain, name), versions in sorted(all_ops().items(), key=lambda kv: kv[0][1].lower()):
        text = next((v.defined for v in reversed(versions) if v.defined), "")
        if text and domain != "aotc":
            notes.append((f"{domain}.{name}" if domain else name, text))
    return notes
