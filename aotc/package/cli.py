"""The `aotc package` command and `aotc compile --package FORMAT`: parsers and handlers, kept
out of aotc/cli.py."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FORMAT_HELP = "zephyr, cmsis-pack, arduino, esp-idf or platformio (docs/firmware.md)"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("package", help="turn a bundle into a Zephyr module, CMSIS-Pack, Arduino "
                       "library, ESP-IDF component or PlatformIO library")
    p.add_argument("bundle", help="the bundle directory `aotc compile -o` wrote")
    p.add_argument("--format", required=True, metavar="FORMAT", help=FORMAT_HELP)
    p.add_argument("-o", "--output", required=True, help="the package directory to write")
    _options(p)


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--package-version", default="1.0.0", metavar="X.Y.Z",
                   help="the package's version (default 1.0.0)")
    p.add_argument("--package-vendor", default="aotc", metavar="NAME",
                   help="CMSIS-Pack vendor (default aotc)")
    p.add_argument("--package-url", default="./", metavar="URL",
                   help="CMSIS-Pack <url>: where the .pdsc and .pack are published (default ./)")


def add_compile_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--package", action="append", default=[], metavar="FORMAT",
                   help="also write the bundle as this package into OUTPUT-FORMAT (repeatable): "
                        + FORMAT_HELP)
    _options(p)


def _write(bundle: str | Path, fmt: str, out: str | Path, args: argparse.Namespace) -> None:
    import re

    from aotc.errors import AotcError
    from aotc.package import PackageOptions, write_package

    if not re.fullmatch(r"\d+\.\d+\.\d+", args.package_version):
        raise AotcError(f"--package-version expects X.Y.Z, got {args.package_version!r}")
    if not re.fullmatch(r"[-_A-Za-z0-9]+", args.package_vendor):
        raise AotcError(f"--package-vendor: letters, digits, - and _ only, got "
                        f"{args.package_vendor!r}")
    opts = PackageOptions(args.package_version, args.package_vendor, args.package_url)
    try:
        files = write_package(bundle, fmt, out, opts)
    except OSError as e:
        raise AotcError(f"cannot write the package to {out}: {e.strerror or e}") from None
    print(f"aotc: wrote {fmt} package {out} ({len(files)} files)", file=sys.stderr)


def cmd_package(args: argparse.Namespace, argv: Sequence[str]) -> int:
    _write(args.bundle, args.format, args.output, args)
    return 0


def after_compile(args: argparse.Namespace) -> None:
    """compile --package FORMAT: each package beside the bundle, in OUTPUT-FORMAT."""
    bundle = Path(args.output).resolve()
    for fmt in args.package:
        _write(args.output, fmt, bundle.parent / f"{bundle.name}-{fmt}", args)
