# cortex-m55 (Cortex-M55 with Helium (MVE) and FPU): arm-none-eabi-gcc + newlib-nano (boards/common/arm-none-eabi.cmake).
set(AOTC_MCU_FLAGS "-mcpu=cortex-m55 -mthumb -mfpu=auto -mfloat-abi=hard")
include("${CMAKE_CURRENT_LIST_DIR}/../common/arm-none-eabi.cmake")
