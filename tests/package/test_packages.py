"""`aotc package`: each format's structure (the CMSIS-Pack .pdsc against the published PACK.xsd,
vendored in tests/fixtures/cmsis_pack), and its sources compiled the way that ecosystem compiles
them (its include layout and conventional flags) with -Wall -Wextra -Werror on the cross gcc."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import kconfiglib
import pytest
import xmlschema
import yaml

REPO = Path(__file__).resolve().parents[2]
MLPERF = REPO.parent / "shared" / "models" / "mlperf_tiny"
XSD = REPO / "tests" / "fixtures" / "cmsis_pack" / "PACK.xsd"
WARN = ["-Wall", "-Wextra", "-Werror"]
M4 = ["-mcpu=cortex-m4", "-mthumb"]
FORMATS = ("zephyr", "cmsis-pack", "arduino", "esp-idf", "platformio")
NAMES = ["kws", "ad", "adp"]  # the packages fixture's bundles: adp has memory pools


def _aotc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AOTC_DEBUG"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "aotc", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """KWS int8 (through `compile --package`, every format), AD float with its I/O in the arena
    and AD int8 planned into two pools, its I/O in the first (through `aotc package`): integer
    and float, both I/O conventions, one arena and pools."""
    d = tmp_path_factory.mktemp("pkg")
    res = _aotc("compile", str(MLPERF / "kws_ref_model.tflite"), "-o", "kws", "--name", "kws",
                "-q", *(a for f in FORMATS for a in ("--package", f)), cwd=d)
    assert res.returncode == 0, res.stderr
    res = _aotc("compile", str(MLPERF / "ad01_float.onnx"), "-o", "ad", "--name", "ad", "-q",
                "--io-in-arena", cwd=d)
    assert res.returncode == 0, res.stderr
    res = _aotc("compile", str(MLPERF / "ad01_int8.tflite"), "-o", "adp", "--name", "adp", "-q",
                "--io-in-arena", "--pool", "dtcm:1K:.dtcm", "--pool", "sram:64K", cwd=d)
    assert res.returncode == 0, res.stderr
    for name in ("ad", "adp"):
        for fmt in FORMATS:
            res = _aotc("package", name, "--format", fmt, "-o", f"{name}-{fmt}", cwd=d)
            assert res.returncode == 0, res.stderr
            assert f"wrote {fmt} package {name}-{fmt}" in res.stderr
    return d


def _cc(cc: str, flags: list[str], sources: list[Path], cwd: Path) -> None:
    for src in sources:
        res = subprocess.run([cc, *flags, "-c", str(src), "-o", os.devnull], cwd=cwd,
                             capture_output=True, text=True)
        assert res.returncode == 0, f"{src.name}: {res.stderr[:2000]}"


def _c_files(d: Path) -> list[Path]:
    return sorted(d.glob("*.c"))


ZEPHYR_MOCK = """\
# Zephyr's library functions, recording what the module's CMakeLists.txt asks for.
function(_emit kind)
  foreach(item ${ARGN})
    message(STATUS "${kind} ${item}")
  endforeach()
endfunction()
function(zephyr_library_named name)
  _emit(LIB ${name})
endfunction()
function(zephyr_library_sources)
  _emit(SRC ${ARGN})
endfunction()
function(zephyr_library_sources_ifdef cond)
  if(${cond})
    _emit(SRC ${ARGN})
  endif()
endfunction()
function(zephyr_include_directories)
  _emit(INC ${ARGN})
endfunction()
function(zephyr_library_include_directories)
  _emit(INC ${ARGN})
endfunction()
function(zephyr_library_compile_definitions)
  _emit(DEF ${ARGN})
endfunction()
"""


def _zephyr_config(d: Path, conf: str) -> dict[str, str]:
    """The module's Kconfig evaluated by kconfiglib (the Kconfig implementation Zephyr's build
    uses) with ``conf`` as the application's prj.conf: {CONFIG_NAME: value} of its symbols."""
    kconf = kconfiglib.Kconfig(str(d / "Kconfig"), warn_to_stderr=False)
    assert not kconf.warnings, kconf.warnings
    fragment = d / "test.conf"
    fragment.write_text(conf)
    kconf.load_config(str(fragment))
    fragment.unlink()
    assert not kconf.warnings, kconf.warnings
    return {f"CONFIG_{s.name}": s.str_value for s in kconf.unique_defined_syms
            if s.str_value not in ("", "n")}


def _zephyr_cmake(d: Path, config: dict[str, str], tmp_path: Path) -> dict[str, list[str]]:
    """The module's CMakeLists.txt run by cmake -P with Zephyr's functions mocked and the
    Kconfig's values set: {LIB|SRC|INC|DEF: [...]}."""
    script = tmp_path / "zephyr_mock.cmake"
    sets = "".join(f'set({k} "{v}")\n' for k, v in sorted(config.items()))
    script.write_text(ZEPHYR_MOCK + sets + f'include("{d / "CMakeLists.txt"}")\n')
    res = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out: dict[str, list[str]] = {}
    for line in (res.stdout + res.stderr).splitlines():
        kind, _, item = line.removeprefix("-- ").partition(" ")
        if kind in ("LIB", "SRC", "INC", "DEF"):
            out.setdefault(kind, []).append(item)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_zephyr_module(packages: Path, name: str, tmp_path: Path) -> None:
    d = packages / f"{name}-zephyr"
    module = yaml.safe_load((d / "zephyr" / "module.yml").read_text())
    assert module["build"] == {"cmake": ".", "kconfig": "Kconfig"}
    N = name.upper()
    if name == "adp":
        _zephyr_pools(d, tmp_path)
        return
    # default: a static arena in .bss; the sample's prj.conf: .noinit; or a named section
    default = _zephyr_config(d, "")
    assert default[f"CONFIG_AOTC_{N}_ARENA_BSS"] == "y"
    sample = _zephyr_config(d, _prj_conf(d, name))
    assert sample[f"CONFIG_AOTC_{N}_ARENA_NOINIT"] == "y"
    assert f"CONFIG_AOTC_{N}_ARENA_BSS" not in sample
    custom = _zephyr_config(d, f'CONFIG_AOTC_{N}_ARENA_CUSTOM_SECTION=y\n'
                               f'CONFIG_AOTC_{N}_ARENA_SECTION=".sram2"\n')
    assert custom[f"CONFIG_AOTC_{N}_ARENA_SECTION"] == ".sram2"
    assert "SRC" not in _zephyr_cmake(d, {}, tmp_path)  # CONFIG_AOTC_<NAME>=n: nothing built
    for config, section in ((default, None), (sample, f".noinit.{name}_arena"),
                            (custom, ".sram2")):
        build = _zephyr_cmake(d, config, tmp_path)
        assert build.get("DEF", []) == ([f'AOTC_{N}_ARENA_SECTION="{section}"'] if section
                                        else [])
        _zephyr_compile(d, name, build)
    # the arena lands in the section the Kconfig names
    assert _section_size(d, name, [f'-DAOTC_{N}_ARENA_SECTION=".sram2"'], ".sram2", tmp_path) \
        == _arena_bytes(d, name, f"{name}_arena")


def _prj_conf(d: Path, name: str) -> str:
    """The sample's prj.conf without the symbols Zephyr itself defines."""
    text = (d / "samples" / name / "prj.conf").read_text()
    return text.replace("CONFIG_MAIN_STACK_SIZE=4096\n", "")


def _zephyr_compile(d: Path, name: str, build: dict[str, list[str]]) -> None:
    """Zephyr builds C with -std=c99 (CONFIG_STD_C99), the library's include dirs and
    definitions; the app (the sample) sees the zephyr_include_directories."""
    assert build["LIB"] == [f"aotc_{name}"]
    assert sorted(build["SRC"]) == sorted(f"src/{p.name}" for p in _c_files(d / "src"))
    flags = ["-std=c99", "-Os", *M4, "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16",
             "-ffunction-sections", "-fdata-sections", *WARN,
             *(f"-I{i}" for i in build["INC"]), *(f"-D{x}" for x in build.get("DEF", []))]
    _cc("arm-none-eabi-gcc", flags, [d / s for s in build["SRC"]], d)
    _cc("arm-none-eabi-gcc", ["-std=c99", "-Os", *M4, *WARN, "-Iinclude"],
        [d / "samples" / name / "src" / "main.c"], d)


def _zephyr_pools(d: Path, tmp_path: Path) -> None:
    """Pools: the Kconfig defines them (no placement choice: each pool keeps the section the
    compile named), and the dtcm pool lands in .dtcm."""
    config = _zephyr_config(d, _prj_conf(d, "adp"))
    assert config["CONFIG_AOTC_ADP_STATIC_ARENA"] == "y"
    assert not [k for k in config if "PLACEMENT" in k or "NOINIT" in k]
    build = _zephyr_cmake(d, config, tmp_path)
    assert "DEF" not in build
    _zephyr_compile(d, "adp", build)
    assert _section_size(d, "adp", [], ".dtcm", tmp_path) == _arena_bytes(d, "adp",
                                                                           "adp_pool_dtcm")


def _arena_bytes(d: Path, name: str, symbol: str) -> int:
    text = (d / "include" / f"{name}_arena.h").read_text()
    return int(re.search(rf"extern uint8_t {symbol}\[(\d+)\]", text).group(1))


def _section_size(d: Path, name: str, defines: list[str], section: str, tmp_path: Path) -> int:
    """The size of ``section`` in the arena helper's object (objdump -h), 0 when absent."""
    obj = tmp_path / "arena.o"
    subprocess.run(["arm-none-eabi-gcc", "-std=c99", *M4, "-Iinclude", *defines, "-c",
                    str(d / "src" / f"{name}_arena.c"), "-o", str(obj)], check=True, cwd=d)
    headers = subprocess.run(["arm-none-eabi-objdump", "-h", str(obj)], capture_output=True,
                             text=True, check=True).stdout
    m = re.search(rf"^\s*\d+\s+{re.escape(section)}\s+([0-9a-f]+)\s", headers, re.M)
    return int(m.group(1), 16) if m else 0


@pytest.mark.parametrize("name", NAMES)
def test_cmsis_pack_validates_against_pack_xsd(packages: Path, name: str) -> None:
    d = packages / f"{name}-cmsis-pack"
    pdsc = d / f"aotc.{name}.pdsc"
    schema = xmlschema.XMLSchema(str(XSD))
    schema.validate(str(pdsc))  # raises with the first violation
    listed = re.findall(r'<file category="(\w+)" name="([^"]+)"', pdsc.read_text())
    for _category, rel in listed:
        assert (d / rel).exists(), rel
    with zipfile.ZipFile(d / f"aotc.{name}.1.0.0.pack") as z:
        names = set(z.namelist())
        assert pdsc.name in names and z.read(pdsc.name) == pdsc.read_bytes()
        assert {rel for c, rel in listed if c != "include"} <= names
    # CMSIS-Toolbox: the component's "include" directory on the path, its sources compiled
    srcs = [d / rel for c, rel in listed if c == "source"]
    _cc("arm-none-eabi-gcc", ["-std=c99", "-Os", *M4, *WARN, "-Iinclude"], srcs, d)


def test_a_pdsc_missing_a_required_element_is_rejected(packages: Path, tmp_path: Path) -> None:
    """The schema check can fail: no <url> (required by PACK.xsd)."""
    text = (packages / "kws-cmsis-pack" / "aotc.kws.pdsc").read_text()
    bad = tmp_path / "bad.pdsc"
    bad.write_text(re.sub(r"\s*<url>.*?</url>", "", text))
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        xmlschema.XMLSchema(str(XSD)).validate(str(bad))


ARDUINO_H = """#pragma once
#include <stdint.h>
class HardwareSerial {
 public:
  void begin(unsigned long) {}
  void print(const char *) {}
  void print(int) {}
  void println(double) {}
};
extern HardwareSerial Serial;
void delay(unsigned long ms);
"""


@pytest.mark.parametrize("name", NAMES)
def test_arduino_library(packages: Path, name: str, tmp_path: Path) -> None:
    d = packages / f"{name}-arduino"
    props = dict(line.split("=", 1) for line in
                 (d / "library.properties").read_text().splitlines() if "=" in line)
    for key in ("name", "version", "author", "maintainer", "sentence", "paragraph", "category",
                "architectures", "includes"):
        assert props.get(key), key
    assert props["includes"] == f"{name}.h" and (d / "src" / f"{name}.h").is_file()
    assert not [p for p in (d / "src").rglob("*") if p.is_dir()], "src/ must be flat"
    # arduino-cli: the library's src/ compiled flat with -Isrc (gcc for .c, g++ for the sketch)
    _cc("arm-none-eabi-gcc", ["-std=gnu11", "-Os", *M4, *WARN, "-Isrc"], _c_files(d / "src"), d)
    (tmp_path / "Arduino.h").write_text(ARDUINO_H)
    sketch = tmp_path / f"{name}.ino.cpp"  # what the Arduino builder makes of the .ino
    sketch.write_text("#include <Arduino.h>\n" +
                      (d / "examples" / name / f"{name}.ino").read_text())
    _cc("arm-none-eabi-g++", ["-std=gnu++11", "-Os", *M4, *WARN, "-fno-exceptions",
                              "-fno-rtti", f"-I{tmp_path}", "-Isrc"], [sketch], d)


@pytest.mark.parametrize("name", NAMES)
def test_esp_idf_component(packages: Path, name: str) -> None:
    d = packages / f"{name}-esp-idf"
    cmake = (d / "CMakeLists.txt").read_text()
    assert "idf_component_register(" in cmake and 'INCLUDE_DIRS "include"' in cmake
    srcs = re.findall(r'"(src/[^"]+\.c)"', cmake)
    assert sorted(srcs) == sorted(f"src/{p.name}" for p in _c_files(d / "src"))
    manifest = yaml.safe_load((d / "idf_component.yml").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+", manifest["version"]) and manifest["description"]
    # ESP32-C3 (RISC-V): ESP-IDF's C flags, the component's INCLUDE_DIRS and PRIV_INCLUDE_DIRS
    flags = ["-march=rv32imc_zicsr_zifencei", "-mabi=ilp32", "--specs=picolibc.specs",
             "-std=gnu17", "-Os", "-ffunction-sections", "-fdata-sections", *WARN,
             "-Iinclude", "-Isrc"]
    _cc("riscv64-unknown-elf-gcc", flags, [d / s for s in srcs], d)
    _cc("riscv64-unknown-elf-gcc", flags[:-1], [d / "examples" / "main" / "main.c"], d)


@pytest.mark.parametrize("name", NAMES)
def test_platformio_library(packages: Path, name: str) -> None:
    d = packages / f"{name}-platformio"
    manifest = json.loads((d / "library.json").read_text())
    assert manifest["name"] == f"aotc_{name}" and manifest["version"] == "1.0.0"
    build = manifest["build"]
    assert (d / build["srcDir"]).is_dir() and (d / build["includeDir"]).is_dir()
    # PlatformIO's library builder: includeDir on the path, srcDir compiled, build.flags added
    flags = ["-std=gnu11", "-Os", *M4, *WARN, f"-I{build['includeDir']}", *build["flags"]]
    _cc("arm-none-eabi-gcc", flags, _c_files(d / build["srcDir"]), d)
    _cc("arm-none-eabi-gcc", flags, [d / "examples" / name / "main.c"], d)


def test_packages_are_deterministic_and_refuse_bad_input(packages: Path) -> None:
    for fmt in FORMATS:
        res = _aotc("package", "kws", "--format", fmt, "-o", f"again-{fmt}", cwd=packages)
        assert res.returncode == 0, res.stderr
        one, two = packages / f"kws-{fmt}", packages / f"again-{fmt}"
        files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(two) for p in two.rglob("*") if p.is_file())
        for rel in files:
            assert (one / rel).read_bytes() == (two / rel).read_bytes(), (fmt, rel)
    res = _aotc("package", "kws", "--format", "yocto", "-o", "x", cwd=packages)
    assert res.returncode == 2 and "unknown package format 'yocto'" in res.stderr
    res = _aotc("package", "nowhere", "--format", "zephyr", "-o", "x", cwd=packages)
    assert res.returncode == 2 and "not an aotc bundle" in res.stderr
    res = _aotc("package", "kws", "--format", "zephyr", "-o", "kws/inside", cwd=packages)
    assert res.returncode == 2 and "outside the bundle directory" in res.stderr
