/* rv32imc startup for QEMU virt (-bios none): execution begins at _start (0x80000000).
 *
 * Sets gp, sp, tp (picolibc's TLS block) and mtvec, copies .data/.tdata, zeroes .tbss/.bss
 * (which holds the arena), then exit(main()); picolibc's exit reaches QEMU through semihosting,
 * so main's status becomes QEMU's exit code. A trap prints mcause and mepc and exits with 250.
 */
    .option arch, +zicsr   /* csrr/csrw under plain -march=rv32imc (multilib selection) */

    .section .text.init.enter, "ax", @progbits
    .globl _start
    .type _start, @function
_start:
    .option push
    .option norelax
    la      gp, __global_pointer$
    .option pop
    la      sp, __stack
    la      t0, aotc_trap
    csrw    mtvec, t0

    la      a0, __data_start
    la      a1, __data_source
    la      a2, __data_end
1:  bgeu    a0, a2, 2f
    lw      t0, 0(a1)
    sw      t0, 0(a0)
    addi    a0, a0, 4
    addi    a1, a1, 4
    j       1b
2:  la      a0, __bss_start
    la      a1, __bss_end
3:  bgeu    a0, a1, 4f
    sw      zero, 0(a0)
    addi    a0, a0, 4
    j       3b
4:  la      tp, __tls_base
    call    main
    call    exit
    .size _start, . - _start

/* a0 = operation, a1 = argument; the magic sequence must be uncompressed and on one page. */
    .text
    .option push
    .option norvc
    .balign 16
aotc_semihost:
    slli    zero, zero, 0x1f
    ebreak
    srai    zero, zero, 7
    ret
    .option pop

/* Writes the 8 hex digits of a0 to the buffer at a1. Clobbers t0-t2. */
aotc_hex8:
    li      t2, 8
1:  srli    t0, a0, 28
    la      t1, aotc_hexdigits
    add     t1, t1, t0
    lbu     t1, 0(t1)
    sb      t1, 0(a1)
    slli    a0, a0, 4
    addi    a1, a1, 1
    addi    t2, t2, -1
    bnez    t2, 1b
    ret

    .balign 4
aotc_trap:
    la      sp, __stack        /* the stack may be what broke */
    csrr    a0, mcause
    la      a1, aotc_trap_msg + 18
    call    aotc_hex8
    csrr    a0, mepc
    la      a1, aotc_trap_msg + 32
    call    aotc_hex8
    li      a0, 0x04           /* SYS_WRITE0 */
    la      a1, aotc_trap_msg
    call    aotc_semihost
    li      a0, 0x20           /* SYS_EXIT_EXTENDED */
    la      a1, aotc_exit_block
    call    aotc_semihost
5:  j       5b

    .section .rodata.aotc_startup, "a"
aotc_hexdigits:
    .ascii  "0123456789abcdef"
    .balign 4
aotc_exit_block:
    .word   0x20026, 250       /* ADP_Stopped_ApplicationExit, status */

    .section .data.aotc_startup, "aw"
aotc_trap_msg:
    .asciz  "aotc: trap mcause xxxxxxxx mepc xxxxxxxx\n"
