"""Build a bundle with the host C compiler into a shared library and run it through cffi.

The cdef is the bundle's own public header (the part between the aotc:cdef markers), so the
host tests exercise exactly the API a firmware uses. Libraries are cached by content hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import cffi
import numpy as np

from aotc.errors import AotcError
from aotc.paths import cache_dir, runtime_dir

WARN_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
HOST_FLAGS = ["-O2", "-ffp-contract=off", "-fPIC", "-shared"]
# AOTC_SANITIZE=1: build host libraries with ASan + UBSan, dying at the first report. gcc leaves
# float-cast-overflow out of "undefined", so it is named. Loading such a library into an
# uninstrumented Python needs the runtimes preloaded: scripts/sanitize.sh sets that up.
SANITIZE_FLAGS = ["-fsanitize=address,undefined,float-cast-overflow",
                  "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"]
STATUS = {0: "ok", 1: "null pointer argument", 2: "arena too small", 3: "arena misaligned",
          4: "a BYOC kernel (external library) returned an error"}


def _cc() -> str:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise AotcError(f"no host C compiler ({cc!r}); install gcc or set CC")
    return cc


# AOTC_HOST_FMA=1: let the host cc fuse a * b + c into one rounding (fused multiply-add), as
# onnxruntime's MLAS and numpy's BLAS kernels do on CPUs that have it. Bundles are C99 and not
# contracted (each product rounded to float32, the same on every board); the fuzz oracle uses
# this build to tell a difference that only contraction makes (a product that overflows float32
# meeting an infinity: NaN unfused, +-inf fused) from a wrong result.
FMA_FLAGS = ["-ffp-contract=fast"] + (["-mfma"] if platform.machine() in ("x86_64", "AMD64")
                                      else [])


def host_flags() -> list[str]:
    """The host build's flags after the warnings: HOST_FLAGS, plus the sanitizers with
    AOTC_SANITIZE=1, fused multiply-add with AOTC_HOST_FMA=1, and last the words of
    AOTC_HOST_CFLAGS (host builds only, e.g. "-march=native -fpeel-loops" for the latency benches;
    firmware builds never see it)."""
    return (HOST_FLAGS + (SANITIZE_FLAGS if os.environ.get("AOTC_SANITIZE") == "1" else [])
            + (FMA_FLAGS if os.environ.get("AOTC_HOST_FMA") == "1" else [])
            + extra_cflags())


def extra_cflags() -> list[str]:
    """The words of AOTC_HOST_CFLAGS (host builds, aotc tune --board host's included)."""
    return os.environ.get("AOTC_HOST_CFLAGS", "").split()


def _compiler_env() -> dict[str, str]:
    """The environment without the sanitizer runtimes scripts/sanitize.sh preloads: compilers
    do not need them, and they make every cc1 several times slower."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def bundle_libraries(bundle_dir: Path) -> list[dict]:
    """The BYOC libraries a bundle links (bundle.json "libraries"; none for most bundles)."""
    meta = bundle_dir / "bundle.json"
    if not meta.is_file():
        return []
    return list(json.loads(meta.read_text()).get("libraries", []))


def clang_check(bundle_dir: Path) -> None:
    """With AOTC_CLANG_CHECK=1 (the test suite sets it), the bundle (+ runtime) must also be
    warning-free under ``clang -std=c99 -Wall -Wextra -Werror -pedantic``: a syntax-only
    compile (clang's warnings come from its front end), remembered by content hash like the
    gcc build. Raises AotcError with clang's first error line."""
    if os.environ.get("AOTC_CLANG_CHECK", "0") in ("", "0"):
        return
    clang = shutil.which("clang")
    if clang is None:
        raise AotcError("AOTC_CLANG_CHECK is set but clang is not installed (apt-get install "
                        "clang, or bash scripts/setup.sh)")
    files = sorted(bundle_dir.glob("*.[ch]")) + sorted(runtime_dir().glob("*.[ch]"))
    st = Path(clang).resolve().stat()
    h = hashlib.sha256(" ".join([clang, str(st.st_size), str(st.st_mtime_ns), *WARN_FLAGS])
                       .encode())
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    libs = bundle_libraries(bundle_dir)
    if libs:
        from aotc.targets.libraries import include_flags

        h.update(" ".join(include_flags(libs)).encode())
    ok = cache_dir() / f"clang_{h.hexdigest()[:24]}.ok"
    if ok.exists():
        return
    cmd = [clang, *WARN_FLAGS, "-fsyntax-only", "-I", str(bundle_dir), "-I", str(runtime_dir()),
           *(include_flags(libs) if libs else []),
           *(str(f) for f in files if f.suffix == ".c")]
    res = subprocess.run(cmd, capture_output=True, text=True, env=_compiler_env())
    if res.returncode != 0:
        first = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr[:300])
        raise AotcError(f"generated C failed to compile with clang: {first.strip()}")
    ok.touch()


def build_shared(bundle_dir: Path) -> Path:
    """Compile the bundle (+ runtime) with warnings as errors; cached by content and flags."""
    clang_check(bundle_dir)
    sources = sorted(bundle_dir.glob("*.c")) + sorted(runtime_dir().glob("*.c"))
    headers = sorted(bundle_dir.glob("*.h")) + sorted(runtime_dir().glob("*.h"))
    cc = _cc()
    libs = bundle_libraries(bundle_dir)
    archives: list[str] = []
    if libs:  # BYOC libraries (CMSIS-NN, ...): built once per content into aotc's cache
        from aotc.targets.libraries import archive, include_flags

        archives = [str(archive(lib, cc, ["-O2", "-fPIC"])) for lib in libs]
    flags = host_flags() + (include_flags(libs) if libs else [])
    h = hashlib.sha256(" ".join([cc, *WARN_FLAGS, *flags, *archives]).encode())
    for f in sources + headers:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    out = cache_dir() / f"lib_{h.hexdigest()[:24]}.so"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        tmp_out = Path(tmp) / out.name
        cmd = [cc, *WARN_FLAGS, *flags, "-I", str(bundle_dir), "-I", str(runtime_dir()),
               *map(str, sources), *archives, "-o", str(tmp_out), "-lm"]
        res = subprocess.run(cmd, capture_output=True, text=True, env=_compiler_env())
        if res.returncode != 0:
            first = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr[:300])
            raise AotcError(f"generated C failed to compile with the host cc: {first.strip()}")
        os.replace(tmp_out, out)
    return out


def cdef_of(header: str) -> str:
    """The cffi declarations: the header's cdef section without preprocessor lines, except
    plain integer #defines (which cffi understands)."""
    m = re.search(r"/\* aotc:cdef-begin \*/(.*?)/\* aotc:cdef-end \*/", header, re.S)
    if not m:
        raise AotcError("bundle header has no aotc:cdef section")
    lines = []
    for ln in m.group(1).splitlines():
        s = ln.strip()
        if s.startswith("#") and not re.fullmatch(r"#define \w+ \d+", s):
            continue
        if s.startswith("/*"):
            continue
        lines.append(ln)
    return "\n".join(lines)


class Runner:
    """Runs a built bundle: ``run({input name: array}) -> {output name: array}``."""

    def __init__(self, bundle_dir: str | os.PathLike[str], *, library: Path | None = None,
                 cdef: str = "") -> None:
        """``library``: a shared library already built from the bundle (e.g. with profiling
        hooks, aotc/tune), whose extra functions ``cdef`` declares."""
        self.dir = Path(bundle_dir)
        self.meta = json.loads((self.dir / "bundle.json").read_text())
        self.name = self.meta["name"]
        self.lib_path = library or build_shared(self.dir)
        self.ffi = cffi.FFI()
        self.ffi.cdef(cdef_of((self.dir / f"{self.name}.h").read_text()) + cdef)
        self.lib = self.ffi.dlopen(str(self.lib_path))
        self.arena_bytes = int(self.meta["arena_bytes"])
        # A streaming model's state buffer (bundle.json "state"): kept across run() calls,
        # set to its initial value here and by reset().
        self.state_bytes = int(self.meta.get("state", {}).get("bytes", 0))
        self._state_raw, self.state = (_aligned_zeros(self.state_bytes) if self.state_bytes
                                       else (None, None))
        self.reset()

    def reset(self) -> None:
        """The state back to its initial value (<name>_reset); nothing for a model without
        state."""
        if self.state is None:
            return
        status = getattr(self.lib, f"{self.name}_reset")(
            self.ffi.from_buffer("uint8_t[]", self.state))
        if status != 0:
            raise AotcError(f"{self.name}_reset returned {status} ({STATUS.get(status, '?')})")

    def _array(self, spec: dict, value: object) -> np.ndarray:
        arr = np.asarray(value)
        want = np.dtype(spec["dtype"])
        if arr.dtype != want:
            if not np.can_cast(arr.dtype, want, "same_kind"):
                raise AotcError(f"input {spec['name']!r} has dtype {arr.dtype}, expected {want}")
            arr = arr.astype(want)
        if tuple(arr.shape) != tuple(spec["shape"]):
            if arr.size != int(np.prod(spec["shape"], dtype=np.int64)):
                raise AotcError(f"input {spec['name']!r} has shape {arr.shape}, expected "
                                f"{tuple(spec['shape'])}")
            arr = arr.reshape(spec["shape"])
        return np.ascontiguousarray(arr)

    def run(self, inputs: Mapping[str, object]) -> dict[str, np.ndarray]:
        fn, args, outs = self._prepare(inputs)
        status = fn(*args)
        if status != 0:
            raise AotcError(f"{self.name}_run returned {status} ({STATUS.get(status, '?')})")
        # With the I/O in the arena the outputs are views of it, which the next run overwrites.
        return {k: v.copy() for k, v in outs.items()} if self.meta.get("io_in_arena") else outs

    def benchmark(self, inputs: Mapping[str, object], repeat: int = 50, warmup: int = 5
                  ) -> float:
        """Median seconds per inference over ``repeat`` calls with preallocated buffers."""
        import time

        fn, args, _ = self._prepare(inputs)
        for _ in range(warmup):
            fn(*args)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    def _prepare(self, inputs: Mapping[str, object]):  # type: ignore[no-untyped-def]
        specs_in, specs_out = self.meta["inputs"], self.meta["outputs"]
        missing = [s["name"] for s in specs_in if s["name"] not in inputs]
        extra = sorted(set(inputs) - {s["name"] for s in specs_in})
        if missing or extra:
            raise AotcError(f"inputs do not match the model: missing {missing}, unknown {extra}")
        ins = [self._array(s, inputs[s["name"]]) for s in specs_in]
        # One arena, or one per memory pool (bundle.json "pools", in run-argument order).
        sizes = {p["name"]: int(p["bytes"]) for p in self.meta.get("pools", [])} or \
            {"arena": self.arena_bytes}
        raws, arenas = [], {}
        for pool, size in sizes.items():
            raw, arenas[pool] = _aligned_zeros(size)
            raws.append(raw)
        if self.meta.get("io_in_arena"):
            # --io-in-arena: inputs are written into the arena, outputs read from it (bundle.json
            # gives each one's offset, as the header's <NAME>_INPUT_<i>_OFFSET macros do, and
            # its pool).
            for s, a in zip(specs_in, ins):
                arena = arenas[s.get("pool", "arena")]
                arena[s["offset"]:s["offset"] + a.nbytes] = a.reshape(-1).view(np.uint8)
            outs = [arenas[s.get("pool", "arena")][s["offset"]:s["offset"] + s["bytes"]]
                    .view(np.dtype(s["dtype"])).reshape(s["shape"]) for s in specs_out]
            args = []
        else:
            outs = [np.zeros(s["shape"], np.dtype(s["dtype"])) for s in specs_out]
            args = [self.ffi.from_buffer(f"{s['ctype']}[]", a) for s, a in zip(specs_in, ins)]
            args += [self.ffi.from_buffer(f"{s['ctype']}[]", a) for s, a in zip(specs_out, outs)]
        for pool, size in sizes.items():
            args += [self.ffi.from_buffer("uint8_t[]", arenas[pool]), size]
        if self.state is not None:
            args.append(self.ffi.from_buffer("uint8_t[]", self.state))
        self._keep = (ins, raws)  # the buffers must outlive the call
        fn = getattr(self.lib, f"{self.name}_run")
        return fn, args, {s["name"]: o for s, o in zip(specs_out, outs)}


def _aligned_zeros(size: int) -> tuple[np.ndarray, np.ndarray]:
    """(allocation, a 16-byte aligned view of `size` bytes, at least 1) for an arena or pool.
    The view ends where the allocation ends (malloc aligns to 16 on the hosts we build on), so
    a sanitised build sees a read past its end; the slack is a fallback."""
    raw = np.zeros(max(size, 1), np.uint8)
    if raw.ctypes.data % 16:
        raw = np.zeros(size + 64, np.uint8)
    off = (-raw.ctypes.data) % 16
    return raw, raw[off:off + max(size, 1)]
