"""Print loop-IR kernels as C99.

The whole C vocabulary is the tables below (tinygrad's ``code_for_op`` idea): a new dialect is
a subclass overriding entries. Nothing else in aotc spells C expressions.

The printer also keeps the C free of undefined behaviour where the loop IR's meaning is
defined (docs/operators.md, "Defined results"): integer arithmetic on values that come from
tensor data wraps around (computed in the unsigned type), integer division and remainder are
guarded, shifts by the width or more give 0, and float-to-integer conversions saturate. Index
arithmetic on loop counters (bounded at compile time) stays plain C.
"""

from __future__ import annotations

import math

import numpy as np

from aotc.dtypes import DType
from aotc.loops.loop_ir import (
    Assign,
    Bin,
    Block,
    Buffer,
    Call,
    Cast,
    Const,
    Decl,
    DeclArray,
    Expr,
    If,
    Kernel,
    Load,
    Loop,
    Outline,
    Select,
    Stmt,
    Store,
    Un,
    Var,
    children,
    used_buffers,
)

BINARY = {
    "add": "({a} + {b})",
    "sub": "({a} - {b})",
    "mul": "({a} * {b})",
    "div": "({a} / {b})",
    "mod": "({a} % {b})",
    "lt": "({a} < {b})",
    "le": "({a} <= {b})",
    "gt": "({a} > {b})",
    "ge": "({a} >= {b})",
    "eq": "({a} == {b})",
    "ne": "({a} != {b})",
    "land": "({a} && {b})",
    "lor": "({a} || {b})",
    "band": "({a} & {b})",
    "bor": "({a} | {b})",
    "bxor": "({a} ^ {b})",
    "shl": "({a} << {b})",
    "shr": "({a} >> {b})",
}
# min/max differ by type: fminf/fmaxf on float (no double evaluation), a macro on integers.
FLOAT_BINARY = {"min": "aotc_minf({a}, {b})", "max": "aotc_maxf({a}, {b})",
                # against a constant bound that is not NaN: one unordered compare
                "kmin": "aotc_minfk({a}, {b})", "kmax": "aotc_maxfk({a}, {b})",
                "pow": "powf({a}, {b})",
                "fmod": "fmodf({a}, {b})"}
INT_BINARY = {"min": "AOTC_MIN({a}, {b})", "max": "AOTC_MAX({a}, {b})"}

UNARY = {"neg": "(-{a})", "lnot": "(!{a})", "bnot": "(~{a})"}

# float32 operands computed in double, as TFLite's SSD box decoding casts them
# (aotc/ops/image/detection.py): helpers model.c.j2 defines in the bundles whose kernels call
# them. f64_box_center(v, s, a, c) = (float)(v / s * a + c), f64_box_half(v, s, a) =
# (float)(0.5 * exp(v / s) * a), each operand cast to double first.
F64_CALLS = {"f64_box_center": "aotc_f64_box_center", "f64_box_half": "aotc_f64_box_half"}
# Math functions by family; the float32 spelling is the C99 <math.h> float variant.
FLOAT_CALLS = {
    "exp": "expf", "log": "logf", "sqrt": "sqrtf", "tanh": "tanhf", "abs": "fabsf",
    "erf": "erff", "floor": "floorf", "ceil": "ceilf", "sin": "sinf", "cos": "cosf",
    "tan": "tanf", "asin": "asinf", "acos": "acosf", "atan": "atanf", "sinh": "sinhf",
    "cosh": "coshf", "asinh": "asinhf", "acosh": "acoshf", "atanh": "atanhf",
    "rint": "nearbyintf", "log1p": "log1pf", "expm1": "expm1f",
    "bits": "aotc_f32_bits",  # BitCast (runtime_c/aotc_runtime.h)
    "isnan": "isnan", "isinf": "isinf",  # C99 <math.h> classification macros
    **F64_CALLS,
}
# A float16 weight's bits as float32 (--keep-float16-weights, aotc/lower/half.py): a helper
# model.c.j2 defines in the bundles whose kernels call it.
HALF_CALLS = {"f16_to_f32": "aotc_f16_f32"}
INT_CALLS = {"abs": "AOTC_ABS", "float_from_bits": "aotc_bits_f32",  # BitCast
             "ipow": "aotc_ipow",  # Pow on integers (runtime_c/aotc_runtime.h)
             # fixed-point requantisation primitives (runtime_c/aotc_runtime.h)
             "q_srdhm": "aotc_q_srdhm", "q_rdbpot": "aotc_q_rdbpot", "q_mbqm": "aotc_q_mbqm",
             "q_requant": "aotc_q_requant", "q_requant_r": "aotc_q_requant_r",
             "q_requant_h": "aotc_q_requant_h", "q_requant_hd": "aotc_q_requant_hd",
             "q_sat_shl": "aotc_q_sat_shl", "q_softmax_scale": "aotc_q_softmax_scale",
             "q_clz": "aotc_q_clz", "q_one_over_one_plus_x": "aotc_q_one_over_one_plus_x",
             **HALF_CALLS}
# Arm C Language Extensions intrinsics (<arm_acle.h>, __ARM_FEATURE_DSP), on int32 words of
# packed lanes; the lowering emits them only for targets with the "dsp" feature (loops/dsp.py).
# sxtb16_ror8 is SXTB16 with its rotate operand, which arm_acle.h does not offer (CMSIS's
# __SXTB16_RORn): an inline-asm helper in model.c.j2.
# ld_pair16 loads two adjacent int16 (its argument a Load printed as its address) as one
# word of two lanes: a plain, possibly unaligned, 32-bit load (memcpy) on these cores;
# ld_word8 the same for four adjacent int8 (the matmuls' quads, loops/dsp.py). pkhbt / pkhtb
# (the low / high lanes of two words in one, loops/dsp.py halves) are inline-asm helpers too
# (arm_acle.h has no PKHBT, PKHTB; gcc does not combine the C masks and shifts into them).
# st_pair16 stores a word of two int16 lanes at an int16 address (one STR; a Store whose
# value is that call, printed as the call with the store's address first, as VECTOR_STORES).
ACLE_CALLS = {"sxtb16": "__sxtb16", "smlad": "__smlad", "smuad": "__smuad",
              "smlabb": "__smlabb", "smlabt": "__smlabt",  # acc + x's low lane * y's low / high
              "sadd16": "__sadd16",
              "ssat": "__ssat", "usat": "__usat",  # saturate to a constant bit width
              "sxtb16_ror8": "aotc_sxtb16_ror8", "ld_pair16": "aotc_ld_pair16",
              "ld_word8": "aotc_ld_word8", "pkhbt": "aotc_pkhbt", "pkhtb": "aotc_pkhtb",
              "st_pair16": "aotc_st_pair16",
              # SMLAD, then a scheduling barrier (intrinsics.c.j2; schedules/conv/dsp.py's
              # pipelined tiles, conv.dsp_order)
              "smlad_ordered": "aotc_smlad_ordered"}

# Helium (MVE) intrinsics (<arm_mve.h>, __ARM_FEATURE_MVE), under their non-polymorphic names
# (the polymorphic ones are C11 _Generic macros): loops/mve.py's int8 dot products, emitted
# only for targets with the "mve" feature. A vldrbq call's first argument is a Load printed as
# its address; its result has loops/mve.py's INT8X16 type (int8x16_t). model.c.j2 defines C
# twins of the intrinsics and of int8x16_t where the compiler has no MVE.
# Also the int32x4_t requantisation (loops/mve.py requant4); a Store whose value is a call of
# a VECTOR_STORES intrinsic is printed as that call with the store's address first.
MVE_CALLS = {f: f for f in (
    "vldrbq_s8", "vldrbq_z_s8", "vctp8q", "vmladavaq_s8", "vldrwq_s32", "vldrbq_s32",
    "vstrbq_s32", "vstrbq_scatter_offset_s32", "vidupq_n_u32", "vmulq_n_u32", "vdupq_n_s32",
    "vshlq_s32", "vshlq_r_s32", "vqrdmulhq_s32", "vqrdmulhq_n_s32", "vandq_s32", "vshrq_n_s32",
    "vqaddq_s32", "vrshlq_s32", "vrshlq_n_s32", "vaddq_n_s32", "vaddq_s32", "vmaxq_s32",
    "vminq_s32", "vldrhq_u16", "vldrbq_gather_offset_s16", "vstrbq_s16",
    "vldrbq_gather_offset_s32", "vmlaq_n_s32", "vstrwq_s32")}
# vmladavaq_s8 followed by a scheduling barrier (loops/mve.py dot, ordered): a helper of
# intrinsics.c.j2.
MVE_CALLS["vmladavaq_s8_ordered"] = "aotc_vmladavaq_s8_ordered"
ADDRESS_ARG_CALLS = frozenset({"vldrbq_s8", "vldrbq_z_s8", "ld_pair16", "ld_word8", "vldrwq_s32",
                               "vldrbq_s32", "vldrhq_u16", "vldrbq_gather_offset_s16",
                               "vldrbq_gather_offset_s32"})
VECTOR_STORES = frozenset({"vstrbq_s32", "vstrbq_scatter_offset_s32", "vstrbq_s16",
                           "vstrwq_s32", "st_pair16"})


# Integer spellings without undefined behaviour (runtime_c/aotc_runtime.h).
WRAP_BINARY = {"add": "+", "sub": "-", "mul": "*"}
DIVMOD = "aotc_{op}_{sfx}"  # op: div | mod
SHIFT = "aotc_{op}_{sfx}"  # op: shl | shr
SAT_CAST = "aotc_sat_{sfx}"
INT_SUFFIX = {"int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16", "int32": "i32",
              "uint32": "u32", "int64": "i64", "uint64": "u64"}


def _is_int(dt: DType) -> bool:
    return not dt.is_float and dt.name != "bool"


def _unsigned_ctype(dt: DType) -> str:
    return "uint64_t" if dt.itemsize == 8 else "uint32_t"


def _wraps(op: str, dt: DType) -> bool:
    """Whether C's plain ``op`` on ``dt`` operands can overflow a signed type: int32/int64
    always; uint16 * uint16 (promoted to int, 65535^2 > INT_MAX); int8/int16/uint8 never."""
    if not _is_int(dt):
        return False
    return (dt.is_signed and dt.itemsize >= 4) or (op == "mul" and dt.name == "uint16")


def _divmod_suffix(dt: DType) -> str:
    """The helper that computes ``dt``'s division: narrow types are promoted to int32."""
    return INT_SUFFIX[dt.name] if dt.itemsize >= 4 else "i32"


def _clamped(e: Bin) -> bool:
    """min(max(x, lo), hi) or max(min(x, hi), lo) on integers with constant bounds (a clamped
    run-time index): bounded whatever x is, so arithmetic on it is index arithmetic."""
    inner = {"min": "max", "max": "min"}.get(e.op)
    return inner is not None and _is_int(e.dtype) and isinstance(e.b, Const) \
        and isinstance(e.a, Bin) and e.a.op == inner and isinstance(e.a.b, Const)


def float_range(e: Expr) -> tuple[float, float] | None:
    """Bounds of a float expression proven NaN-free, or None. What is proven: constants, an
    integer converted to float, +, -, * and / by a constant, rint/floor/ceil, and a clamp
    (aotc_minf/aotc_maxf and their constant-bound forms keep a NaN, so a clamp bounds only a
    NaN-free operand: a value loaded from a float tensor may be NaN, and its conversion to an
    integer goes through aotc_sat_*, which gives 0 for NaN)."""
    if isinstance(e, Const):
        v = float(e.value)
        return None if math.isnan(v) else (v, v)
    if isinstance(e, Cast) and _is_int(e.a.dtype) and e.dtype.is_float:
        info = np.iinfo(e.a.dtype.np)
        return float(info.min), float(info.max)
    if isinstance(e, Bin) and e.op in ("add", "sub", "mul", "div") and e.dtype.is_float:
        a, b = float_range(e.a), float_range(e.b)
        if a is None or b is None or (e.op == "div" and b[0] <= 0.0 <= b[1]):
            return None
        with np.errstate(all="ignore"):
            if e.op == "add":
                c = [a[0] + b[0], a[1] + b[1]]
            elif e.op == "sub":
                c = [a[0] - b[1], a[1] - b[0]]
            else:
                c = [x * y if e.op == "mul" else x / y for x in a for y in b]
        if any(math.isnan(v) for v in c):
            return None
        return min(c), max(c)
    if isinstance(e, Bin) and e.op in ("min", "max") and isinstance(e.b, Const):
        k = float(e.b.value)
        inner = float_range(e.a)
        if math.isnan(k) or inner is None:
            return None
        if e.op == "min":
            return min(inner[0], k), min(inner[1], k)
        return max(inner[0], k), max(inner[1], k)
    if isinstance(e, Call) and e.fn in ("rint", "floor", "ceil"):
        inner = float_range(e.args[0])
        return None if inner is None else (math.floor(inner[0]), math.ceil(inner[1]))
    return None


def _cast_in_range(e: Expr, dt: DType) -> bool:
    """Whether C's truncating conversion of float ``e`` to ``dt`` is defined for every value."""
    r = float_range(e)
    if r is None:
        return False
    lo, hi = (-(2.0 ** (8 * dt.itemsize - 1)), 2.0 ** (8 * dt.itemsize - 1)) if dt.is_signed \
        else (0.0, 2.0 ** (8 * dt.itemsize))
    return lo - 1 < r[0] and r[1] < hi


def acle_calls(k: Kernel, table: dict[str, str] = ACLE_CALLS) -> set[str]:
    """The intrinsics (``table`` keys: ACLE_CALLS or MVE_CALLS) a kernel calls: the file must
    include <arm_acle.h> / <arm_mve.h>, or define them in C where the compiler lacks them."""
    used: set[str] = set()
    stack: list[object] = list(k.body)
    while stack:
        x = stack.pop()
        if isinstance(x, Call) and x.fn in table:
            used.add(x.fn)
        stack.extend(children(x))
    return used


def vldm_run(body: tuple[Stmt, ...], at: int) -> list[Decl]:
    """The Decls of a run of loop_ir.vldm loads starting at body[at] (element 0 first, then
    1, 2, ... of the same run, float32, consecutive), or [] when there is none."""
    out: list[Decl] = []
    for s in body[at:]:
        if not (isinstance(s, Decl) and isinstance(s.init, Call) and s.init.fn == "vldm"
                and s.dtype.name == "float32"):
            break
        reg, n, i = (int(a.value) for a in s.init.args[1:])  # type: ignore[attr-defined]
        if i != len(out) or (out and (reg, n) != tuple(
                int(a.value) for a in out[0].init.args[1:3])):  # type: ignore[union-attr]
            break
        out.append(s)
        if len(out) == n:
            return out
    return []


def vldm_sizes(k: Kernel) -> set[int]:
    """The register counts of the kernel's loop_ir.vldm runs (model.c.j2 defines AOTC_VLDM<n>
    for each)."""
    used: set[int] = set()
    stack: list[object] = list(k.body)
    while stack:
        x = stack.pop()
        if isinstance(x, Call) and x.fn == "vldm":
            used.add(int(x.args[2].value))  # type: ignore[attr-defined]
        stack.extend(children(x))
    return used


def c_type(dt: DType) -> str:
    return dt.ctype


def c_literal(value: object, dt: DType) -> str:
    """An exact C literal for a scalar of dtype ``dt``."""
    if dt.is_float:
        v = float(np.float32(value))  # type: ignore[arg-type]
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "HUGE_VALF" if v > 0 else "(-HUGE_VALF)"
        s = str(np.float32(v))  # shortest string that round-trips in float32
        if "." not in s and "e" not in s:
            s += ".0"
        return s + "f"
    if dt.name == "bool":
        return "1" if value else "0"
    iv = int(value)  # type: ignore[call-overload]
    if dt.itemsize == 8:
        if dt.is_signed:
            if iv == -(2**63):
                return "(-INT64_C(9223372036854775807) - 1)"
            return f"INT64_C({iv})"
        return f"UINT64_C({iv})"
    if dt.name == "uint32":
        return f"{iv}u"
    if iv == -(2**31):
        return "(-2147483647 - 1)"
    return str(iv)


def _strip(s: str) -> str:
    """Drop one pair of redundant outer parentheses."""
    if s.startswith("(") and s.endswith(")"):
        depth = 0
        for i, ch in enumerate(s):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i != len(s) - 1:
                return s
        return s[1:-1]
    return s


class CPrinter:
    binary = BINARY
    float_binary = FLOAT_BINARY
    int_binary = INT_BINARY
    unary = UNARY
    float_calls = FLOAT_CALLS
    int_calls = INT_CALLS | ACLE_CALLS | MVE_CALLS

    def __init__(self) -> None:
        # Integer locals whose every value is index arithmetic (see index_vars); None outside
        # a kernel: then every Var counts as an index.
        self._index_vars: set[str] | None = None
        self._data_memo: dict[int, bool] = {}
        self._kernel: Kernel | None = None  # the kernel being printed (Outline names)
        self._helpers: list[str] = []  # its Outlines, printed as functions before it

    # ------------------------------------------------------------------ data vs index values
    def is_data(self, e: Expr) -> bool:
        """Whether ``e`` depends on tensor data (a Load, a call, a float converted to an
        integer, or a local that holds such a value) rather than only on loop counters and
        constants. Arithmetic on data is what can overflow or divide by zero at run time."""
        key = id(e)
        if key in self._data_memo:
            return self._data_memo[key]
        if isinstance(e, Const):
            out = False
        elif isinstance(e, Var):
            out = self._index_vars is not None and e.name not in self._index_vars
        elif isinstance(e, (Load, Call)):
            out = True
        elif isinstance(e, Cast):
            out = e.a.dtype.is_float or self.is_data(e.a)
        elif isinstance(e, Bin):
            out = not _clamped(e) and (self.is_data(e.a) or self.is_data(e.b))
        elif isinstance(e, Un):
            out = self.is_data(e.a)
        elif isinstance(e, Select):
            out = self.is_data(e.cond) or self.is_data(e.a) or self.is_data(e.b)
        else:
            raise TypeError(e)
        self._data_memo[key] = out
        return out

    def index_vars(self, body: tuple[Stmt, ...]) -> set[str]:
        """Loop counters, and the locals every Decl/Assign of which is index arithmetic (a
        fixpoint: an accumulator declared as 0 and then assigned acc + x[i] is data)."""
        loops: set[str] = set()
        defs: dict[str, list[Expr]] = {}

        def walk(stmts: tuple[Stmt, ...]) -> None:
            for s in stmts:
                if isinstance(s, Loop):
                    loops.add(s.var)
                    walk(s.body)
                elif isinstance(s, Decl):
                    defs.setdefault(s.var, []).append(s.init)
                elif isinstance(s, Assign):
                    defs.setdefault(s.var, []).append(s.value)
                elif isinstance(s, If):
                    walk(s.then)
                    walk(s.orelse)
                elif isinstance(s, Block):
                    walk(s.body)

        walk(body)
        index = loops | set(defs)
        changed = True
        while changed:
            changed = False
            self._index_vars, self._data_memo = index, {}
            for v, values in defs.items():
                if v in index and v not in loops and any(self.is_data(x) for x in values):
                    index = index - {v}
                    changed = True
        self._data_memo = {}
        return index

    # ------------------------------------------------------------------ expressions
    def _int_bin(self, e: Bin, a: str, b: str) -> str | None:
        """The C of an integer Bin whose plain spelling could be undefined, else None."""
        dt = e.dtype
        if e.op in WRAP_BINARY and _wraps(e.op, dt) and self.is_data(e):
            u = _unsigned_ctype(dt)
            return f"(({c_type(dt)})(({u}){a} {WRAP_BINARY[e.op]} ({u}){b}))"
        if e.op in ("div", "mod") and _is_int(dt) and self.is_data(e) \
                and not (isinstance(e.b, Const) and int(e.b.value) not in (0, -1)):
            call_ = DIVMOD.format(op=e.op, sfx=_divmod_suffix(dt)) + f"({_strip(a)}, {_strip(b)})"
            return call_ if dt.itemsize >= 4 else f"(({c_type(dt)}){call_})"
        if e.op in ("shl", "shr") and _is_int(dt) and not dt.is_signed and dt.itemsize >= 4 \
                and not (isinstance(e.b, Const) and 0 <= int(e.b.value) < 8 * dt.itemsize):
            return SHIFT.format(op=e.op, sfx=INT_SUFFIX[dt.name]) + f"({_strip(a)}, {_strip(b)})"
        return None

    def expr(self, e: Expr) -> str:
        if isinstance(e, Const):
            return c_literal(e.value, e.dtype)
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Load):
            return f"{e.buf.name}[{_strip(self.expr(e.index))}]"
        if isinstance(e, Bin):
            a, b = self.expr(e.a), self.expr(e.b)
            if not e.dtype.is_float and e.a.dtype == e.dtype:
                guarded = self._int_bin(e, a, b)
                if guarded is not None:
                    return guarded
            if e.op in self.binary:
                return self.binary[e.op].format(a=a, b=b)
            table = self.float_binary if e.a.dtype.is_float else self.int_binary
            if (e.a.dtype.is_float and e.op in ("min", "max") and isinstance(e.b, Const)
                    and not math.isnan(float(e.b.value)) and "k" + e.op in table):
                return table["k" + e.op].format(a=_strip(a), b=_strip(b))
            if e.op not in table:
                raise KeyError(f"no C spelling for {e.op} on {e.a.dtype}")
            return table[e.op].format(a=_strip(a), b=_strip(b))
        if isinstance(e, Un):
            if e.op == "neg" and _wraps("sub", e.dtype) and self.is_data(e):
                u = _unsigned_ctype(e.dtype)
                return f"(({c_type(e.dtype)})(({u})0 - ({u}){self.expr(e.a)}))"
            return self.unary[e.op].format(a=self.expr(e.a))
        if isinstance(e, Call) and e.fn == "vldm":  # outside a run (stmts): the plain load
            return self.expr(e.args[0])
        if isinstance(e, Call):
            table = self.float_calls if e.args[0].dtype.is_float else self.int_calls
            fn = table.get(e.fn, e.fn)
            if e.fn == "abs" and _wraps("sub", e.args[0].dtype):  # |INT_MIN| wraps
                fn = f"aotc_abs_{INT_SUFFIX[e.args[0].dtype.name]}"
            args = [_strip(self.expr(a)) for a in e.args]
            if e.fn in ADDRESS_ARG_CALLS:
                assert isinstance(e.args[0], Load), e
                args[0] = f"&{args[0]}"
            return f"{fn}({', '.join(args)})"
        if isinstance(e, Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"
        if isinstance(e, Cast):
            if e.a.dtype.is_float and _is_int(e.dtype) and not _cast_in_range(e.a, e.dtype):
                return f"{SAT_CAST.format(sfx=INT_SUFFIX[e.dtype.name])}({_strip(self.expr(e.a))})"
            return f"(({c_type(e.dtype)}){self.expr(e.a)})"
        raise TypeError(e)

    def stmts(self, body: tuple[Stmt, ...], ind: int) -> list[str]:
        pad = "    " * ind
        out: list[str] = []
        skip = 0
        for at, s in enumerate(body):
            if skip:
                skip -= 1
                continue
            run = vldm_run(body, at)
            if run:
                # One multi-register load (model.c.j2's AOTC_VLDM<n>) into the run's locals.
                first = run[0]
                assert isinstance(first.init, Call) and isinstance(first.init.args[0], Load)
                reg, n = (int(a.value) for a in first.init.args[1:3])  # type: ignore[attr-defined]
                names = [d.var for d in run]
                out.append(f"{pad}{c_type(first.dtype)} {', '.join(names)};")
                regs = ", ".join(f'"s{reg + i}"' for i in range(n))
                out.append(f"{pad}AOTC_VLDM{n}(&{_strip(self.expr(first.init.args[0]))}, "
                           f"{regs}, {', '.join(names)});")
                skip = n - 1
                continue
            if isinstance(s, Loop):
                v = s.var
                step = "++" + v if s.step == 1 else f"{v} += {s.step}"
                out.append(f"{pad}for (int32_t {v} = {_strip(self.expr(s.start))}; "
                           f"{v} < {_strip(self.expr(s.stop))}; {step}) {{")
                out += self.stmts(s.body, ind + 1)
                out.append(pad + "}")
            elif isinstance(s, Store) and isinstance(s.value, Call) \
                    and s.value.fn in VECTOR_STORES:
                args = [_strip(self.expr(a)) for a in s.value.args]
                fn = ACLE_CALLS.get(s.value.fn, s.value.fn)
                out.append(f"{pad}{fn}(&{s.buf.name}[{_strip(self.expr(s.index))}], "
                           f"{', '.join(args)});")
            elif isinstance(s, Store):
                out.append(f"{pad}{s.buf.name}[{_strip(self.expr(s.index))}] = "
                           f"{_strip(self.expr(s.value))};")
            elif isinstance(s, Decl):
                out.append(f"{pad}{c_type(s.dtype)} {s.var} = {_strip(self.expr(s.init))};")
            elif isinstance(s, Assign):
                out.append(f"{pad}{s.var} = {_strip(self.expr(s.value))};")
            elif isinstance(s, If):
                out.append(f"{pad}if ({_strip(self.expr(s.cond))}) {{")
                out += self.stmts(s.then, ind + 1)
                if s.orelse:
                    out.append(pad + "} else {")
                    out += self.stmts(s.orelse, ind + 1)
                out.append(pad + "}")
            elif isinstance(s, DeclArray):
                out.append(f"{pad}{c_type(s.buf.dtype)} {s.buf.name}[{s.buf.size}];")
            elif isinstance(s, Outline):
                out.append(pad + self.outline(s) + ";")
            elif isinstance(s, Block):
                out.append(pad + "{")
                out += self.stmts(s.body, ind + 1)
                out.append(pad + "}")
            else:
                raise TypeError(s)
        return out

    def param(self, b: Buffer, noalias: bool) -> str:
        const = "const " if b.role in ("in", "const") else ""
        restrict = "AOTC_RESTRICT " if noalias else ""
        return f"{const}{c_type(b.dtype)} *{restrict}{b.name}"

    def signature(self, k: Kernel) -> str:
        params = ", ".join(self.param(b, b.name in k.noalias) for b in k.params) or "void"
        return f"static AOTC_NOINLINE void {k.name}({params})"

    def outline(self, s: Outline) -> str:
        """Print ``s`` as a function of its own (into self._helpers); returns the call."""
        assert self._kernel is not None, "an Outline outside a kernel"
        k = self._kernel
        bufs: dict[str, Buffer] = {}
        declared: set[str] = set()
        assigned: set[str] = set()
        reads: dict[str, Var] = {}
        stack: list[object] = list(s.body)
        while stack:
            x = stack.pop()
            if isinstance(x, (Load, Store)):
                bufs[x.buf.name] = x.buf
            elif isinstance(x, Var):
                reads[x.name] = x
            elif isinstance(x, Decl):
                declared.add(x.var)
            elif isinstance(x, Assign):
                assigned.add(x.var)
            elif isinstance(x, Loop):
                declared.add(x.var)
            elif isinstance(x, DeclArray):
                declared.add(x.buf.name)
            stack.extend(children(x))
        outer = sorted(n for n in reads if n not in declared)
        assert not assigned - declared, f"an Outline assigns outer variables {assigned}"
        params = [self.param(bufs[n], n in k.noalias) for n in sorted(bufs)
                  if n not in declared]
        params += [f"{c_type(reads[n].dtype)} {n}" for n in outer]
        name = f"{k.name}_part{len(self._helpers)}"
        body = self.stmts(s.body, 1)
        self._helpers.append("\n".join(
            [f"static AOTC_NOINLINE {'AOTC_NOCLONE ' if s.opaque else ''}void {name}("
             f"{', '.join(params) or 'void'})", "{", *body,
             "}"]))
        args = [n for n in sorted(bufs) if n not in declared] + outer
        return f"{name}({', '.join(args)})"

    def kernel(self, k: Kernel) -> str:
        self._kernel, self._helpers = k, []
        lines = []
        if k.comment:
            lines.append(f"/* {k.comment} */")
        lines.append(self.signature(k))
        lines.append("{")
        self._index_vars = self.index_vars(k.body)
        used = used_buffers(k.body)
        for b in k.params:
            if b.name not in used:
                lines.append(f"    (void){b.name};")
        lines += self.stmts(k.body, 1)
        lines.append("}")
        self._index_vars, self._data_memo = None, {}
        helpers, self._kernel, self._helpers = self._helpers, None, []
        return "\n\n".join(helpers + ["\n".join(lines)])
