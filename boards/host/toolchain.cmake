# host: the system C compiler, native executable (no cross compilation, no link script).
# -ffp-contract=off keeps float results bit-identical to numpy where the CPU has FMA.
set(CMAKE_C_FLAGS_INIT "-ffp-contract=off")
