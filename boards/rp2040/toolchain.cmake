# rp2040 (Cortex-M0+, ARMv6-M, soft float): arm-none-eabi-gcc + newlib-nano (boards/common/arm-none-eabi.cmake).
set(AOTC_MCU_FLAGS "-mcpu=cortex-m0plus -mthumb -mfloat-abi=soft")
include("${CMAKE_CURRENT_LIST_DIR}/../common/arm-none-eabi.cmake")
