/* Startup for cortex-m4f-pools (QEMU mps2-an386): single-precision FPU, enabled before main.
 * The memory pools' sections are NOLOAD and not zeroed: the arena needs no initial value. */
#define AOTC_STARTUP_FPU 1
#include "../common/cortexm_startup.c"
