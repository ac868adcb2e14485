/* Startup for rp2040: see boards/common/cortexm_startup.c. */
#define AOTC_STARTUP_FPU 0
#include "../common/cortexm_startup.c"
