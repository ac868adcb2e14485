# rv32imc (RV32IMC, ilp32 soft float): riscv64-unknown-elf-gcc + picolibc with semihosting.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR riscv32)
set(CMAKE_C_COMPILER riscv64-unknown-elf-gcc)
set(CMAKE_ASM_COMPILER riscv64-unknown-elf-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

# Plain rv32imc (not rv32imc_zicsr): the zicsr suffix breaks multilib selection in gcc 12;
# startup.S enables zicsr with `.option arch, +zicsr` instead.
set(AOTC_MCU_FLAGS "-march=rv32imc -mabi=ilp32 -mcmodel=medany")
set(CMAKE_C_FLAGS_INIT
    "${AOTC_MCU_FLAGS} --specs=picolibc.specs -ffunction-sections -fdata-sections -ffp-contract=off")
set(CMAKE_ASM_FLAGS_INIT "${AOTC_MCU_FLAGS}")
# Own _start (startup.S); picolibc's semihost library provides stdio and exit. The link line
# also gets CMAKE_C_FLAGS, so --specs=picolibc.specs must not be repeated here.
set(CMAKE_EXE_LINKER_FLAGS_INIT
    "${AOTC_MCU_FLAGS} --oslib=semihost -nostartfiles -Wl,--gc-sections")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
