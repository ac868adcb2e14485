# cortex-m7 (Cortex-M7 with double-precision FPU): arm-none-eabi-gcc + newlib-nano (boards/common/arm-none-eabi.cmake).
set(AOTC_MCU_FLAGS "-mcpu=cortex-m7 -mthumb -mfpu=fpv5-d16 -mfloat-abi=hard")
include("${CMAKE_CURRENT_LIST_DIR}/../common/arm-none-eabi.cmake")
