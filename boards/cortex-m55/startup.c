/* Startup for cortex-m55: see boards/common/cortexm_startup.c. */
#define AOTC_STARTUP_FPU 1
#include "../common/cortexm_startup.c"
