/* Startup for cortex-m7: see boards/common/cortexm_startup.c. */
#define AOTC_STARTUP_FPU 1
#include "../common/cortexm_startup.c"
