/* Startup for cortex-m4f (QEMU mps2-an386): single-precision FPU, enabled before main. */
#define AOTC_STARTUP_FPU 1
#include "../common/cortexm_startup.c"
