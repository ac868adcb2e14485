/* QEMU TCG plugin (plugin API version 1, QEMU 7.2): counts executed guest instructions.
 *
 * Args: out=FILE (required) receives "total N", one "range NAME N" line per range and one
 *       "call NAME N" line per range of kind call;
 *       ranges=FILE (optional) has lines "NAME LO HI [KIND]" (hex or decimal, HI exclusive).
 *       KIND self (the default): "range NAME N" counts the instructions inside [LO, HI).
 *       KIND call: the same, and "call NAME N" counts every instruction from each entry at LO
 *       until control is in a range of kind caller, callees (libm, soft-float helpers,
 *       memcpy) included: a kernel called by the run function. KIND caller: the same as self,
 *       and the range calls return to (the run function).
 *       enter=ADDR, caller=LO-HI (optional, together): "window N" counts every instruction
 *       from each execution of ADDR (a function's entry) until control is back in the caller's
 *       range LO-HI, callees included.
 *       blocks=1 (optional): one line "block PC N END CONTEXT COUNT FALLTHROUGH" per executed
 *       translation block and context: PC its first instruction, N its instructions, END the
 *       address after its last, COUNT its executions in CONTEXT (the name of the call range
 *       being counted, "@run" inside the window outside calls, "@outside" elsewhere) and
 *       FALLTHROUGH how many of them were followed by the TB at END (its last branch, if any,
 *       was not taken). The cycle model (aotc/targets/cycles) prices each block.
 * The total is a TB-level inline add (free); a range costs one inline add per instruction
 * inside it, so only the instructions of the listed ranges pay for per-instruction counting.
 * The window, the calls and blocks= cost one callback per executed TB. A function entry and a return
 * address both start a TB, so TB granularity is exact. A call stays with the first range
 * entered until control is back in a caller range, so what it calls in turn (a clone such as
 * k.part.0, a thunk gcc left for a folded function) is part of it: calls do not nest. The
 * code measured has no recursion, so reaching a caller range means the call has returned.
 * All counts are exact and repeatable. Do not combine with -icount (partial TBs are
 * re-executed).
 * Debian ships no qemu-plugin.h, so the few API declarations are written out below; they match
 * upstream include/qemu/qemu-plugin.h for QEMU_PLUGIN_VERSION 1.
 * Build: cc -O2 -shared -fPIC -fvisibility=hidden -o libinsncount.so insncount.c
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- QEMU plugin API, version 1 --- */
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
                                              void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op, void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                    void *userdata);
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

/* --- counters --- */
enum range_kind { KIND_SELF, KIND_CALL, KIND_CALLER };

struct range {
    char name[128];
    uint64_t lo, hi;
    enum range_kind kind;
    uint64_t count; /* instructions inside [lo, hi) */
    uint64_t call;  /* KIND_CALL: instructions of the calls entered at lo, callees included */
};

static uint64_t total;
static struct range *ranges;
static size_t n_ranges;
static bool calls_wanted; /* some range has KIND_CALL */
static char *out_path;

/* The window: the TB at `enter` opens it, a TB inside [caller_lo, caller_hi) closes it. */
static bool window_wanted, window_open;
static uint64_t enter_pc, caller_lo, caller_hi, window;
/* The call being counted: a range of KIND_CALL, NULL outside every call. */
static struct range *current_call;

/* userdata of a TB: its instruction count, what its first address opens or closes, and the
 * index + 1 of the KIND_CALL range it enters (0: none). TCG translates at most 512
 * instructions per TB, so the count fits in TB_COUNT_BITS. Single vCPU. */
#define TB_ENTERS 1u       /* starts at enter=: opens the window */
#define TB_IN_CALLER 2u    /* inside caller=: closes the window */
#define TB_IN_RETURN 4u    /* inside a KIND_CALLER range: ends the current call */
#define TB_COUNT_SHIFT 3
#define TB_COUNT_BITS 13
#define TB_CALL_SHIFT (TB_COUNT_SHIFT + TB_COUNT_BITS)

/* blocks=: one record per translated TB, with one cell per context it executed in. A TB
 * translated again (after a flush) gets a new record; the Python side merges them by PC. */
struct cell {
    long context; /* index + 1 of the KIND_CALL range, 0 in the window outside calls, -1 */
    uint64_t count, fallthrough;
    struct cell *next;
};

struct block {
    uint64_t pc, end;
    uintptr_t flags; /* as the userdata of tb_exec */
    struct cell *cells;
    struct block *next;
};

static bool blocks_wanted;
static struct block *blocks;
static struct cell *previous; /* the cell of the TB executed last */
static uint64_t previous_end;

static void track(uintptr_t v)
{
    uint64_t n = (v >> TB_COUNT_SHIFT) & ((1u << TB_COUNT_BITS) - 1u);
    uintptr_t entered = v >> TB_CALL_SHIFT;
    if (v & TB_ENTERS) {
        window_open = true;
    } else if (v & TB_IN_CALLER) {
        window_open = false;
    }
    if (window_open) {
        window += n;
    }
    if (v & (TB_IN_RETURN | TB_IN_CALLER)) { /* caller=: a call the run function tail-called */
        current_call = NULL;
    } else if (entered != 0 && current_call == NULL) {
        current_call = &ranges[entered - 1];
    }
    if (current_call != NULL) {
        current_call->call += n;
    }
}

static void tb_exec(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    track((uintptr_t)userdata);
}

static void block_exec(unsigned int vcpu_index, void *userdata)
{
    struct block *b = userdata;
    struct cell *c;
    long context;
    (void)vcpu_index;
    track(b->flags);
    context = current_call != NULL ? (long)(current_call - ranges) + 1 : window_open ? 0 : -1;
    if (previous != NULL && previous_end == b->pc) {
        previous->fallthrough++;
    }
    for (c = b->cells; c != NULL && c->context != context; c = c->next) {
    }
    if (c == NULL) {
        c = calloc(1, sizeof *c);
        if (c == NULL) {
            abort(); /* out of host memory: no count would be right */
        }
        c->context = context;
        c->next = b->cells;
        b->cells = c;
    }
    c->count++;
    previous = c;
    previous_end = b->end;
}

static uintptr_t tb_flags(uint64_t pc)
{
    uintptr_t flags = 0;
    if (window_wanted) {
        flags |= (pc == enter_pc ? TB_ENTERS : 0u) |
                 (pc >= caller_lo && pc < caller_hi ? TB_IN_CALLER : 0u);
    }
    for (size_t r = 0; r < n_ranges; r++) {
        if (ranges[r].kind == KIND_CALLER && pc >= ranges[r].lo && pc < ranges[r].hi) {
            flags |= TB_IN_RETURN;
        } else if (ranges[r].kind == KIND_CALL && pc == ranges[r].lo) {
            flags |= (uintptr_t)(r + 1) << TB_CALL_SHIFT;
        }
    }
    return flags;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &total, n);
    if (blocks_wanted && n > 0) {
        struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
        struct block *b = calloc(1, sizeof *b);
        if (b == NULL) {
            abort();
        }
        b->pc = qemu_plugin_tb_vaddr(tb);
        b->end = qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last);
        b->flags = tb_flags(b->pc) | (uintptr_t)n << TB_COUNT_SHIFT;
        b->next = blocks;
        blocks = b;
        qemu_plugin_register_vcpu_tb_exec_cb(tb, block_exec, QEMU_PLUGIN_CB_NO_REGS, b);
    } else if (window_wanted || calls_wanted) {
        uintptr_t v = tb_flags(qemu_plugin_tb_vaddr(tb)) | (uintptr_t)n << TB_COUNT_SHIFT;
        qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, (void *)v);
    }
    for (size_t i = 0; i < n && n_ranges > 0; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t pc = qemu_plugin_insn_vaddr(insn);
        for (size_t r = 0; r < n_ranges; r++) {
            if (pc >= ranges[r].lo && pc < ranges[r].hi) {
                qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                           &ranges[r].count, 1);
            }
        }
    }
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
    FILE *f = fopen(out_path, "w");
    (void)id;
    (void)userdata;
    if (f == NULL) {
        fprintf(stderr, "insncount: cannot write %s\n", out_path);
        return;
    }
    fprintf(f, "total %" PRIu64 "\n", total);
    if (window_wanted) {
        fprintf(f, "window %" PRIu64 "\n", window);
    }
    for (size_t r = 0; r < n_ranges; r++) {
        fprintf(f, "range %s %" PRIu64 "\n", ranges[r].name, ranges[r].count);
        if (ranges[r].kind == KIND_CALL) {
            fprintf(f, "call %s %" PRIu64 "\n", ranges[r].name, ranges[r].call);
        }
    }
    for (struct block *b = blocks; b != NULL; b = b->next) {
        size_t n = (b->flags >> TB_COUNT_SHIFT) & ((1u << TB_COUNT_BITS) - 1u);
        for (struct cell *c = b->cells; c != NULL; c = c->next) {
            const char *context = c->context > 0    ? ranges[c->context - 1].name
                                  : c->context == 0 ? "@run"
                                                    : "@outside";
            fprintf(f, "block %#" PRIx64 " %zu %#" PRIx64 " %s %" PRIu64 " %" PRIu64 "\n", b->pc,
                    n, b->end, context, c->count, c->fallthrough);
        }
    }
    fclose(f);
}

static int load_ranges(const char *path)
{
    char line[512];
    size_t cap = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "insncount: cannot read %s\n", path);
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        struct range r = {0};
        char lo[64], hi[64], kind[16] = "self";
        int fields;
        if (line[0] == '#' || line[0] == '\n') {
            continue;
        }
        fields = sscanf(line, "%127s %63s %63s %15s", r.name, lo, hi, kind);
        if (fields < 3 || (strcmp(kind, "self") != 0 && strcmp(kind, "call") != 0 &&
                           strcmp(kind, "caller") != 0)) {
            fprintf(stderr, "insncount: bad line in %s (want NAME LO HI [self|call|caller]): %s",
                    path, line);
            fclose(f);
            return -1;
        }
        r.lo = strtoull(lo, NULL, 0);
        r.hi = strtoull(hi, NULL, 0);
        r.kind = strcmp(kind, "call") == 0     ? KIND_CALL
                 : strcmp(kind, "caller") == 0 ? KIND_CALLER
                                               : KIND_SELF;
        calls_wanted = calls_wanted || r.kind == KIND_CALL;
        if (n_ranges == cap) {
            cap = cap ? 2 * cap : 64;
            ranges = realloc(ranges, cap * sizeof *ranges);
            if (ranges == NULL) {
                fclose(f);
                return -1;
            }
        }
        ranges[n_ranges++] = r;
    }
    fclose(f);
    return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0) {
            out_path = strdup(argv[i] + 4);
        } else if (strncmp(argv[i], "ranges=", 7) == 0) {
            if (load_ranges(argv[i] + 7) != 0) {
                return -1;
            }
        } else if (strncmp(argv[i], "blocks=", 7) == 0) {
            blocks_wanted = strcmp(argv[i] + 7, "1") == 0 || strcmp(argv[i] + 7, "on") == 0;
        } else if (strncmp(argv[i], "enter=", 6) == 0) {
            enter_pc = strtoull(argv[i] + 6, NULL, 0);
            window_wanted = true;
        } else if (strncmp(argv[i], "caller=", 7) == 0) {
            char *dash = NULL;
            caller_lo = strtoull(argv[i] + 7, &dash, 0);
            caller_hi = *dash == '-' ? strtoull(dash + 1, NULL, 0) : 0;
        } else {
            fprintf(stderr, "insncount: unknown argument %s (use out=FILE, ranges=FILE, "
                            "enter=ADDR, caller=LO-HI, blocks=1)\n", argv[i]);
            return -1;
        }
    }
    if (window_wanted && caller_hi <= caller_lo) {
        fprintf(stderr, "insncount: enter=ADDR needs caller=LO-HI\n");
        return -1;
    }
    if (out_path == NULL) {
        fprintf(stderr, "insncount: out=FILE is required\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
