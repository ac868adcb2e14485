# Shared by the Cortex-M boards' toolchain files, which set AOTC_MCU_FLAGS and include this:
# arm-none-eabi-gcc + newlib-nano with rdimon semihosting.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

# -ffp-contract=off: no fused multiply-add, so float results match numpy bit for bit.
set(CMAKE_C_FLAGS_INIT "${AOTC_MCU_FLAGS} -ffunction-sections -fdata-sections -ffp-contract=off")
set(CMAKE_ASM_FLAGS_INIT "${AOTC_MCU_FLAGS}")
# Own Reset_Handler (boards/common/cortexm_startup.c): rdimon's crt0 crashes on QEMU M-profile.
set(CMAKE_EXE_LINKER_FLAGS_INIT
    "${AOTC_MCU_FLAGS} --specs=nano.specs --specs=rdimon.specs -nostartfiles -Wl,--gc-sections")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
