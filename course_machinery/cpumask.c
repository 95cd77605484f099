/* cpumask: run a process as if on a smaller x86 CPU, at native speed (course_machinery/cpumask.py).
 *
 * Loaded with LD_PRELOAD; COURSE_CPU_MASK names the mask. Libraries (ONNX Runtime's MLAS, numpy,
 * PyTorch) pick their kernels from the CPUID instruction. On Linux CPUs with CPUID faulting
 * (cpuid_fault in /proc/cpuinfo) arch_prctl(ARCH_SET_CPUID, 0) makes CPUID raise SIGSEGV in this
 * thread and the threads it starts later. Our SIGSEGV handler runs the real CPUID, clears the
 * features the mask hides, writes the registers back and skips the instruction. The setting is reset
 * by execve; LD_PRELOAD is inherited, so child processes are masked again by this constructor.
 *
 * Programs install SIGSEGV handlers of their own later (Python's faulthandler, which ipykernel
 * enables). So sigaction() and signal() are wrapped for SIGSEGV: our handler stays installed, theirs
 * is remembered (and reported back as the old one), and every SIGSEGV that is not a CPUID fault is
 * passed on to it, so a real crash still crashes as it would have.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define ARCH_SET_CPUID 0x1012
#define BIT(n) (1u << (n))

/* The bits a mask clears: leaf 7 subleaf 0 EBX/ECX/EDX, leaf 7 subleaf 1 EAX/EDX. Both masks hide
 * AMX and AVX10, so both also empty the leaves that describe them (AMX tiles 0x1D, 0x1E; AVX10 0x24). */
struct mask {
    const char *name;
    uint32_t l7_ebx, l7_ecx, l7_edx, l71_eax, l71_edx;
};

/* AMX-BF16 (22), AMX-TILE (24), AMX-INT8 (25); AMX-FP16 (7.1 EAX 21); AMX-COMPLEX (7.1 EDX 8). */
#define AMX_EDX (BIT(22) | BIT(24) | BIT(25))
/* VEX extensions newer than both targets: AVX-VNNI (4), AVX-IFMA (23) in 7.1 EAX; AVX-VNNI-INT8 (4),
 * AVX-NE-CONVERT (5), AVX-VNNI-INT16 (10), AVX10 (19) in 7.1 EDX. */
#define NEW_VEX_EAX (BIT(4) | BIT(23))
#define NEW_VEX_EDX (BIT(4) | BIT(5) | BIT(10) | BIT(19))

static const struct mask MASKS[] = {
    /* Haswell-like, AVX2 + FMA: every AVX-512 (F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31;
     * VBMI 1, VBMI2 6, VNNI 11, BITALG 12, VPOPCNTDQ 14; 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, FP16 23;
     * BF16 7.1 EAX 5), GFNI 8, VAES 9, VPCLMULQDQ 10, all VNNI and AMX. */
    {"avx2",
     BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31),
     BIT(1) | BIT(6) | BIT(8) | BIT(9) | BIT(10) | BIT(11) | BIT(12) | BIT(14),
     BIT(2) | BIT(3) | BIT(8) | BIT(23) | AMX_EDX,
     NEW_VEX_EAX | BIT(5) | BIT(21),
     NEW_VEX_EDX | BIT(8)},
    /* AMD Zen 4-like: AVX-512 with VNNI and BF16 kept; AMX, AVX512-FP16 and the new VEX ones hidden. */
    {"avx512-vnni", 0, 0, BIT(23) | AMX_EDX, NEW_VEX_EAX | BIT(21), NEW_VEX_EDX | BIT(8)},
};

static const struct mask *active;     /* the mask in effect, NULL when none */
static struct sigaction next_handler; /* the program's SIGSEGV handler, which we chain to */
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);

static long set_cpuid(int enabled) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

/* The name of the mask in effect, or NULL: course_machinery.hardware asks, to report the truth. */
const char *course_cpumask_active(void) { return active ? active->name : NULL; }

static void mask_leaf(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    if (leaf == 7 && sub == 0) {
        r[1] &= ~active->l7_ebx, r[2] &= ~active->l7_ecx, r[3] &= ~active->l7_edx;
    } else if (leaf == 7 && sub == 1) {
        r[0] &= ~active->l71_eax, r[3] &= ~active->l71_edx;
    } else if (leaf == 0x1D || leaf == 0x1E || leaf == 0x24) {
        r[0] = r[1] = r[2] = r[3] = 0;
    }
}

/* Hand a SIGSEGV that is not ours to the program's handler, as the kernel would have. */
static void chain(int sig, siginfo_t *info, void *ctx) {
    struct sigaction h = next_handler;
    if (h.sa_flags & SA_RESETHAND) next_handler.sa_handler = SIG_DFL, next_handler.sa_flags = 0;
    if (h.sa_flags & SA_SIGINFO) {
        h.sa_sigaction(sig, info, ctx);
    } else if (h.sa_handler == SIG_IGN && info->si_code <= 0) {
        return; /* sent by kill/raise and ignored; a fault cannot be ignored (the kernel kills) */
    } else if (h.sa_handler == SIG_DFL || h.sa_handler == SIG_IGN) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        real_sigaction(SIGSEGV, &dfl, NULL); /* uninstall ourselves and die the default death: */
        raise(SIGSEGV);                      /* delivered at once (SA_NODEFER), or on return a */
    } else {                                 /* fault re-executes and faults again */
        h.sa_handler(sig);
    }
}

static void on_segv(int sig, siginfo_t *info, void *ctx) {
    ucontext_t *uc = ctx;
    greg_t *regs = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)regs[REG_RIP];
    /* A CPUID fault: a general protection fault (SI_KERNEL) on the bytes 0F A2. */
    if (!active || info->si_code != SI_KERNEL || ip[0] != 0x0F || ip[1] != 0xA2) {
        chain(sig, info, ctx);
        return;
    }
    int saved_errno = errno;
    uint32_t r[4], leaf = (uint32_t)regs[REG_RAX], sub = (uint32_t)regs[REG_RCX];
    sigset_t all, before; /* no other handler may run (and read CPUID unmasked) in between: */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    set_cpuid(1); /* let this thread run the real instruction, then make it fault again */
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
    set_cpuid(0);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    mask_leaf(leaf, sub, r);
    regs[REG_RAX] = r[0], regs[REG_RBX] = r[1], regs[REG_RCX] = r[2], regs[REG_RDX] = r[3];
    regs[REG_RIP] += 2;
    errno = saved_errno;
}

/* sigaction() and signal() for SIGSEGV only record the program's handler; everything else passes. */
int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!real_sigaction) real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    if (sig != SIGSEGV || !active) return real_sigaction(sig, act, old);
    if (old) *old = next_handler;
    if (act) next_handler = *act;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler) {
    static sighandler_t (*real_signal)(int, sighandler_t);
    if (!real_signal) real_signal = (sighandler_t(*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
    if (sig != SIGSEGV || !active) return real_signal(sig, handler);
    sighandler_t previous = next_handler.sa_handler; /* (sa_handler and sa_sigaction share storage) */
    memset(&next_handler, 0, sizeof next_handler);
    next_handler.sa_handler = handler;
    next_handler.sa_flags = SA_RESTART; /* glibc's signal(): BSD semantics */
    return previous;
}

__attribute__((constructor)) static void start(void) {
    const char *name = getenv("COURSE_CPU_MASK");
    if (!name || !*name) return; /* loaded without a mask: change nothing */
    const struct mask *m = NULL;
    for (size_t i = 0; i < sizeof MASKS / sizeof MASKS[0]; i++)
        if (strcmp(name, MASKS[i].name) == 0) m = &MASKS[i];
    if (!m) {
        fprintf(stderr, "cpumask: COURSE_CPU_MASK=%s is not a mask; expected avx2 or avx512-vnni.\n", name);
        _exit(2);
    }
    real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    struct sigaction ours = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK};
    sigemptyset(&ours.sa_mask);
    active = m;
    if (real_sigaction(SIGSEGV, &ours, &next_handler) != 0 || set_cpuid(0) != 0) {
        fprintf(stderr,
                "cpumask: cannot make CPUID fault here (arch_prctl(ARCH_SET_CPUID): %s); the CPU needs "
                "CPUID faulting (cpuid_fault in /proc/cpuinfo). Run without COURSE_CPU_MASK, or use "
                "qemu-x86_64 -cpu Haswell for functional checks.\n",
                strerror(errno));
        _exit(2);
    }
}
