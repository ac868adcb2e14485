/* Startup for cortex-m33: see boards/common/cortexm_startup.c. */
#define AOTC_STARTUP_FPU 1
#include "../common/cortexm_startup.c"
