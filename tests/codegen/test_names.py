"""c_ident / c_comment / c_string / Namer: the one door from model strings into C."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from aotc.names import C_KEYWORDS, Namer, c_comment, c_ident, c_string, is_reserved

IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
HOSTILE = ["", "_", "__", "1abc", "a-b", "a b", "int", "for", "main", "while", "NULL", "size_t",
           "uint8_t", "AOTC_OK", "aotc_status_str", "k0_conv", "NAN", "INT32_MAX", "M_PI",
           "é", "x\ny", "*/", "??/", "a\\b", '"q"', "_Bool", "__reserved", "_Upper", "a" * 80]


@pytest.mark.parametrize("text", HOSTILE)
def test_c_ident_is_a_valid_unreserved_identifier(text: str) -> None:
    s = c_ident(text)
    assert IDENT.fullmatch(s), s
    assert not is_reserved(s) and s not in C_KEYWORDS, s
    assert not s.startswith("_") and "__" not in s, s  # reserved for the implementation
    assert len(s) <= 48


def test_c_ident_keeps_ordinary_names_and_prefixes_the_rest() -> None:
    assert c_ident("conv1_weight") == "conv1_weight"
    assert c_ident("input.1") == "input_1"
    assert c_ident("Conv/kernel:0") == "Conv_kernel_0"
    assert c_ident("1abc") == "v_1abc"
    assert c_ident("int") == "v_int"
    assert c_ident("int", "in") == "in_int"
    assert c_ident("size_t") == "v_size_t"
    assert c_ident("k3_gemm") == "v_k3_gemm"
    assert c_ident("") == "v"
    assert c_ident("kernel") == "kernel"  # only k<digits>_ is the kernels' namespace


def test_namer_is_unique_stable_and_respects_reservations() -> None:
    namer = Namer({"a", "arena"}, ("net_", "NET_"))
    first = namer("in:a-b", "a-b")
    assert first == "a_b"
    assert namer("in:a_b", "a_b") == "a_b_1"      # same sanitised text, another key
    assert namer("in:a-b", "a-b") == first        # same key, same name
    assert namer("in:a", "a", "in") == "a_1"      # reserved exactly
    assert namer("in:w", "net_w_conv", "in") == "in_net_w_conv"  # the bundle's own prefix
    assert namer("out:x", "NET_ARENA_SIZE", "out") == "out_NET_ARENA_SIZE"
    names = [namer(f"k{i}", "same") for i in range(5)]
    assert names == ["same", "same_1", "same_2", "same_3", "same_4"]


def test_namer_with_a_prefix_that_is_itself_reserved() -> None:
    namer = Namer(reserved_prefixes=("in_", "IN_"))
    assert namer("k", "in_x", "in") == "v_in_x"


@pytest.mark.parametrize("text", HOSTILE + ["/* a */ b */", "*/*/*/", "?????/", "a*//b",
                                            "tab\there", "nul\0x", "\u2028"])
def test_c_comment_cannot_end_a_comment_or_form_a_trigraph(text: str) -> None:
    s = c_comment(text)
    assert "*/" not in s and "/*" not in s, s
    assert "??" not in s, s
    assert "\\" not in s, s
    assert all(32 <= ord(ch) < 127 for ch in s), s
    # Framed the way the templates frame it, the text stays one comment.
    framed = f"/* {s} */"
    assert framed.count("*/") == 1 and framed.endswith("*/")


def test_c_comment_is_readable_and_bounded() -> None:
    assert c_comment("Conv+Relu (conv1, relu1)") == "Conv+Relu (conv1, relu1)"
    assert c_comment("a */ b") == "a * / b"
    assert len(c_comment("x" * 1000)) == 160


def test_c_string_has_no_quote_or_escape() -> None:
    s = c_string('say "hi"\\n??/')
    assert '"' not in s and "\\" not in s and "??" not in s


def test_hostile_strings_survive_a_strict_compile(tmp_path: Path) -> None:
    # Everything the sanitisers make, used the way the generated code uses it.
    namer = Namer()
    lines = ["#include <stddef.h>", "#include <stdint.h>", "#include <math.h>"]
    for k, text in enumerate(HOSTILE):
        ident = namer(str(k), text)
        lines.append(f"/* {c_comment(text)} */")
        lines.append(f'const char *{ident} = "{c_string(text)}";')
    src = tmp_path / "names.c"
    src.write_text("\n".join(lines) + "\n")
    res = subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                          "-Wtrigraphs", "-Wcomment", "-c", str(src), "-o",
                          str(tmp_path / "names.o")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
