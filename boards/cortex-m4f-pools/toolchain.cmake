# cortex-m4f-pools (the cortex-m4f core; Cortex-M4 with single-precision FPU): arm-none-eabi-gcc + newlib-nano (boards/common/arm-none-eabi.cmake).
set(AOTC_MCU_FLAGS "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard")
include("${CMAKE_CURRENT_LIST_DIR}/../common/arm-none-eabi.cmake")
