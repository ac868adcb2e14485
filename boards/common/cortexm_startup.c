/* Cortex-M startup shared by the aotc boards: vector table, Reset_Handler, fault report.
 *
 * A board's startup.c defines AOTC_STARTUP_FPU (1 when the core has an FPU or MVE) and includes
 * this file. Reset_Handler enables the FPU before any C code can touch it, copies .data, zeroes
 * .bss (which holds the arena), opens the semihosting handles of newlib's rdimon and ends with
 * exit(main()), so main's status becomes QEMU's exit code (SYS_EXIT_EXTENDED).
 * Faults print the fault status and the stacked PC via semihosting and exit with status 250.
 */
#include <stdint.h>
#include <stdlib.h>

#ifndef AOTC_STARTUP_FPU
#error "define AOTC_STARTUP_FPU (0 or 1) before including cortexm_startup.c"
#endif

#define AOTC_FAULT_EXIT_STATUS 250

/* Symbols from the board's link.ld. */
extern uint32_t __data_load__[], __data_start__[], __data_end__[];
extern uint32_t __bss_start__[], __bss_end__[], __StackTop[];

extern int main(void);
extern void initialise_monitor_handles(void);

void Reset_Handler(void);
void Fault_Handler(void);

/* newlib's exit() runs __libc_fini_array, which calls _fini; there is no C++ here. */
void _init(void) {}
void _fini(void) {}

/* Word 0: initial SP; word 1: reset vector; the rest: every exception stops the program. */
__attribute__((section(".vectors"), used)) const uintptr_t aotc_vectors[16] = {
    (uintptr_t)__StackTop,     (uintptr_t)Reset_Handler, (uintptr_t)Fault_Handler, /* NMI */
    (uintptr_t)Fault_Handler,  /* HardFault */           (uintptr_t)Fault_Handler, /* MemManage */
    (uintptr_t)Fault_Handler,  /* BusFault */            (uintptr_t)Fault_Handler, /* UsageFault */
    (uintptr_t)Fault_Handler,  /* SecureFault (v8-M) */  0, 0, 0,
    (uintptr_t)Fault_Handler,  /* SVCall */              (uintptr_t)Fault_Handler, /* DebugMon */
    0, (uintptr_t)Fault_Handler, /* PendSV */            (uintptr_t)Fault_Handler, /* SysTick */
};

__attribute__((noreturn)) void Reset_Handler(void)
{
#if AOTC_STARTUP_FPU
    /* CPACR: full access to CP10/CP11 (FPU and MVE); without it the first VFP instruction
     * raises a NOCP UsageFault. */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    const uint32_t *src = __data_load__;
    for (uint32_t *dst = __data_start__; dst < __data_end__;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = __bss_start__; dst < __bss_end__;) {
        *dst++ = 0;
    }
    initialise_monitor_handles();
    exit(main());
}

static uint32_t semihost_call(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static void put_hex(char *dst, uint32_t value)
{
    for (int i = 7; i >= 0; i--) {
        dst[i] = "0123456789abcdef"[value & 0xFu];
        value >>= 4;
    }
}

/* Reports through raw semihosting calls: libc state may be what broke. `frame` is the stacked
 * exception frame: r0 r1 r2 r3 r12 lr pc xpsr. */
__attribute__((noreturn, used)) static void fault_report(const uint32_t *frame)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    char msg[] = "aotc: fault, exception xxxxxxxx cfsr xxxxxxxx pc xxxxxxxx\n";
    put_hex(msg + 23, ipsr & 0x1FFu);
#if defined(__ARM_ARCH_6M__)
    put_hex(msg + 37, 0); /* ARMv6-M has no CFSR */
#else
    put_hex(msg + 37, *(volatile uint32_t *)0xE000ED28u);
#endif
    put_hex(msg + 49, frame[6]);
    semihost_call(0x04u /* SYS_WRITE0 */, msg);
    const uint32_t block[2] = {0x20026u /* ADP_Stopped_ApplicationExit */, AOTC_FAULT_EXIT_STATUS};
    semihost_call(0x20u /* SYS_EXIT_EXTENDED */, block);
    for (;;) {
    }
}

/* Only MSP is ever used, so the frame is at MSP. bl (not b) for range on ARMv6-M. */
__attribute__((naked)) void Fault_Handler(void)
{
    __asm__ volatile("mrs r0, msp\n\tbl fault_report");
}
