# cortex-m33 (Cortex-M33 with single-precision FPU and DSP): arm-none-eabi-gcc + newlib-nano (boards/common/arm-none-eabi.cmake).
set(AOTC_MCU_FLAGS "-mcpu=cortex-m33 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard")
include("${CMAKE_CURRENT_LIST_DIR}/../common/arm-none-eabi.cmake")
