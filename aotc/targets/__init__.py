"""Targets: where a bundle runs. Board definitions (boards/<name>/board.toml), the firmware
build (CMake, or the fast build from a cached recipe), the QEMU runner, the host build loaded
through cffi, external libraries built for either, and the instruction measurement."""
