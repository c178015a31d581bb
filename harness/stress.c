// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED under load, for minutes (make stress).
 *
 * The checker (the 64-bit build, run without arguments) forks load
 * processes and samples them with many events at once, per task and
 * inherited, per CPU, grouped and sharing buffers (SET_OUTPUT), tiny
 * buffers read and never read, tracepoints on the way back to user space,
 * uprobes and uretprobes. The loads make and end threads, fork, exec (also
 * from threads that are not the leader), exit, take signals, run as compat
 * tasks (this program built with -m32, deferred_stress_32) and use
 * io_uring, while the checker opens, disables, closes and reopens events
 * on busy workers, moves them between CPUs and signals them. It reads every
 * buffer as it goes and checks, printing one TAP line per invariant:
 *
 *  - at most one PERF_RECORD_CALLCHAIN_DEFERRED per buffer per cookie;
 *  - a record whose first entry lies in a workload's known code is the
 *    stack the workload recorded itself: its functions note their own
 *    return addresses, and the user-mode part of every loop is asm whose
 *    range is known, so the frame-pointer walk from anywhere in it has one
 *    right answer (a record from anywhere else is counted, not judged);
 *  - every deferred sample meets the record with its tid and cookie in its
 *    family of buffers (one per CPU), unless records were lost there, or
 *    its event was disabled or closed during that kernel stay;
 *  - cookies are well formed and name one task; records carry
 *    PERF_RECORD_MISC_USER and respect sample_max_stack; deferred samples
 *    were taken in the kernel and hold no user part; io-wq workers and
 *    uprobe events never defer;
 *  - every worker finishes its quota of iterations (no livelock).
 *
 * The expected stacks do not depend on the task: every image of this
 * program has the same layout (the checker re-executes itself with
 * ADDR_NO_RANDOMIZE, which its loads and their execs inherit), and the
 * 32-bit program writes its own into the shared memory. The kernel's log
 * (no splat), leaks and perf's own summary are checked by the script that
 * runs this (harness/stress-guest).
 *
 * Built with frame pointers and no sibling calls (harness/build-selftests).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ucontext.h>

/* For deferred_util.h; this program reports through kselftest.h alone. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_uring.h"

#define ULL(x)			((unsigned long long)(x))
#define __STR(x)		#x
#define STR(x)			__STR(x)

#define STRESS_SECONDS		600
#define WORKER_SECONDS		1.0	/* a worker's quota, as loaded as calibrated */
#define NR_SLOTS		1024
#define MAX_RANGES		32
#define MAX_RETS		56
#define DEEP_FRAMES		40
#define READ_LEN		(64 << 10)
#define DEEP_READ_LEN		(16 << 10)
#define SLEEP_NS		50000
#define SMALL_QUOTA		16	/* exec'd images and children about to exit */
#define CALIBRATION		8	/* iterations timed per kind */
#define STALL_S			120	/* no iteration for this long: livelock */
#define URING_BATCH		4
#define MAX_CPUS		64
#define SA_RESTORER_FLAG	0x04000000

#ifdef __x86_64__
#define IMG			0
#else
#define IMG			1
#endif

/* What a worker does at the bottom of its call chain. */
enum kind {
	K_READ,		/* read() of /dev/zero: several samples per stay */
	K_GETPPID,	/* a short system call */
	K_YIELD,	/* sched_yield(): switches */
	K_SLEEP,	/* nanosleep(): sleeps */
	K_KILL,		/* tgkill() of itself: a signal, its handler, sigreturn */
	K_DEEP,		/* read() of /dev/zero, DEEP_FRAMES deeper */
	K_UPROBE,	/* calls stress_probed(), under a uprobe and a uretprobe */
	K_URING,	/* io_uring_enter(): NOPs and reads handed to io-wq */
	K_EXIT,		/* exit_group() */
	K_EXEC,		/* execve() of this program */
	NR_KINDS
};

/* Where in the known code a walk may start, and what it must find above. */
enum what {
	R_LOOP,		/* a leaf's asm loop: the leaf's frame is the innermost */
	R_SITE,		/* the instruction after one system call in C code */
	R_PROBED_ENTRY,	/* stress_probed() before its frame is set up, or after */
	R_PROBED_BODY,	/* stress_probed() with its frame */
};

/*
 * Shared between the checker, its loads and the 32-bit program: only
 * __u64 and pairs of __u32, so that the layout is the same for -m32.
 */
struct range {
	__u64 start, end;
	__u32 nret, kind;
	__u32 what, pad;
	__u64 ret[MAX_RETS];	/* return addresses, innermost first */
};

struct image {
	__u32 ready, nranges;
	__u64 shm_size;		/* sizeof(struct shm) as this image sees it */
	__u64 text_start, text_end;
	__u64 restorer_site;	/* after the rt_sigreturn system call */
	__u64 probe_off;	/* file offset of stress_probed() */
	__u64 rate[NR_KINDS];	/* iterations per second, idle machine */
	struct range r[MAX_RANGES];
};

struct slot {
	__u32 state, tid;	/* state: 0 free, 1 running */
	__u32 tgid, kind;
	__u64 quota, done, start_ns;
};

enum count {
	C_WORKERS,		/* workers started */
	C_FINISHED,		/* ... that finished their quota */
	C_ITERS,		/* ... and their iterations */
	C_THREADS,		/* threads made by the loads */
	C_FORKS,
	C_EXECS,		/* execve() made */
	C_EXEC_THREADS,		/* ... from a thread that was not the leader */
	C_EXEC_IMAGES,		/* images started by them */
	C_SIGNALS,		/* SIGUSR1 handled */
	C_SIG_ELSEWHERE,	/* ... that interrupted code outside the ranges */
	C_URING_OPS,		/* io_uring requests completed */
	C_URING_BAD,		/* ... that failed */
	C_ABNORMAL,		/* children that did not exit with 0 */
	C_NO_SLOT,
	NR_COUNTS
};

struct shm {
	__u64 stop;		/* the loads start no more workers */
	__u64 count[NR_COUNTS];
	struct image img[2];	/* 64-bit, 32-bit */
	struct slot slot[NR_SLOTS];
	char abnormal[160];	/* the first abnormal exit */
	unsigned int seed;	/* -S: where every thread's draws start from */
	unsigned int streams;	/* threads that drew so far */
};

static struct shm *shm;
static int shm_fd = -1;

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void count_add(int c, __u64 n)
{
	__atomic_fetch_add(&shm->count[c], n, __ATOMIC_RELAXED);
}

static bool stopping(void)
{
	return __atomic_load_n(&shm->stop, __ATOMIC_ACQUIRE);
}

static unsigned int rnd(void)
{
	static __thread unsigned int seed;

	/*
	 * Each thread its own stream, from the run's seed and the order the
	 * threads first draw in: a seed replays the draws, if not the
	 * scheduling they meet.
	 */
	if (!seed)
		seed = (shm->seed * 2654435761u) ^
		       (__atomic_add_fetch(&shm->streams, 1, __ATOMIC_RELAXED) * 40503u) ?: 1;
	return rand_r(&seed);
}

/*
 * stress_probed(): a function with a frame, called from the K_UPROBE loop,
 * with a uprobe on its first instruction and a uretprobe. Before its frame
 * is set up and after it is torn down, a walk misses its caller (the
 * frame-pointer walk at a function's edge); inside it, the walk finds the
 * call's return address, where a uretprobe put its trampoline.
 *
 * stress_restorer(): the signal handler's return, rt_sigreturn.
 */
#ifdef __x86_64__
asm(".pushsection .text\n"
	".type stress_probed, @function\n"
	"stress_probed:\n\t"
	"push %rbp\n\t"
	"mov %rsp, %rbp\n"
	"stress_probed_framed:\n\t"
	"mov $" STR(__NR_getppid) ", %eax\n\t"
	"syscall\n\t"
	"pop %rbp\n"
	"stress_probed_unframed:\n\t"
	"ret\n"
	"stress_probed_end:\n\t"
	".size stress_probed, .-stress_probed\n"
	".type stress_restorer, @function\n"
	"stress_restorer:\n\t"
	"mov $" STR(__NR_rt_sigreturn) ", %eax\n\t"
	"syscall\n"
	"stress_restorer_site:\n\t"
	"hlt\n\t"
	".size stress_restorer, .-stress_restorer\n"
	".popsection");
#else
asm(".pushsection .text\n"
	".type stress_probed, @function\n"
	"stress_probed:\n\t"
	"push %ebp\n\t"
	"mov %esp, %ebp\n"
	"stress_probed_framed:\n\t"
	"mov $" STR(__NR_getppid) ", %eax\n\t"
	"int $0x80\n\t"
	"pop %ebp\n"
	"stress_probed_unframed:\n\t"
	"ret\n"
	"stress_probed_end:\n\t"
	".size stress_probed, .-stress_probed\n"
	".type stress_restorer, @function\n"
	"stress_restorer:\n\t"
	"mov $" STR(__NR_rt_sigreturn) ", %eax\n\t"
	"int $0x80\n"
	"stress_restorer_site:\n\t"
	"hlt\n\t"
	".size stress_restorer, .-stress_restorer\n"
	".popsection");
#endif

/* The addresses of the labels above. */
enum label {
	PROBED, PROBED_FRAMED, PROBED_UNFRAMED, PROBED_END, RESTORER, RESTORER_SITE,
	NR_LABELS
};

static unsigned long label[NR_LABELS];

#ifdef __x86_64__
#define LABEL(v, name)	asm("lea " name "(%%rip), %0" : "=r" (v))
#else
#define LABEL(v, name)	asm("call 1f\n1:\tpop %0\n\tadd $" name "-1b, %0" : "=r" (v))
#endif

static void find_labels(void)
{
	LABEL(label[PROBED], "stress_probed");
	LABEL(label[PROBED_FRAMED], "stress_probed_framed");
	LABEL(label[PROBED_UNFRAMED], "stress_probed_unframed");
	LABEL(label[PROBED_END], "stress_probed_end");
	LABEL(label[RESTORER], "stress_restorer");
	LABEL(label[RESTORER_SITE], "stress_restorer_site");
}

/* One worker: a call chain, and a loop of one system call at its bottom. */
struct worker {
	int kind;
	bool learn;		/* note the addresses, make no system call */
	unsigned long quota;
	__u64 *done;		/* its slot's count of iterations */
	unsigned int nret;
	unsigned long ret[MAX_RETS];	/* return addresses, outermost first */
	unsigned long loop[3];	/* the leaf's asm loop [0, 1), its call's return */
	unsigned long site;	/* K_URING: after io_uring_enter() */
	int fd;
	void *buf;
	long ts[2];		/* K_SLEEP: a timespec, in longs for -m32 */
	pid_t tgid, tid;
	struct uring *u;
	char *path;
	char **argv;
};

#define NOTE_RET(w) do {							\
	struct worker *__w = (w);						\
										\
	if (__w->nret < MAX_RETS)						\
		__w->ret[__w->nret++] = (unsigned long)__builtin_return_address(0); \
} while (0)

/*
 * The loop: quota times the system call nr, all in asm, counting in the
 * slot. In learn mode only the loop's range is noted. The arguments stay
 * in their registers: the kernel keeps them.
 */
#ifdef __x86_64__
#define SYSCALL_LOOP(w, sysno, a0, a1, a2, a3) do {				\
	struct worker *__w = (w);						\
	unsigned long __n = __w->learn ? 0 : __w->quota;			\
	register long __r10 asm("r10") = (long)(a3);				\
										\
	asm volatile("lea 1f(%%rip), %%rcx\n\t"					\
		     "mov %%rcx, (%[loop])\n\t"					\
		     "lea 3f(%%rip), %%rcx\n\t"					\
		     "mov %%rcx, 8(%[loop])\n\t"				\
		     "test %[n], %[n]\n\t"					\
		     "jz 3f\n"							\
		     "1:\tmov %[nr], %%eax\n\t"					\
		     "syscall\n\t"						\
		     "incq (%[done])\n\t"					\
		     "dec %[n]\n\t"						\
		     "jnz 1b\n"							\
		     "3:"							\
		     : [n] "+r" (__n)						\
		     : [loop] "r" (__w->loop), [done] "r" (__w->done),		\
		       [nr] "i" (sysno), "D" ((long)(a0)), "S" ((long)(a1)),	\
		       "d" ((long)(a2)), "r" (__r10)				\
		     : "rax", "rcx", "r11", "memory", "cc");			\
} while (0)
#else
/*
 * i386: no absolute label addresses in position-independent code, a call
 * gives them (ebx saved around it, it holds the first argument); the
 * count stays in memory, all registers but ebp hold arguments or the slot.
 */
#define SYSCALL_LOOP(w, sysno, a0, a1, a2, a3) do {				\
	struct worker *__w = (w);						\
	unsigned long __n = __w->learn ? 0 : __w->quota;			\
	unsigned long *__loop = __w->loop;					\
										\
	asm volatile("push %%ebx\n\t"						\
		     "call 9f\n"						\
		     "9:\tpop %%ebx\n\t"					\
		     "lea 1f-9b(%%ebx), %%ebx\n\t"				\
		     "mov %%ebx, (%%eax)\n\t"					\
		     "add $3f-1f, %%ebx\n\t"					\
		     "mov %%ebx, 4(%%eax)\n\t"					\
		     "pop %%ebx\n\t"						\
		     "cmpl $0, %[n]\n\t"					\
		     "je 3f\n"							\
		     "1:\tmov %[nr], %%eax\n\t"					\
		     "int $0x80\n\t"						\
		     "addl $1, (%%edi)\n\t"					\
		     "adcl $0, 4(%%edi)\n\t"					\
		     "decl %[n]\n\t"						\
		     "jnz 1b\n"							\
		     "3:"							\
		     : [n] "+m" (__n), "+a" (__loop)				\
		     : [nr] "i" (sysno), "b" ((long)(a0)), "c" ((long)(a1)),	\
		       "d" ((long)(a2)), "S" ((long)(a3)), "D" (__w->done)	\
		     : "memory", "cc");						\
} while (0)
#endif

static __attribute__((noipa)) void leaf_read(struct worker *w)
{
	NOTE_RET(w);
	SYSCALL_LOOP(w, __NR_read, w->fd, w->buf, READ_LEN, 0);
}

static __attribute__((noipa)) void leaf_getppid(struct worker *w)
{
	NOTE_RET(w);
	SYSCALL_LOOP(w, __NR_getppid, 0, 0, 0, 0);
}

static __attribute__((noipa)) void leaf_yield(struct worker *w)
{
	NOTE_RET(w);
	SYSCALL_LOOP(w, __NR_sched_yield, 0, 0, 0, 0);
}

static __attribute__((noipa)) void leaf_sleep(struct worker *w)
{
	NOTE_RET(w);
	SYSCALL_LOOP(w, __NR_nanosleep, w->ts, 0, 0, 0);
}

static __attribute__((noipa)) void leaf_kill(struct worker *w)
{
	NOTE_RET(w);
	SYSCALL_LOOP(w, __NR_tgkill, w->tgid, w->tid, SIGUSR1, 0);
}

static __attribute__((noipa)) void leaf_deep(struct worker *w)
{
	NOTE_RET(w);
	SYSCALL_LOOP(w, __NR_read, w->fd, w->buf, DEEP_READ_LEN, 0);
}

static __attribute__((noipa)) void leaf_exit(struct worker *w)
{
	NOTE_RET(w);
	SYSCALL_LOOP(w, __NR_exit_group, 0, 0, 0, 0);
}

static __attribute__((noipa)) void leaf_exec(struct worker *w)
{
	NOTE_RET(w);
	SYSCALL_LOOP(w, __NR_execve, w->path, w->argv, environ, 0);
}

/* The loop calls stress_probed(), which makes the system call. */
static __attribute__((noipa)) void leaf_uprobe(struct worker *w)
{
	unsigned long n = w->learn ? 0 : w->quota;
	unsigned long *loop = w->loop;

	NOTE_RET(w);
#ifdef __x86_64__
	/* 128: the red zone, which the call would overwrite */
	asm volatile("lea 1f(%%rip), %%rcx\n\t"
		     "mov %%rcx, (%[loop])\n\t"
		     "lea 3f(%%rip), %%rcx\n\t"
		     "mov %%rcx, 8(%[loop])\n\t"
		     "lea 2f(%%rip), %%rcx\n\t"
		     "mov %%rcx, 16(%[loop])\n\t"
		     "test %[n], %[n]\n\t"
		     "jz 3f\n"
		     "1:\tsub $128, %%rsp\n\t"
		     "call stress_probed\n"
		     "2:\tadd $128, %%rsp\n\t"
		     "incq (%[done])\n\t"
		     "dec %[n]\n\t"
		     "jnz 1b\n"
		     "3:"
		     : [n] "+r" (n)
		     : [loop] "r" (loop), [done] "r" (w->done)
		     : "rax", "rcx", "r11", "memory", "cc");
#else
	asm volatile("push %%ebx\n\t"
		     "call 9f\n"
		     "9:\tpop %%ebx\n\t"
		     "lea 1f-9b(%%ebx), %%ecx\n\t"
		     "mov %%ecx, (%%eax)\n\t"
		     "lea 3f-9b(%%ebx), %%ecx\n\t"
		     "mov %%ecx, 4(%%eax)\n\t"
		     "lea 2f-9b(%%ebx), %%ecx\n\t"
		     "mov %%ecx, 8(%%eax)\n\t"
		     "pop %%ebx\n\t"
		     "cmpl $0, %[n]\n\t"
		     "je 3f\n"
		     "1:\tcall stress_probed\n"
		     "2:\taddl $1, (%%edi)\n\t"
		     "adcl $0, 4(%%edi)\n\t"
		     "decl %[n]\n\t"
		     "jnz 1b\n"
		     "3:"
		     : [n] "+m" (n), "+a" (loop)
		     : "D" (w->done)
		     : "ecx", "memory", "cc");
#endif
}

/* A ring of its own, or NULL with errno set. */
static struct uring *uring_alloc(unsigned int entries)
{
	struct uring *u = calloc(1, sizeof(*u));
	int err;

	if (!u)
		return NULL;
	err = uring_setup(u, entries);
	if (err) {
		free(u);
		errno = -err;
		return NULL;
	}
	return u;
}

static void uring_free(struct uring *u)
{
	uring_close(u);
	free(u);
}

/* Half NOPs, half 4 KiB reads of /dev/zero forced to an io-wq worker. */
static __attribute__((noipa)) void uring_fill(struct worker *w)
{
	struct uring *u = w->u;
	unsigned int tail = *u->sq_tail;
	int i;

	for (i = 0; i < URING_BATCH; i++, tail++) {
		unsigned int idx = tail & *u->sq_mask;
		struct io_uring_sqe *sqe = &u->sqes[idx];

		memset(sqe, 0, sizeof(*sqe));
		if (i & 1) {
			sqe->opcode = IORING_OP_READ;
			sqe->flags = IOSQE_ASYNC;
			sqe->fd = w->fd;
			sqe->addr = (unsigned long)w->buf;
			sqe->len = 4096;
		} else {
			sqe->opcode = IORING_OP_NOP;
		}
		sqe->user_data = i & 1;
		u->sq_array[idx] = idx;
	}
	__atomic_store_n(u->sq_tail, tail, __ATOMIC_RELEASE);
}

static __attribute__((noipa)) void uring_reap(struct worker *w)
{
	struct uring *u = w->u;
	unsigned int head = *u->cq_head;
	unsigned int tail = __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE);
	int ok = 0, bad = 0;

	for (; head != tail; head++) {
		struct io_uring_cqe *cqe = &u->cqes[head & *u->cq_mask];

		if (cqe->res == (cqe->user_data ? 4096 : 0))
			ok++;
		else
			bad++;
	}
	__atomic_store_n(u->cq_head, head, __ATOMIC_RELEASE);
	count_add(C_URING_OPS, ok);
	if (bad)
		count_add(C_URING_BAD, bad);
}

/* One io_uring_enter() per iteration: its return address is w->site. */
static __attribute__((noipa)) void leaf_uring(struct worker *w)
{
	unsigned long i;

	NOTE_RET(w);
	for (i = 0; i < (w->learn ? 1 : w->quota); i++) {
		/* learn mode: one io_uring_enter(-1), to note its return address */
		int fd = w->learn ? -1 : w->u->fd;

		if (!w->learn)
			uring_fill(w);
		raw_syscall(w->site, __NR_io_uring_enter, fd, URING_BATCH, URING_BATCH,
			    IORING_ENTER_GETEVENTS, 0, 0);
		if (w->learn)
			break;
		uring_reap(w);
		(*w->done)++;
	}
}

static __attribute__((noipa)) void chain_m2(struct worker *w)
{
	NOTE_RET(w);
	switch (w->kind) {
	case K_READ:
		leaf_read(w);
		break;
	case K_GETPPID:
		leaf_getppid(w);
		break;
	case K_YIELD:
		leaf_yield(w);
		break;
	case K_SLEEP:
		leaf_sleep(w);
		break;
	case K_KILL:
		leaf_kill(w);
		break;
	case K_DEEP:
		leaf_deep(w);
		break;
	case K_UPROBE:
		leaf_uprobe(w);
		break;
	case K_URING:
		leaf_uring(w);
		break;
	case K_EXIT:
		leaf_exit(w);
		break;
	case K_EXEC:
		leaf_exec(w);
		break;
	}
}

static __attribute__((noipa)) void chain_deep(struct worker *w, int n)
{
	NOTE_RET(w);
	if (n > 1)
		chain_deep(w, n - 1);
	else
		chain_m2(w);
}

static __attribute__((noipa)) void chain_m1(struct worker *w)
{
	NOTE_RET(w);
	if (w->kind == K_DEEP)
		chain_deep(w, DEEP_FRAMES);
	else
		chain_m2(w);
}

static __attribute__((noipa)) void chain_run(struct worker *w)
{
	NOTE_RET(w);
	chain_m1(w);
}

/*
 * Every chain starts here, learnt or run: chain_run()'s return address is
 * the last one checked, the same for all.
 */
static __attribute__((noipa)) void run_chain(struct worker *w)
{
	chain_run(w);
}

/* Is ip in a range of this image, where the walk's answer is known? */
static bool in_ranges(const struct image *img, unsigned long ip)
{
	__u32 i;

	for (i = 0; i < img->nranges; i++)
		if (ip >= img->r[i].start && ip < img->r[i].end)
			return true;
	return false;
}

static void on_sigusr1(int sig, siginfo_t *si, void *uc)
{
#ifdef __x86_64__
	unsigned long ip = ((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#else
	unsigned long ip = ((ucontext_t *)uc)->uc_mcontext.gregs[REG_EIP];
#endif

	count_add(C_SIGNALS, 1);
	if (!in_ranges(&shm->img[IMG], ip))
		count_add(C_SIG_ELSEWHERE, 1);
}

/* The kernel's struct sigaction: the restorer is ours, its site known. */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	__u64 mask;
};

static int install_handler(void)
{
	struct ksigaction ka = {
		.handler	= on_sigusr1,
		.flags		= SA_SIGINFO | SA_RESTART | SA_RESTORER_FLAG,
		.restorer	= (void *)label[RESTORER],
	};

	return syscall(__NR_rt_sigaction, SIGUSR1, &ka, NULL, sizeof(ka.mask));
}

static void block_sigusr1(bool block)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

static struct slot *slot_get(int kind, unsigned long quota)
{
	unsigned int i, start = rnd() % NR_SLOTS;

	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *s = &shm->slot[(start + i) % NR_SLOTS];
		__u32 free = 0;

		if (!__atomic_compare_exchange_n(&s->state, &free, 2, false,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			continue;
		s->tid = gettid_();
		s->tgid = getpid();
		s->kind = kind;
		s->quota = quota;
		s->done = 0;
		s->start_ns = now_ns();
		__atomic_store_n(&s->state, 1, __ATOMIC_RELEASE);
		count_add(C_WORKERS, 1);
		return s;
	}
	count_add(C_NO_SLOT, 1);
	return NULL;
}

static void slot_put(struct slot *s, bool finished)
{
	if (!s)
		return;
	if (finished) {
		count_add(C_ITERS, s->done);
		count_add(C_FINISHED, 1);
	}
	__atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
}

/* Iterations per second of each kind in this process, as loaded as it is. */
static __u64 rates[NR_KINDS];

/*
 * A second's worth, at most max_quota: what a kind costs changes with the
 * load (sched_yield() with the number of tasks that want the CPU).
 */
static const unsigned long max_quota[NR_KINDS] = {
	[K_READ] = 2000, [K_GETPPID] = 5000, [K_YIELD] = 500, [K_SLEEP] = 500,
	[K_KILL] = 1000, [K_DEEP] = 2000, [K_UPROBE] = 500, [K_URING] = 200,
};

static unsigned long quota_of(int kind)
{
	double q = rates[kind] * WORKER_SECONDS;

	if (q > max_quota[kind])
		q = max_quota[kind];
	return q < 4 ? 4 : q;
}

/* What the worker's system call needs; -1 when the kind is not possible. */
static int worker_init(struct worker *w, int kind, unsigned long quota)
{
	static char *exec_argv[4];
	static char fd_arg[16];

	memset(w, 0, sizeof(*w));
	w->kind = kind;
	w->quota = quota;
	w->fd = -1;
	w->tgid = getpid();
	w->tid = gettid_();
	w->ts[1] = SLEEP_NS;
	if (kind == K_READ || kind == K_DEEP || kind == K_URING) {
		w->fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
		w->buf = malloc(READ_LEN);
		if (w->fd < 0 || !w->buf)
			return -1;
		memset(w->buf, 1, READ_LEN);
	}
	if (kind == K_URING) {
		w->u = uring_alloc(2 * URING_BATCH);
		if (!w->u)
			return -1;
	}
	if (kind == K_EXEC) {
		snprintf(fd_arg, sizeof(fd_arg), "%d", shm_fd);
		exec_argv[0] = "deferred_stress";
		exec_argv[1] = "exec-child";
		exec_argv[2] = fd_arg;
		exec_argv[3] = NULL;
		w->path = "/proc/self/exe";
		w->argv = exec_argv;
	}
	return 0;
}

static void worker_fini(struct worker *w)
{
	if (w->u)
		uring_free(w->u);
	if (w->fd >= 0)
		close(w->fd);
	free(w->buf);
}

/*
 * A worker: quota iterations of kind at the bottom of its chain, counted in
 * a slot that the checker watches. exit and exec leave their slot first.
 */
static __attribute__((noipa)) int worker_body(int kind, unsigned long quota)
{
	struct worker w;
	struct slot *s;
	__u64 unslotted = 0;

	if (worker_init(&w, kind, quota)) {
		worker_fini(&w);
		return -1;
	}
	s = slot_get(kind, quota);
	w.done = s ? &s->done : &unslotted;
	if (kind == K_EXIT || kind == K_EXEC) {
		slot_put(s, true);
		s = NULL;
		w.done = &unslotted;
	}
	run_chain(&w);
	slot_put(s, true);
	worker_fini(&w);
	return kind == K_EXEC ? -1 : 0;
}

static int add_range(struct image *img, unsigned long start, unsigned long end,
		     int kind, int what, const unsigned long *rets, unsigned int nret)
{
	struct range *r;
	unsigned int i;

	if (img->nranges >= MAX_RANGES || nret > MAX_RETS)
		return -1;
	r = &img->r[img->nranges++];
	r->start = start;
	r->end = end;
	r->kind = kind;
	r->what = what;
	r->nret = nret;
	for (i = 0; i < nret; i++)
		r->ret[i] = rets[i];
	return 0;
}

/* The mapping of /proc/self/maps that holds addr: [start, end), file offset. */
static int find_mapping(unsigned long addr, unsigned long *start, unsigned long *end,
			unsigned long *off)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %*s %lx", start, end, off) != 3)
			continue;
		if (addr >= *start && addr < *end) {
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/*
 * Note where each kind's walks may start and what they must find: run
 * every chain once in learn mode, which makes no system call.
 */
static int learn_image(struct image *img)
{
	unsigned long rets[MAX_RETS + 1], start, end, off;
	struct worker w;
	int kind;
	__u32 i;

	memset(img, 0, sizeof(*img));
	img->shm_size = sizeof(struct shm);
	for (kind = 0; kind < NR_KINDS; kind++) {
		memset(&w, 0, sizeof(w));
		w.kind = kind;
		w.learn = true;
		w.fd = -1;
		run_chain(&w);
		for (i = 0; i < w.nret; i++)
			rets[i] = w.ret[w.nret - 1 - i];
		if (kind == K_URING) {
			if (add_range(img, w.site, w.site + 1, kind, R_SITE, rets, w.nret))
				return -1;
			continue;
		}
		if (add_range(img, w.loop[0], w.loop[1], kind, R_LOOP, rets, w.nret))
			return -1;
		if (kind != K_UPROBE)
			continue;
		if (add_range(img, label[PROBED], label[PROBED_FRAMED], kind,
			      R_PROBED_ENTRY, rets, w.nret) ||
		    add_range(img, label[PROBED_UNFRAMED], label[PROBED_END], kind,
			      R_PROBED_ENTRY, rets, w.nret))
			return -1;
		memmove(&rets[1], rets, w.nret * sizeof(rets[0]));
		rets[0] = w.loop[2];
		if (add_range(img, label[PROBED_FRAMED], label[PROBED_UNFRAMED], kind,
			      R_PROBED_BODY,
			      rets, w.nret + 1))
			return -1;
	}
	img->restorer_site = label[RESTORER_SITE];
	if (find_mapping((unsigned long)chain_run, &start, &end, &off))
		return -1;
	img->text_start = start;
	img->text_end = end;
	if (find_mapping(label[PROBED], &start, &end, &off))
		return -1;
	img->probe_off = label[PROBED] - start + off;
	return 0;
}

/*
 * Iterations per second of the kinds of mask, on the machine as it is now:
 * 0 for a kind that cannot run here.
 */
static void calibrate(__u64 *rate, unsigned int mask)
{
	int kind;

	for (kind = 0; kind < NR_KINDS; kind++) {
		struct worker w;
		__u64 done = 0, t;

		if (kind == K_EXIT || kind == K_EXEC || !(mask & (1u << kind)))
			continue;
		if (worker_init(&w, kind, CALIBRATION)) {
			worker_fini(&w);
			continue;	/* rate 0: not possible here */
		}
		w.done = &done;
		t = now_ns();
		run_chain(&w);
		t = now_ns() - t;
		rate[kind] = t ? done * 1000000000ULL / t : 1000;
		if (!rate[kind])
			rate[kind] = 1;
		worker_fini(&w);
	}
}

static int map_shm(int fd)
{
	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (shm == MAP_FAILED)
		return -1;
	shm_fd = fd;
	return 0;
}

/* The loads: what the checker samples. */
enum load {
	L_THREADS,	/* threads come and go, each one worker */
	L_UPROBE,	/* the same with K_UPROBE */
	L_URING,	/* the same with K_URING */
	L_FORKER,	/* children that exit, exec, or exec from a thread */
	NR_LOADS
};

static const char * const load_name[NR_LOADS] = {
	"threads", "uprobe", "io_uring", "forker",
};

static const unsigned int load_kinds[NR_LOADS] = {
	[L_THREADS] = 1 << K_READ | 1 << K_GETPPID | 1 << K_YIELD | 1 << K_SLEEP |
		      1 << K_KILL | 1 << K_DEEP,
	[L_UPROBE] = 1 << K_UPROBE | 1 << K_UPROBE << 16 | 1 << K_READ | 1 << K_KILL,
	[L_URING] = 1 << K_URING | 1 << K_URING << 16 | 1 << K_READ,
};

/*
 * The kinds of the mask in turn, those in its high half twice; none that
 * cannot run here.
 */
static int pick_kind(unsigned int mask)
{
	static unsigned int next;
	int kinds[32], n = 0, i;

	for (i = 0; i < 32; i++)
		if ((mask & (1u << i)) && rates[i & 15])
			kinds[n++] = i & 15;
	if (!n)
		return K_GETPPID;
	return kinds[__atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) % n];
}

struct load_thread {
	pthread_t th;
	int idx;
	unsigned int mask;
	int done_fd;
};

static void *load_thread_main(void *arg)
{
	struct load_thread *t = arg;
	int kind = pick_kind(t->mask);

	worker_body(kind, quota_of(kind));
	if (write(t->done_fd, &t->idx, sizeof(t->idx)) != sizeof(t->idx))
		abort();
	return NULL;
}

/* nthreads threads at a time, each one worker, until the checker stops us. */
static int run_threads(unsigned int mask, int nthreads)
{
	struct load_thread t[16];
	int p[2], i, idx, live = 0;

	if (nthreads > 16 || pipe(p))
		return 1;
	for (i = 0; i < nthreads && !stopping(); i++) {
		t[i].idx = i;
		t[i].mask = mask;
		t[i].done_fd = p[1];
		if (pthread_create(&t[i].th, NULL, load_thread_main, &t[i]))
			return 1;
		count_add(C_THREADS, 1);
		live++;
	}
	while (live) {
		if (read(p[0], &idx, sizeof(idx)) != sizeof(idx)) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		pthread_join(t[idx].th, NULL);
		live--;
		if (stopping())
			continue;
		if (pthread_create(&t[idx].th, NULL, load_thread_main, &t[idx]))
			return 1;
		count_add(C_THREADS, 1);
		live++;
	}
	return 0;
}

static void *exec_thread_main(void *arg)
{
	block_sigusr1(true);
	count_add(C_EXECS, 1);
	count_add(C_EXEC_THREADS, 1);
	worker_body(K_EXEC, 1);
	return NULL;	/* the exec failed */
}

/* Reads until exec kills it: a pending walk of a task that de_thread() ends. */
static void *sibling_main(void *arg)
{
	struct worker w;
	__u64 done = 0;

	if (worker_init(&w, K_READ, ~0UL >> 2))
		return NULL;
	w.done = &done;
	run_chain(&w);
	return NULL;
}

static __noreturn void forker_child(int path)
{
	pthread_t th, sibling;

	switch (path) {
	case 0:
		worker_body(K_GETPPID, SMALL_QUOTA);
		worker_body(K_EXIT, 1);
		_exit(4);
	case 1:
		worker_body(K_GETPPID, SMALL_QUOTA);
		block_sigusr1(true);
		count_add(C_EXECS, 1);
		worker_body(K_EXEC, 1);
		_exit(3);
	default:
		if (pthread_create(&sibling, NULL, sibling_main, NULL) ||
		    pthread_create(&th, NULL, exec_thread_main, NULL))
			_exit(5);
		pthread_join(th, NULL);
		_exit(3);
	}
}

static void abnormal(const char *fmt, ...)
{
	va_list ap;

	if (__atomic_fetch_add(&shm->count[C_ABNORMAL], 1, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	vsnprintf(shm->abnormal, sizeof(shm->abnormal), fmt, ap);
	va_end(ap);
}

/* nchildren children at a time, until the checker stops us. */
static int run_forker(int nchildren)
{
	int live = 0, status;
	pid_t pid;

	for (;;) {
		while (live < nchildren && !stopping()) {
			int path = rnd() % 3;

			pid = fork();
			if (pid < 0)
				return 1;
			if (!pid)
				forker_child(path);
			count_add(C_FORKS, 1);
			live++;
		}
		if (!live)
			return 0;
		pid = waitpid(-1, &status, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		live--;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			abnormal("child %d (image %d): status %#x", pid, IMG, status);
	}
}

static int open_shm_arg(const char *arg)
{
	if (!arg || map_shm(atoi(arg)))
		return -1;
	return 0;
}

/* argv: load NAME SHMFD */
static int load_main(char **argv)
{
	unsigned int mask;
	int load;
	__u64 t;

	if (!argv[1] || open_shm_arg(argv[2]))
		return 2;
	for (load = 0; load < NR_LOADS; load++)
		if (!strcmp(argv[1], load_name[load]))
			break;
	if (load == NR_LOADS || install_handler())
		return 2;
	mask = load_kinds[load];
	/* the compat load has the uprobes of the 32-bit program */
	if (IMG && load == L_THREADS)
		mask |= 1 << K_UPROBE;
	/* the quotas: a second of work, under the sampling and the other loads */
	t = now_ns();
	calibrate(rates, mask | mask >> 16 | 1 << K_GETPPID);
	fprintf(stderr, "# load %s (%d-bit): calibrated in %.1f s\n", load_name[load],
		IMG ? 32 : 64, (now_ns() - t) / 1e9);
	switch (load) {
	case L_FORKER:
		return run_forker(2);
	case L_THREADS:
		return run_threads(mask, IMG ? 3 : 4);
	default:
		return run_threads(mask, 2);
	}
}

/* argv: exec-child SHMFD; SIGUSR1 comes blocked from the old image. */
static int exec_child_main(char **argv)
{
	if (open_shm_arg(argv[1]) || install_handler())
		return 2;
	count_add(C_EXEC_IMAGES, 1);
	block_sigusr1(false);
	worker_body(K_GETPPID, SMALL_QUOTA);
	worker_body(K_EXIT, 1);
	return 4;
}

/* argv: learn SHMFD: the 32-bit image's ranges and rates. */
static int learn_main(char **argv)
{
	struct image *img;

	if (open_shm_arg(argv[1]) || install_handler())
		return 2;
	img = &shm->img[IMG];
	if (learn_image(img))
		return 3;
	calibrate(img->rate, ~0u);
	__atomic_store_n(&img->ready, 1, __ATOMIC_RELEASE);
	return 0;
}

#ifdef __x86_64__
/* The checker. */

static const char * const kind_name[NR_KINDS] = {
	"read", "getppid", "yield", "sleep", "kill", "deep", "uprobe",
	"io_uring", "exit", "exec",
};

static const char * const count_name[NR_COUNTS] = {
	"workers", "finished", "iterations", "threads", "forks", "execs",
	"execs from threads", "exec'd images", "signals", "signals elsewhere",
	"io_uring requests", "io_uring failures", "abnormal exits", "no slot",
};

/*
 * The sampling periods, in multiples of -p (microseconds, default 1000: a
 * few samples per system call of a TCG-emulated KASAN kernel, where one
 * costs 50 us and one sample as much; on real hardware try -p 20). The
 * tracepoints sample every Nth hit.
 */
#define DEFAULT_PERIOD_US	1000
#define PERIOD_A		2	/* in halves of -p: cpu-clock, per load */
#define PERIOD_B		4	/* task-clock, per load */
#define PERIOD_SYS		8	/* cpu-clock, per CPU */
#define PERIOD_TINY		2
#define PERIOD_UNREAD		3
#define PERIOD_CAPPED		5
#define PERIOD_CHURN		2
#define EVERY_SYS_EXIT		97	/* raw_syscalls:sys_exit, per load */
#define EVERY_SYS_EXIT_CPU	211	/* ... per CPU */
#define EVERY_IRQ_ENABLE	499	/* preemptirq:irq_enable */
#define CAPPED_STACK		6
#define PAGES_A			128
#define PAGES_E			32
#define PAGES_SYS		64
#define PAGES_CAPPED		16
#define PAGES_CHURN		8
#define MAX_EVENTS		512
#define MAX_RINGS		128
#define MAX_DOMAINS		64
#define NR_LOAD_PROCS		6

enum stress_stat {
	S_SAMPLES, S_DEFERRED, S_USER_MODE, S_IN_PLACE, S_JOINED, S_BACKWARD,
	S_RECORDS, S_DUP, S_BAD_MISC, S_BAD_COOKIE, S_TID_MISMATCH,
	S_USER_PART, S_DEFERRED_USER, S_OVER_CAP, S_CLASSIFIED, S_BAD_STACK,
	S_SIGRETURN, S_SIGRETURN_ELSEWHERE, S_OWN_OTHER, S_FOREIGN, S_EMPTY,
	S_LOST, S_LOST_RECORDS, S_MALFORMED, S_UPROBE_SAMPLES,
	S_UPROBE_DEFERRED, S_IOWRK_SAMPLES, S_IOWRK_DEFERRED, S_UNRESOLVED,
	S_UNRESOLVED_LOST, S_UNRESOLVED_STOPPED, S_PROBED_ENTRY, S_PROBED_BODY,
	S_THROTTLE, S_CHURN_OPENS, S_CHURN_FAILS,
	NR_STATS
};

static const char * const stat_name[NR_STATS] = {
	"samples", "deferred samples", "user-mode samples", "in-place samples",
	"joined", "backward joins", "records", "duplicate records",
	"records without MISC_USER", "malformed cookies", "cookies of two tids",
	"deferred samples with a user part", "deferred user-mode samples",
	"records over sample_max_stack", "records checked", "wrong stacks",
	"sigreturn records checked", "sigreturn records from elsewhere",
	"records from other code of ours", "records from other code",
	"empty records", "lost", "LOST records", "malformed records",
	"uprobe event samples", "deferred uprobe event samples",
	"io-wq worker samples", "deferred io-wq worker samples",
	"unresolved samples", "unresolved after losses",
	"unresolved in a stopped stay", "stress_probed() entry records",
	"stress_probed() body records", "throttles", "churn opens",
	"churn open failures",
};

struct stats {
	__u64 n[NR_STATS];
	__u64 kind[2][NR_KINDS];	/* checked records per image and kind */
	char msg[NR_STATS][240];	/* the first of each problem */
};

static __printf(3, 4) void problem(struct stats *st, int stat, const char *fmt, ...)
{
	va_list ap;

	if (st->n[stat]++)
		return;
	va_start(ap, fmt);
	vsnprintf(st->msg[stat], sizeof(st->msg[stat]), fmt, ap);
	va_end(ap);
}

/* Open addressing on a non-zero 64-bit key. */
struct centry {
	__u64 key;
	__u32 tid1;		/* tid + 1 */
	__u32 pending;		/* samples waiting for their record */
	__u64 rings;		/* the rings of the family that got a record */
	__u64 time;		/* of the latest sample */
	__u64 rtime;		/* of the first record */
	__u64 id;		/* the event of the latest sample */
	__u32 cpu;		/* and its CPU */
};

struct ctab {
	struct centry *e;
	size_t cap, used;
};

static size_t ctab_hash(__u64 key, size_t cap)
{
	return (key * 0x9e3779b97f4a7c15ULL >> 17) & (cap - 1);
}

static struct centry *ctab_find(const struct ctab *t, __u64 key)
{
	size_t i;

	if (!t->cap)
		return NULL;
	for (i = ctab_hash(key, t->cap); t->e[i].key; i = (i + 1) & (t->cap - 1))
		if (t->e[i].key == key)
			return &t->e[i];
	return NULL;
}

static struct centry *ctab_get(struct ctab *t, __u64 key)
{
	size_t i;

	if (2 * (t->used + 1) > t->cap) {
		struct ctab n = { .cap = t->cap ? 2 * t->cap : 1024 };

		n.e = calloc(n.cap, sizeof(*n.e));
		if (!n.e)
			ksft_exit_fail_msg("out of memory for %zu cookies\n", n.cap);
		for (i = 0; i < t->cap; i++) {
			size_t j;

			if (!t->e[i].key)
				continue;
			for (j = ctab_hash(t->e[i].key, n.cap); n.e[j].key;)
				j = (j + 1) & (n.cap - 1);
			n.e[j] = t->e[i];
		}
		n.used = t->used;
		free(t->e);
		*t = n;
	}
	for (i = ctab_hash(key, t->cap); t->e[i].key; i = (i + 1) & (t->cap - 1))
		if (t->e[i].key == key)
			return &t->e[i];
	t->e[i].key = key;
	t->used++;
	return &t->e[i];
}

static void ctab_free(struct ctab *t)
{
	free(t->e);
	memset(t, 0, sizeof(*t));
}

/*
 * A family of buffers: one ring per CPU of the same events (or one ring).
 * A record is written on the CPU where the task returns to user space,
 * which need not be that of its samples: they join within the family.
 */
struct domain {
	char name[40];
	struct ctab t;		/* cookie -> tid, samples waiting, rings */
	struct ctab last;	/* tid + 1 -> its last cookie (excuse_last) */
	bool excuse_last;	/* events stopped while tasks were in the kernel */
	__u64 on_ns, off_ns;	/* per-CPU: all CPUs watched from, until */
	int excuse_budget;	/* churn: stays that may end without record */
	bool lossy;
	__u64 lost;
	__u64 format_lost;	/* its events' PERF_FORMAT_LOST counts */
	__u64 sig_elsewhere;	/* sigreturn records from outside the ranges */
	struct stats *st;
	struct trace *trace;	/* churn: what came, for the log of a failure */
};

/* What a churn family saw, in order. */
#define TRACE_IPS	6

struct trace {
	int n;
	struct {
		__u32 type, misc, tid, cpu;
		__u64 time, cookie, id;
		__u64 ips[TRACE_IPS];	/* a sample's first callchain entries */
	} e[512];
};

static void format_ips(char *buf, size_t len, const __u64 *ips, __u64 nr)
{
	size_t pos = 0;
	__u64 i;

	buf[0] = 0;
	for (i = 0; i < nr && i < 8 && pos < len; i++)
		pos += snprintf(buf + pos, len - pos, " %#llx", ULL(ips[i]));
}

static void trace_add(struct domain *d, const struct ring_record *rr)
{
	struct trace *t = d->trace;

	if (!t || t->n >= (int)ARRAY_SIZE(t->e))
		return;
	t->e[t->n].type = rr->type;
	t->e[t->n].misc = rr->misc;
	t->e[t->n].tid = rr->tid;
	t->e[t->n].cpu = rr->cpu;
	t->e[t->n].time = rr->time;
	t->e[t->n].cookie = rr->cookie;
	memset(t->e[t->n].ips, 0, sizeof(t->e[t->n].ips));
	if (rr->type == PERF_RECORD_SAMPLE && rr->ips)
		memcpy(t->e[t->n].ips, rr->ips,
		       (rr->nr < TRACE_IPS ? rr->nr : TRACE_IPS) * sizeof(__u64));
	t->e[t->n++].id = rr->id;
}

static void trace_dump(const struct domain *d)
{
	const struct trace *t = d->trace;
	char ips[TRACE_IPS * 20];
	int i;

	for (i = 0; t && i < t->n; i++) {
		format_ips(ips, sizeof(ips), t->e[i].ips, TRACE_IPS);
		ksft_print_msg("  %s: %s tid %u cpu %u misc %#x at %llu, cookie %#llx, id %llu%s\n",
			       d->name, t->e[i].type == PERF_RECORD_SAMPLE ? "sample" :
			       t->e[i].type == PERF_RECORD_CALLCHAIN_DEFERRED ? "record" :
			       "other", t->e[i].tid, t->e[i].cpu, t->e[i].misc,
			       ULL(t->e[i].time), ULL(t->e[i].cookie), ULL(t->e[i].id), ips);
	}
}

/* Cookies a churn family missed: did any other family get their record? */
static __u64 missed[64];
static int nr_missed;

struct sring {
	struct ring r;
	struct domain *d;
	int bit;
	unsigned int cap;	/* the largest sample_max_stack writing here */
	bool unread;
	int load;		/* loads[] it samples, -1: every task */
};

struct domain;

struct evinfo {
	__u64 id;
	__u32 type;		/* its attr's, for the log of a missing record */
	__u64 config;
	bool uprobe;
	int fd;
	struct domain *d;	/* the family of the ring it writes into */
};

static struct evinfo events[MAX_EVENTS];
static int nr_events, nr_opened;
static struct sring rings[MAX_RINGS];
static int nr_rings;
static struct domain domains[MAX_DOMAINS];
static int nr_domains;
static struct stats main_stats, churn_stats;
static struct ctab iowrk;		/* tid + 1 of io-wq workers (COMM) */
static int nr_cpus;
static unsigned int max_stack = 127;
static unsigned long period_us = DEFAULT_PERIOD_US;
static bool verbose;

/* A sampling period in ns: halves of -p. */
static __u64 period(int halves)
{
	return period_us * 500ULL * halves;
}

static const char *tracefs;

static int evinfo_cmp(const void *a, const void *b)
{
	const struct evinfo *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static const struct evinfo *ev_find(__u64 id)
{
	struct evinfo key = { .id = id };

	return bsearch(&key, events, nr_events, sizeof(events[0]), evinfo_cmp);
}

/*
 * cookie_problem() of deferred_util.h, with the number of CPUs read once:
 * sysconf() reads sysfs each time, which costs more than a record.
 */
static const char *cookie_why(__u64 cookie)
{
	static long cpus;
	__u32 cpu1 = (__u32)cookie;

	if (!cpus)
		cpus = sysconf(_SC_NPROCESSORS_CONF);
	if (cpu1 < 1 || cpu1 > cpus)
		return "bits 0..31 are not cpu+1 of a CPU of this machine";
	if (!((cookie >> 32) & 1))
		return "bits 32..63 are not odd";
	return NULL;
}

static void check_cookie(struct stats *st, const struct domain *d, __u64 cookie,
			 const char *what, __u32 tid)
{
	const char *why = cookie_why(cookie);

	if (why)
		problem(st, S_BAD_COOKIE, "%s: %s of tid %u, cookie %#llx: %s", d->name,
			what, tid, ULL(cookie), why);
}

static struct centry *cookie_entry(struct domain *d, __u64 cookie, __u32 tid,
				   const char *what)
{
	struct centry *e = ctab_get(&d->t, cookie);

	if (!e->tid1)
		e->tid1 = tid + 1;
	else if (e->tid1 != tid + 1)
		problem(d->st, S_TID_MISMATCH,
			"%s: cookie %#llx of tid %u, then a %s of tid %u", d->name,
			ULL(cookie), e->tid1 - 1, what, tid);
	return e;
}

static void on_sample(struct sring *s, const struct ring_record *rr)
{
	struct domain *d = s->d;
	struct stats *st = d->st;
	const struct evinfo *ev = ev_find(rr->id);
	struct centry *e;

	st->n[S_SAMPLES]++;
	if (ev && ev->uprobe) {
		st->n[S_UPROBE_SAMPLES]++;
		if (rr->cookie)
			problem(st, S_UPROBE_DEFERRED, "%s: tid %u, cookie %#llx",
				d->name, rr->tid, ULL(rr->cookie));
	}
	if (st == &main_stats && ctab_find(&iowrk, rr->tid + 1ULL)) {
		st->n[S_IOWRK_SAMPLES]++;
		if (rr->cookie)
			problem(st, S_IOWRK_DEFERRED, "%s: io-wq worker %u, cookie %#llx",
				d->name, rr->tid, ULL(rr->cookie));
	}
	if (!rr->cookie) {
		st->n[taken_in_user_mode(rr) ? S_USER_MODE : S_IN_PLACE]++;
		return;
	}
	st->n[S_DEFERRED]++;
	if (!taken_in_kernel_mode(rr))
		problem(st, S_DEFERRED_USER, "%s: tid %u at %#llx, misc %#x, cookie %#llx",
			d->name, rr->tid, ULL(rr->ip), rr->misc,
			ULL(rr->cookie));
	if (rr->ips && has_user_context(rr))
		problem(st, S_USER_PART, "%s: tid %u, cookie %#llx", d->name, rr->tid,
			ULL(rr->cookie));
	check_cookie(st, d, rr->cookie, "sample", rr->tid);
	e = cookie_entry(d, rr->cookie, rr->tid, "sample");
	if (e->rings) {
		st->n[S_JOINED]++;
		st->n[S_BACKWARD]++;
	} else {
		e->pending++;
		e->time = rr->time;
		e->id = rr->id;
		e->cpu = rr->cpu;
	}
	if (d->excuse_last) {
		e = ctab_get(&d->last, rr->tid + 1ULL);
		e->rings = rr->cookie;
		e->time = rr->time;
	}
}

/* Do ips[1..] begin with the range's return addresses (as far as cap lets)? */
static bool rets_match(const struct sring *s, const struct ring_record *rr,
		       const struct range *rg, __u64 *at)
{
	__u64 want = rg->nret, k;

	if (want > s->cap - 1)
		want = s->cap - 1;
	for (k = 0; k < want; k++) {
		if (1 + k >= rr->nr || rr->ips[1 + k] != rg->ret[k]) {
			*at = 1 + k;
			return false;
		}
	}
	return true;
}

static void check_stack(struct sring *s, const struct ring_record *rr, int i,
			const struct range *rg)
{
	struct stats *st = s->d->st;
	char got[160], want[160];
	__u64 at;

	if (!rets_match(s, rr, rg, &at)) {
		format_ips(got, sizeof(got), rr->ips, rr->nr);
		want[0] = 0;
		if (at - 1 < rg->nret)
			snprintf(want, sizeof(want), "%#llx",
				 ULL(rg->ret[at - 1]));
		problem(st, S_BAD_STACK,
			"%s: tid %u cookie %#llx (%s, image %d): entry %llu of %llu is %s, want %s; ips%s",
			s->d->name, rr->tid, ULL(rr->cookie),
			kind_name[rg->kind], i, ULL(at),
			ULL(rr->nr),
			at < rr->nr ? "wrong" : "missing", want, got);
		return;
	}
	st->n[S_CLASSIFIED]++;
	st->kind[i][rg->kind]++;
	if (rg->what == R_PROBED_ENTRY)
		st->n[S_PROBED_ENTRY]++;
	else if (rg->what == R_PROBED_BODY)
		st->n[S_PROBED_BODY]++;
}

/* rt_sigreturn walks the handler's registers: the frame it interrupted. */
static void check_sigreturn(struct sring *s, const struct ring_record *rr,
			    const struct image *img)
{
	__u64 at;
	__u32 j;

	for (j = 0; j < img->nranges; j++) {
		if (rets_match(s, rr, &img->r[j], &at)) {
			s->d->st->n[S_SIGRETURN]++;
			return;
		}
	}
	s->d->sig_elsewhere++;
	s->d->st->n[S_SIGRETURN_ELSEWHERE]++;
}

/* -v: the first few records of each kind that are not checked. */
static void show(const struct sring *s, const struct ring_record *rr, const char *what)
{
	static pid_t self;
	static int shown;
	char ips[160];

	if (!self)
		self = getpid();
	if (!verbose || rr->pid == (__u32)self || shown++ >= 40)
		return;
	format_ips(ips, sizeof(ips), rr->ips, rr->nr);
	ksft_print_msg("%s: %s record, tid %u, %llu entries:%s\n", s->d->name, what,
		       rr->tid, ULL(rr->nr), ips);
}

static void classify(struct sring *s, const struct ring_record *rr)
{
	struct stats *st = s->d->st;
	__u64 ip;
	int i;
	__u32 j;

	if (!rr->nr || !rr->ips) {
		st->n[S_EMPTY]++;
		return;
	}
	ip = rr->ips[0];
	for (i = 0; i < 2; i++) {
		const struct image *img = &shm->img[i];

		if (!img->ready)
			continue;
		for (j = 0; j < img->nranges; j++) {
			if (ip >= img->r[j].start && ip < img->r[j].end) {
				check_stack(s, rr, i, &img->r[j]);
				return;
			}
		}
		if (ip == img->restorer_site) {
			check_sigreturn(s, rr, img);
			return;
		}
	}
	for (i = 0; i < 2; i++) {
		if (shm->img[i].ready && ip >= shm->img[i].text_start &&
		    ip < shm->img[i].text_end) {
			st->n[S_OWN_OTHER]++;
			show(s, rr, "other code of ours");
			return;
		}
	}
	st->n[S_FOREIGN]++;
}

static void on_record(struct sring *s, const struct ring_record *rr)
{
	struct domain *d = s->d;
	struct stats *st = d->st;
	struct centry *e;

	st->n[S_RECORDS]++;
	if ((rr->misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER)
		problem(st, S_BAD_MISC, "%s: tid %u, cookie %#llx, misc %#x", d->name,
			rr->tid, ULL(rr->cookie), rr->misc);
	if (rr->nr > s->cap)
		problem(st, S_OVER_CAP, "%s: tid %u, cookie %#llx: %llu entries, cap %u",
			d->name, rr->tid, ULL(rr->cookie),
			ULL(rr->nr), s->cap);
	check_cookie(st, d, rr->cookie, "record", rr->tid);
	e = cookie_entry(d, rr->cookie, rr->tid, "record");
	if (e->rings & (1ULL << s->bit))
		problem(st, S_DUP, "%s, ring %d: tid %u, cookie %#llx: a second record",
			d->name, s->bit, rr->tid, ULL(rr->cookie));
	if (!e->rings)
		e->rtime = rr->time;
	e->rings |= 1ULL << s->bit;
	st->n[S_JOINED] += e->pending;
	e->pending = 0;
	classify(s, rr);
}

static void on_comm(const __u64 *w, const struct ring_record *rr)
{
	const char *comm = (const char *)&w[2];

	if (rr->size >= 3 * 8 && !strncmp(comm, "iou-", 4))
		ctab_get(&iowrk, rr->tid + 1ULL);
}

static void process(struct sring *s, const struct ring_record *rr, const __u64 *w)
{
	struct stats *st = s->d->st;

	if (rr->malformed) {
		problem(st, S_MALFORMED, "%s: %s", s->d->name, s->r.why);
		return;
	}
	trace_add(s->d, rr);
	switch (rr->type) {
	case PERF_RECORD_SAMPLE:
		on_sample(s, rr);
		break;
	case PERF_RECORD_CALLCHAIN_DEFERRED:
		on_record(s, rr);
		break;
	case PERF_RECORD_LOST:
	case PERF_RECORD_LOST_SAMPLES:
		s->d->lost += rr->lost;
		st->n[S_LOST] += rr->lost;
		st->n[S_LOST_RECORDS]++;
		break;
	case PERF_RECORD_COMM:
		on_comm(w, rr);
		break;
	case PERF_RECORD_THROTTLE:
		st->n[S_THROTTLE]++;
		break;
	}
}

/* ring_drain() without keeping the records: each is checked and dropped. */
static int sring_drain(struct sring *s)
{
	static __thread __u64 w[RING_MAX_RECORD / 8];
	struct ring *r = &s->r;
	__u64 head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	int n = 0;

	while (r->off < head) {
		struct perf_event_header hdr;
		struct ring_record rr;

		ring_copy(r, &hdr, r->off, sizeof(hdr));
		if (hdr.size < sizeof(hdr) || hdr.size % 8 || hdr.size > head - r->off) {
			problem(s->d->st, S_MALFORMED, "%s: header size %u at offset %llu",
				s->d->name, hdr.size, ULL(r->off));
			r->off = head;
			break;
		}
		memset(&rr, 0, sizeof(rr));
		rr.type = hdr.type;
		rr.misc = hdr.misc;
		rr.size = hdr.size;
		ring_copy(r, w, r->off, hdr.size);
		r->nr_malformed = 0;
		ring_parse(r, w, &rr);
		r->off += hdr.size;
		process(s, &rr, w);
		free(rr.ips);
		n++;
	}
	if (!r->keep_tail)
		__atomic_store_n(&r->meta->data_tail, r->off, __ATOMIC_RELEASE);
	return n;
}

/* The samples left waiting: excused, or a missing record. */
/* A family with a missing record: what else waited there, for the log. */
static void dump_pending(const struct domain *d)
{
	static int dumped;
	size_t i;

	if (dumped++ >= 4)
		return;
	for (i = 0; i < d->t.cap; i++) {
		const struct centry *e = &d->t.e[i];

		if (e->key && e->pending)
			ksft_print_msg("  waiting in %s: %u samples, tid %u, %#llx at %llu\n",
				       d->name, e->pending, e->tid1 - 1, ULL(e->key),
				       ULL(e->time));
	}
}

/*
 * Which other families got the record of a cookie that @d missed: none
 * (the kernel wrote it nowhere), or all but @d (it skipped @d's buffers).
 */
static void report_elsewhere(const struct domain *d, __u64 cookie)
{
	int i;

	for (i = 0; i < nr_domains; i++) {
		const struct domain *o = &domains[i];
		const struct centry *e;

		if (o == d || !o->t.e)
			continue;
		e = ctab_find(&o->t, cookie);
		if (e)
			ksft_print_msg("  %#llx in %s: tid %u, %u samples waiting, rings %#llx, record at %llu\n",
				       ULL(cookie), o->name, e->tid1 - 1, e->pending,
				       ULL(e->rings), ULL(e->rtime));
	}
}

static void domain_finish(struct domain *d)
{
	struct stats *st = d->st;
	__u64 unresolved = st->n[S_UNRESOLVED];
	static int shown;
	size_t i;

	for (i = 0; i < d->t.cap; i++) {
		const struct centry *e = &d->t.e[i];
		const struct evinfo *ev;
		const struct centry *last;

		if (!e->key || !e->pending)
			continue;
		last = d->excuse_last ? ctab_find(&d->last, e->tid1) : NULL;
		/*
		 * Per-CPU events go on and off one CPU after the other: a task
		 * may return to user space on a CPU not yet (no longer) watched.
		 * Its stays before the first CPU went off were walked while all
		 * were on, unless a later stay of it was sampled in between.
		 */
		if (d->lossy || d->lost) {
			st->n[S_UNRESOLVED_LOST] += e->pending;
		} else if (last && (last->rings == e->key ||
				    (d->off_ns && last->time >= d->off_ns))) {
			st->n[S_UNRESOLVED_STOPPED] += e->pending;
		} else if (e->time < d->on_ns) {
			st->n[S_UNRESOLVED_STOPPED] += e->pending;
		} else if (d->excuse_budget > 0) {
			d->excuse_budget--;
			st->n[S_UNRESOLVED_STOPPED] += e->pending;
		} else {
			problem(st, S_UNRESOLVED,
				"%s: %u samples of tid %u, cookie %#llx, the last at %llu, and no record",
				d->name, e->pending, e->tid1 - 1, ULL(e->key), ULL(e->time));
			if (d->trace && nr_missed < (int)ARRAY_SIZE(missed))
				missed[nr_missed++] = e->key;
			if (shown++ >= 20)
				continue;
			ev = ev_find(e->id);
			ksft_print_msg("unresolved: %s: %u samples, tid %u, %#llx at %llu on cpu %u, event type %u config %llu\n",
				       d->name, e->pending, e->tid1 - 1, ULL(e->key), ULL(e->time),
				       e->cpu, ev ? ev->type : ~0U, ULL(ev ? ev->config : 0));
			report_elsewhere(d, e->key);
			st->n[S_UNRESOLVED] += e->pending - 1;
		}
	}
	if (st->n[S_UNRESOLVED] != unresolved) {
		dump_pending(d);
		trace_dump(d);
	}
}

static void domain_free(struct domain *d)
{
	ctab_free(&d->t);
	ctab_free(&d->last);
}

static struct domain *new_domain(const char *name, struct stats *st)
{
	struct domain *d;

	if (nr_domains == MAX_DOMAINS)
		ksft_exit_fail_msg("too many buffer families\n");
	d = &domains[nr_domains++];
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->st = st;
	return d;
}

static struct perf_event_attr stress_attr(__u32 type, __u64 config, __u64 period)
{
	struct perf_event_attr attr =
		sample_attr(type, config, period,
			    PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN_DEFERRED);

	attr.disabled = 0;
	attr.read_format = PERF_FORMAT_LOST;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;	/* that of now_ns() */
	return attr;
}

/* Open an event (main thread, before sampling starts): its fd, or -1. */
static int open_event(struct perf_event_attr *attr, pid_t pid, int cpu, int group,
		      bool uprobe, struct domain *d)
{
	int fd = syscall(__NR_perf_event_open, attr, pid, cpu, group,
			 PERF_FLAG_FD_CLOEXEC);
	__u64 id;

	if (fd < 0)
		return -1;
	if (ioctl(fd, PERF_EVENT_IOC_ID, &id) || nr_events == MAX_EVENTS) {
		close(fd);
		return -1;
	}
	events[nr_events].id = id;
	events[nr_events].type = attr->type;
	events[nr_events].config = attr->config;
	events[nr_events].fd = fd;
	events[nr_events].d = d;
	events[nr_events++].uprobe = uprobe;
	nr_opened++;
	return fd;
}

static struct sring *add_ring(int fd, struct perf_event_attr *attr, size_t pages,
			      struct domain *d, int bit, unsigned int cap, bool unread)
{
	struct sring *s;

	if (nr_rings == MAX_RINGS)
		ksft_exit_fail_msg("too many rings\n");
	s = &rings[nr_rings];
	if (ring_map(&s->r, fd, attr, pages))
		ksft_exit_fail_msg("mmap of %zu pages for %s: %s\n", pages, d->name,
				   strerror(errno));
	s->r.keep_tail = unread;
	s->d = d;
	s->bit = bit;
	s->cap = cap;
	s->unread = unread;
	s->load = -1;
	nr_rings++;
	return s;
}

static int set_output(int fd, int to)
{
	return ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, to);
}

/* Tracepoints and uprobe events: their ids, -1 when absent. */
enum tp {
	TP_SWITCH, TP_SYS_EXIT, TP_IRQ_ENABLE, TP_SIGNAL, TP_PROBE64, TP_RPROBE64,
	TP_PROBE32, TP_RPROBE32, NR_TPS
};

static const char * const tp_name[NR_TPS] = {
	"sched/sched_switch", "raw_syscalls/sys_exit", "preemptirq/irq_enable",
	"signal/signal_deliver", "dstress/probe64", "dstress/rprobe64",
	"dstress/probe32", "dstress/rprobe32",
};

static long long tp_id[NR_TPS];
static char uprobe_why[600];

static long long read_tp_id(const char *name)
{
	char path[256];

	if (!tracefs)
		return -1;
	snprintf(path, sizeof(path), "%s/events/%s/id", tracefs, name);
	return read_number(path);
}

static int uprobe_write(const char *line)
{
	char path[128];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/uprobe_events", tracefs);
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -1;
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		ret = -1;
	close(fd);
	return ret;
}

static void uprobes_remove(void)
{
	int t;

	if (!tracefs)
		return;
	for (t = TP_PROBE64; t <= TP_RPROBE32; t++) {
		char line[64];

		snprintf(line, sizeof(line), "-:%s\n", tp_name[t]);
		uprobe_write(line);
	}
}

/* A uprobe (or uretprobe) on stress_probed() of the binary at path. */
static void uprobe_add(int t, const char *path, __u64 off)
{
	char line[512];

	snprintf(line, sizeof(line), "%c:%s %s:%#llx\n",
		 t == TP_RPROBE64 || t == TP_RPROBE32 ? 'r' : 'p', tp_name[t], path,
		 ULL(off));
	if (uprobe_write(line)) {
		if (!uprobe_why[0])
			snprintf(uprobe_why, sizeof(uprobe_why), "%s: %s", line,
				 strerror(errno));
		return;
	}
	tp_id[t] = read_tp_id(tp_name[t]);
}

struct load_proc {
	const char *name;
	int load;
	bool compat;
	pid_t pid;
	int go;			/* its end of the pipe it waits on */
	int status;
	bool reaped;
};

static struct load_proc loads[NR_LOAD_PROCS];
static int nr_loads;
static char self_path[PATH_MAX], path32[PATH_MAX + 4];

/* A load, stopped until go_loads(): the events attach to it first. */
static void fork_load(const char *name, int load, bool compat)
{
	struct load_proc *l = &loads[nr_loads++];
	char fd_arg[16], *argv[4];
	int p[2];

	l->name = name;
	l->load = load;
	l->compat = compat;
	if (pipe2(p, O_CLOEXEC))
		ksft_exit_fail_msg("pipe: %s\n", strerror(errno));
	l->pid = fork();
	if (l->pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (!l->pid) {
		char c;
		int i;

		/* the loads forked before wait for the end of their pipes */
		for (i = 0; i < nr_loads - 1; i++)
			close(loads[i].go);
		close(p[1]);
		if (read(p[0], &c, 1) < 0)
			_exit(2);
		close(p[0]);
		snprintf(fd_arg, sizeof(fd_arg), "%d", shm_fd);
		if (compat) {
			execl(path32, "deferred_stress_32", "load", load_name[load], fd_arg,
			      NULL);
			_exit(2);
		}
		argv[0] = "load";
		argv[1] = (char *)load_name[load];
		argv[2] = fd_arg;
		argv[3] = NULL;
		_exit(load_main(argv));
	}
	close(p[0]);
	l->go = p[1];
}

/* Per CPU, inherited: the events of one load, in five families. */
static void open_load_events(struct load_proc *l)
{
	bool threads = l->load == L_THREADS;
	bool probes = l->load == L_UPROBE || (l->compat && l->load == L_THREADS);
	int probe = l->compat ? TP_PROBE32 : TP_PROBE64;
	struct domain *da, *de, *dt = NULL, *dn = NULL, *dm = NULL;
	char name[40];
	int cpu;

	snprintf(name, sizeof(name), "%s/cpu-clock+", l->name);
	da = new_domain(name, &main_stats);
	snprintf(name, sizeof(name), "%s/irq_enable+", l->name);
	de = new_domain(name, &main_stats);
	if (threads) {
		snprintf(name, sizeof(name), "%s/tiny", l->name);
		dt = new_domain(name, &main_stats);
		snprintf(name, sizeof(name), "%s/unread", l->name);
		dn = new_domain(name, &main_stats);
		snprintf(name, sizeof(name), "%s/capped", l->name);
		dm = new_domain(name, &main_stats);
	}
	for (cpu = 0; cpu < nr_cpus; cpu++) {
		struct perf_event_attr a;
		int fa, fd, fe = -1;

		/* the group: cpu-clock, task-clock, sched_switch; and more */
		a = stress_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period(PERIOD_A));
		a.inherit = 1;
		a.comm = 1;
		a.task = 1;
		a.watermark = 1;
		a.wakeup_watermark = PAGES_A * 4096 / 4;
		fa = open_event(&a, l->pid, cpu, -1, false, da);
		if (fa < 0)
			ksft_exit_fail_msg("%s: cpu-clock on cpu %d: %s\n", l->name, cpu,
					   strerror(errno));
		add_ring(fa, &a, PAGES_A, da, cpu, max_stack, false);
		a = stress_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, period(PERIOD_B));
		a.inherit = 1;
		fd = open_event(&a, l->pid, cpu, fa, false, da);
		if (fd < 0 || set_output(fd, fa))
			ksft_exit_fail_msg("%s: task-clock: %s\n", l->name, strerror(errno));
		if (tp_id[TP_SWITCH] >= 0) {
			a = stress_attr(PERF_TYPE_TRACEPOINT, tp_id[TP_SWITCH], 1);
			a.inherit = 1;
			fd = open_event(&a, l->pid, cpu, fa, false, da);
			if (fd < 0 || set_output(fd, fa))
				ksft_exit_fail_msg("%s: sched_switch: %s\n", l->name,
						   strerror(errno));
		}
		if (tp_id[TP_SYS_EXIT] >= 0) {
			a = stress_attr(PERF_TYPE_TRACEPOINT, tp_id[TP_SYS_EXIT], EVERY_SYS_EXIT);
			a.inherit = 1;
			fd = open_event(&a, l->pid, cpu, -1, false, da);
			if (fd < 0 || set_output(fd, fa))
				ksft_exit_fail_msg("%s: sys_exit: %s\n", l->name,
						   strerror(errno));
		}
		if (probes && tp_id[probe] >= 0 && tp_id[probe + 1] >= 0) {
			int t;

			for (t = probe; t <= probe + 1; t++) {
				a = stress_attr(PERF_TYPE_TRACEPOINT, tp_id[t], 1);
				a.inherit = 1;
				fd = open_event(&a, l->pid, cpu, -1, true, da);
				if (fd < 0 || set_output(fd, fa))
					ksft_exit_fail_msg("%s: %s: %s\n", l->name,
							   tp_name[t], strerror(errno));
			}
		}
		/* the way out to user space, and signal delivery */
		if (tp_id[TP_IRQ_ENABLE] >= 0) {
			a = stress_attr(PERF_TYPE_TRACEPOINT, tp_id[TP_IRQ_ENABLE],
					EVERY_IRQ_ENABLE);
			a.inherit = 1;
			fe = open_event(&a, l->pid, cpu, -1, false, de);
			if (fe < 0)
				ksft_exit_fail_msg("%s: irq_enable: %s\n", l->name,
						   strerror(errno));
			add_ring(fe, &a, PAGES_E, de, cpu, max_stack, false);
		}
		if (tp_id[TP_SIGNAL] >= 0) {
			a = stress_attr(PERF_TYPE_TRACEPOINT, tp_id[TP_SIGNAL], 1);
			a.inherit = 1;
			fd = open_event(&a, l->pid, cpu, -1, false, de);
			if (fd < 0)
				ksft_exit_fail_msg("%s: signal_deliver: %s\n", l->name,
						   strerror(errno));
			if (fe < 0)
				add_ring(fd, &a, PAGES_E, de, cpu, max_stack, false);
			else if (set_output(fd, fe))
				ksft_exit_fail_msg("%s: signal_deliver output: %s\n",
						   l->name, strerror(errno));
		}
		if (!threads)
			continue;
		/* one data page, read; one never read; a small sample_max_stack */
		a = stress_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period(PERIOD_TINY));
		a.inherit = 1;
		fd = open_event(&a, l->pid, cpu, -1, false, dt);
		if (fd < 0)
			ksft_exit_fail_msg("%s: tiny: %s\n", l->name, strerror(errno));
		add_ring(fd, &a, 1, dt, cpu, max_stack, false);
		a = stress_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period(PERIOD_UNREAD));
		a.inherit = 1;
		fd = open_event(&a, l->pid, cpu, -1, false, dn);
		if (fd < 0)
			ksft_exit_fail_msg("%s: unread: %s\n", l->name, strerror(errno));
		add_ring(fd, &a, 1, dn, cpu, max_stack, true);
		a = stress_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period(PERIOD_CAPPED));
		a.inherit = 1;
		a.sample_max_stack = CAPPED_STACK;
		fd = open_event(&a, l->pid, cpu, -1, false, dm);
		if (fd < 0)
			ksft_exit_fail_msg("%s: capped: %s\n", l->name, strerror(errno));
		add_ring(fd, &a, PAGES_CAPPED, dm, cpu, CAPPED_STACK, false);
	}
}

/* Per CPU, every task: cpu-clock, sched_switch and sys_exit in one buffer. */
static int sys_fd[MAX_CPUS];
static struct domain *sys_domain;

/* Per CPU, every task, one group each, on from the end of this. */
static void open_system_events(void)
{
	struct domain *d = new_domain("per-CPU", &main_stats);
	int cpu;

	sys_domain = d;
	d->excuse_last = true;
	for (cpu = 0; cpu < nr_cpus; cpu++) {
		struct perf_event_attr a;
		int fs, fd;

		a = stress_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period(PERIOD_SYS));
		a.disabled = 1;
		a.watermark = 1;
		a.wakeup_watermark = PAGES_SYS * 4096 / 4;
		fs = open_event(&a, -1, cpu, -1, false, d);
		if (fs < 0)
			ksft_exit_fail_msg("per-CPU cpu-clock on cpu %d: %s\n", cpu,
					   strerror(errno));
		sys_fd[cpu] = fs;
		add_ring(fs, &a, PAGES_SYS, d, cpu, max_stack, false);
		if (tp_id[TP_SWITCH] >= 0) {
			a = stress_attr(PERF_TYPE_TRACEPOINT, tp_id[TP_SWITCH], 1);
			fd = open_event(&a, -1, cpu, fs, false, d);
			if (fd < 0 || set_output(fd, fs))
				ksft_exit_fail_msg("per-CPU sched_switch: %s\n",
						   strerror(errno));
		}
		if (tp_id[TP_SYS_EXIT] >= 0) {
			a = stress_attr(PERF_TYPE_TRACEPOINT, tp_id[TP_SYS_EXIT],
					EVERY_SYS_EXIT_CPU);
			fd = open_event(&a, -1, cpu, fs, false, d);
			if (fd < 0 || set_output(fd, fs))
				ksft_exit_fail_msg("per-CPU sys_exit: %s\n", strerror(errno));
		}
	}
	for (cpu = 0; cpu < nr_cpus; cpu++)
		if (ioctl(sys_fd[cpu], PERF_EVENT_IOC_ENABLE, 0))
			ksft_exit_fail_msg("per-CPU enable: %s\n", strerror(errno));
	d->on_ns = now_ns();
}

/* A random running worker: its tid, tgid and kind, or 0. */
static pid_t pick_worker(pid_t *tgid, int *kind)
{
	unsigned int i, start = rnd() % NR_SLOTS;

	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *s = &shm->slot[(start + i) % NR_SLOTS];

		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != 1)
			continue;
		*tgid = s->tgid;
		*kind = s->kind;
		return s->tid;
	}
	return 0;
}

static void pause_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000 };

	nanosleep(&ts, NULL);
}

/*
 * Events come and go on busy workers: opened, enabled, disabled, closed,
 * while walks are pending. Each opening is a family of its own; the stay
 * in which an event stops may end without record (one per disable or
 * close while enabled).
 */
static void churn_once(void)
{
	static struct trace trace;
	struct perf_event_attr a, t;
	struct domain d = { .st = &churn_stats, .trace = &trace };
	struct sring s = { .d = &d, .cap = max_stack };
	int fd, fd2 = -1, op = rnd() % 3, stops = 0, kind;
	pid_t tgid, tid = pick_worker(&tgid, &kind);
	__u64 on, off1 = 0, on2 = 0, off;
	__u64 unresolved = churn_stats.n[S_UNRESOLVED];

	if (!tid) {
		pause_us(1000);
		return;
	}
	trace.n = 0;
	snprintf(d.name, sizeof(d.name), "churn of tid %d (%s)", tid, kind_name[kind]);
	a = stress_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period(PERIOD_CHURN));
	a.disabled = 1;
	fd = syscall(__NR_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		churn_stats.n[S_CHURN_FAILS]++;
		return;
	}
	churn_stats.n[S_CHURN_OPENS]++;
	__atomic_fetch_add(&nr_opened, 1, __ATOMIC_RELAXED);
	if (ring_map(&s.r, fd, &a, PAGES_CHURN)) {
		close(fd);
		return;
	}
	if (tp_id[TP_SWITCH] >= 0 && (rnd() & 1)) {
		t = stress_attr(PERF_TYPE_TRACEPOINT, tp_id[TP_SWITCH], 1);
		t.disabled = 1;
		fd2 = syscall(__NR_perf_event_open, &t, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd2 >= 0 && set_output(fd2, fd)) {
			close(fd2);
			fd2 = -1;
		}
		if (fd2 >= 0)
			__atomic_fetch_add(&nr_opened, 1, __ATOMIC_RELAXED);
	}
	on = now_ns();
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	if (fd2 >= 0)
		ioctl(fd2, PERF_EVENT_IOC_ENABLE, 0);
	pause_us(1000 + rnd() % 20000);
	sring_drain(&s);
	if (op == 2) {
		/* disabled and enabled again mid-stay */
		off1 = now_ns();
		ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
		stops++;
		pause_us(rnd() % 2000);
		on2 = now_ns();
		ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
		pause_us(1000 + rnd() % 10000);
	}
	off = now_ns();
	if (op != 1) {
		ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
		if (fd2 >= 0)
			ioctl(fd2, PERF_EVENT_IOC_DISABLE, 0);
	}
	stops++;		/* the disable, or the close while enabled */
	sring_drain(&s);
	d.excuse_budget = stops;
	if (d.lost || lost_count(fd) || (fd2 >= 0 && lost_count(fd2)))
		d.lossy = true;
	domain_finish(&d);
	domain_free(&d);
	if (churn_stats.n[S_UNRESOLVED] != unresolved)
		ksft_print_msg("churn of tid %d: op %d, %s, on %llu, off %llu, on %llu, off %llu\n",
			       tid, op, fd2 >= 0 ? "with sched_switch" : "alone", ULL(on),
			       ULL(off1), ULL(on2), ULL(off));
	ring_unmap(&s.r);
	if (fd2 >= 0)
		close(fd2);
	close(fd);
}

static int nr_stalled;
static bool helpers_stop;
static __u64 hops, signals_sent;

static bool helpers_stopping(void)
{
	return __atomic_load_n(&helpers_stop, __ATOMIC_ACQUIRE);
}

static void *churn_main(void *arg)
{
	while (!helpers_stopping())
		churn_once();
	return NULL;
}

/* Workers are moved between CPUs, and signalled, at random. */
static void *hopper_main(void *arg)
{
	while (!helpers_stopping()) {
		int kind;
		pid_t tgid, tid = pick_worker(&tgid, &kind);
		cpu_set_t set;

		if (tid) {
			CPU_ZERO(&set);
			if (rnd() % 4) {
				CPU_SET(rnd() % nr_cpus, &set);
			} else {
				int cpu;

				for (cpu = 0; cpu < nr_cpus; cpu++)
					CPU_SET(cpu, &set);
			}
			if (!sched_setaffinity(tid, sizeof(set), &set))
				__atomic_fetch_add(&hops, 1, __ATOMIC_RELAXED);
		}
		pause_us(2000);
	}
	return NULL;
}

static void *signaller_main(void *arg)
{
	while (!helpers_stopping()) {
		int kind;
		pid_t tgid, tid = pick_worker(&tgid, &kind);

		if (tid && !syscall(__NR_tgkill, tgid, tid, SIGUSR1))
			__atomic_fetch_add(&signals_sent, 1, __ATOMIC_RELAXED);
		pause_us(1000);
	}
	return NULL;
}

static void drain_all(void)
{
	int i;

	for (i = 0; i < nr_rings; i++)
		if (!rings[i].unread)
			sring_drain(&rings[i]);
}

static bool reap_loads(void)
{
	bool all = true;
	int i;

	for (i = 0; i < nr_loads; i++) {
		struct load_proc *l = &loads[i];

		if (l->reaped)
			continue;
		if (waitpid(l->pid, &l->status, WNOHANG) == l->pid)
			l->reaped = true;
		else
			all = false;
	}
	return all;
}

/*
 * Progress of the running workers, each time it is looked at: a worker
 * whose count did not move for STALL_S is stuck (in the kernel: its loop
 * has no other way out). Returns how many are.
 */
static int stalled_workers(void)
{
	static __u64 seen_start[NR_SLOTS], seen_done[NR_SLOTS], moved[NR_SLOTS];
	__u64 t = now_ns();
	int i, n = 0;

	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *s = &shm->slot[i];
		__u64 done = __atomic_load_n(&s->done, __ATOMIC_RELAXED);

		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != 1)
			continue;
		if (seen_start[i] != s->start_ns || seen_done[i] != done) {
			seen_start[i] = s->start_ns;
			seen_done[i] = done;
			moved[i] = t;
		} else if (t - moved[i] >= STALL_S * 1000000000ULL) {
			n++;
		}
	}
	return n;
}

/* What the workers still running are doing, for the log. */
static void report_stuck(void)
{
	__u64 t = now_ns();
	int i, shown = 0;

	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *s = &shm->slot[i];
		char path[64], wchan[64] = "?";
		FILE *f;

		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%u/wchan", s->tid);
		f = fopen(path, "r");
		if (f) {
			if (!fgets(wchan, sizeof(wchan), f))
				snprintf(wchan, sizeof(wchan), "?");
			fclose(f);
		}
		if (shown++ >= 20)
			continue;
		ksft_print_msg("stuck: tid %u (pid %u), %s, %llu of %llu iterations,\n",
			       s->tid, s->tgid, kind_name[s->kind], ULL(s->done),
			       ULL(s->quota));
		ksft_print_msg("  started %.0f s ago, wchan %s\n",
			       (t - s->start_ns) / 1e9, wchan);
	}
}

static void merge_stats(struct stats *to, const struct stats *from)
{
	int i, k;

	for (i = 0; i < NR_STATS; i++) {
		if (!to->n[i] && from->n[i])
			memcpy(to->msg[i], from->msg[i], sizeof(to->msg[i]));
		to->n[i] += from->n[i];
	}
	for (i = 0; i < 2; i++)
		for (k = 0; k < NR_KINDS; k++)
			to->kind[i][k] += from->kind[i][k];
}

static void progress(double t)
{
	const struct stats *st = &main_stats;

	ksft_print_msg("%.0f s: %llu samples, %llu deferred, %llu records, %llu ok, %llu lost;\n",
		       t, ULL(st->n[S_SAMPLES]), ULL(st->n[S_DEFERRED]),
		       ULL(st->n[S_RECORDS]), ULL(st->n[S_CLASSIFIED]), ULL(st->n[S_LOST]));
	ksft_print_msg("  %llu workers, %llu finished, %llu forks, %llu execs\n",
		       ULL(shm->count[C_WORKERS]), ULL(shm->count[C_FINISHED]),
		       ULL(shm->count[C_FORKS]), ULL(shm->count[C_EXECS]));
	ksft_print_msg("  %llu wrong stacks, %llu other code of ours, %llu foreign, %llu empty\n",
		       ULL(st->n[S_BAD_STACK]), ULL(st->n[S_OWN_OTHER]),
		       ULL(st->n[S_FOREIGN]), ULL(st->n[S_EMPTY]));
	if (st->n[S_BAD_STACK])
		ksft_print_msg("  first: %s\n", st->msg[S_BAD_STACK]);
}

/*
 * The checks, one TAP line each, by name: -l lists them (the harness
 * expects each of them), and a check that cannot run fails.
 */
enum check {
	CK_STACKS,
	CK_WORKERS,
	CK_FORK_EXEC,
	CK_SIGNALS,
	CK_COMPAT,
	CK_UPROBES,
	CK_URING,
	CK_WELL_FORMED,
	CK_ONE_RECORD,
	CK_MEETS,
	CK_COOKIES,
	CK_KERNEL_MODE,
	NR_CHECKS
};

static const char *const check_name[NR_CHECKS] = {
	[CK_STACKS] = "joined stacks equal the workloads' own",
	[CK_WORKERS] = "every worker finished its quota (no livelock)",
	[CK_FORK_EXEC] = "fork, exec, exec from threads: walked",
	[CK_SIGNALS] = "signals and sigreturn: walked",
	[CK_COMPAT] = "compat (-m32) tasks: walked",
	[CK_UPROBES] = "uprobes and uretprobes: walked",
	[CK_URING] = "io_uring: walked",
	[CK_WELL_FORMED] = "records are well formed",
	[CK_ONE_RECORD] = "at most one record per buffer per cookie",
	[CK_MEETS] = "every deferred sample meets its record",
	[CK_COOKIES] = "cookies well formed, records MISC_USER within sample_max_stack",
	[CK_KERNEL_MODE] = "deferred: kernel mode only, not io-wq workers nor uprobe events",
};

static void check_result(bool ok, enum check check)
{
	ksft_test_result(ok, "%s\n", check_name[check]);
}

/* One TAP line: ok when the stat is 0, else its count and first example. */
static void expect_none(const struct stats *st, int stat, int check)
{
	if (st->n[stat])
		ksft_print_msg("%s: %llu, first: %s\n", stat_name[stat],
			       ULL(st->n[stat]), st->msg[stat]);
	check_result(!st->n[stat], check);
}

static bool fail_if(const struct stats *st, int stat)
{
	if (!st->n[stat])
		return false;
	ksft_print_msg("%s: %llu, first: %s\n", stat_name[stat],
		       ULL(st->n[stat]), st->msg[stat]);
	return true;
}

static void usage(const char *prog)
{
	fprintf(stderr, "%s [-s SECONDS] [-S SEED] [-p PERIOD_US] [-r READY_FILE] [-v] | -l\n",
		prog);
	exit(KSFT_FAIL);
}

/* Every image of this program with one layout: re-exec without ASLR. */
static void no_aslr(char **argv)
{
	int pers = personality(0xffffffff);

	if (pers == -1 || (pers & ADDR_NO_RANDOMIZE))
		return;
	if (personality(pers | ADDR_NO_RANDOMIZE) == -1)
		return;
	execv("/proc/self/exe", argv);
}

/* The 32-bit program's ranges, from deferred_stress_32 learn. */
static const char *learn32(void)
{
	static char why[PATH_MAX + 64];
	char fd_arg[16];
	int status;
	pid_t pid;

	if (access(path32, X_OK)) {
		snprintf(why, sizeof(why), "no %s", path32);
		return why;
	}
	snprintf(fd_arg, sizeof(fd_arg), "%d", shm_fd);
	pid = fork();
	if (!pid) {
		execl(path32, "deferred_stress_32", "learn", fd_arg, NULL);
		_exit(2);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		snprintf(why, sizeof(why), "%s learn failed", path32);
		return why;
	}
	if (!shm->img[1].ready || shm->img[1].shm_size != sizeof(struct shm)) {
		snprintf(why, sizeof(why), "%s: shared memory of %llu bytes, want %zu",
			 path32, ULL(shm->img[1].shm_size),
			 sizeof(struct shm));
		shm->img[1].ready = 0;
		return why;
	}
	return NULL;
}

static void stop_events(void)
{
	int i;

	sys_domain->off_ns = now_ns();
	for (i = 0; i < nr_cpus; i++)
		ioctl(sys_fd[i], PERF_EVENT_IOC_DISABLE, 0);
}

static void report_numbers(void)
{
	const struct stats *st = &main_stats;
	int i, k;

	ksft_print_msg("%s\n", "stress: the numbers");
	for (i = 0; i < NR_STATS; i++)
		ksft_print_msg("  %-36s %llu\n", stat_name[i], ULL(st->n[i]));
	for (i = 0; i < NR_COUNTS; i++)
		ksft_print_msg("  %-36s %llu\n", count_name[i], ULL(shm->count[i]));
	ksft_print_msg("  %-36s %llu\n", "CPU hops", ULL(hops));
	ksft_print_msg("  %-36s %llu\n", "signals sent", ULL(signals_sent));
	for (i = 0; i < 2; i++)
		for (k = 0; k < NR_KINDS; k++)
			ksft_print_msg("  checked records, %s image, %-10s %llu\n",
				       i ? "32-bit" : "64-bit", kind_name[k],
				       ULL(st->kind[i][k]));
	for (i = 0; i < nr_domains; i++)
		if (domains[i].lost || domains[i].lossy)
			ksft_print_msg("  lossy family %s: %llu in LOST records, %llu counted\n",
				       domains[i].name, ULL(domains[i].lost),
				       ULL(domains[i].format_lost));
}

static void report_stacks(const struct stats *st)
{
	bool bad = fail_if(st, S_BAD_STACK);
	int i;

	if (!st->n[S_CLASSIFIED]) {
		ksft_print_msg("no record of the workloads' own code to check\n");
		bad = true;
	}
	/* a signal that interrupted unknown code: its sigreturn is unknown */
	for (i = 0; i < nr_domains; i++) {
		if (domains[i].sig_elsewhere <= shm->count[C_SIG_ELSEWHERE])
			continue;
		ksft_print_msg("%s: %llu sigreturn records of unknown frames,\n",
			       domains[i].name, ULL(domains[i].sig_elsewhere));
		ksft_print_msg("but only %llu signals came elsewhere\n",
			       ULL(shm->count[C_SIG_ELSEWHERE]));
		bad = true;
	}
	ksft_print_msg("%llu records checked, %llu at sigreturn\n",
		       ULL(st->n[S_CLASSIFIED]), ULL(st->n[S_SIGRETURN]));
	check_result(!bad, CK_STACKS);
}

static void report_workers(void)
{
	bool bad = false;
	int i;

	if (nr_stalled) {
		ksft_print_msg("%d workers made no progress for %d s: livelock or hang\n",
			       nr_stalled, STALL_S);
		bad = true;
	}
	ksft_print_msg("%llu workers started, %llu finished their quota, %llu iterations\n",
		       ULL(shm->count[C_WORKERS]), ULL(shm->count[C_FINISHED]),
		       ULL(shm->count[C_ITERS]));
	if (shm->count[C_WORKERS] != shm->count[C_FINISHED] || !shm->count[C_FINISHED])
		bad = true;
	for (i = 0; i < nr_loads; i++) {
		if (loads[i].reaped && WIFEXITED(loads[i].status) &&
		    !WEXITSTATUS(loads[i].status))
			continue;
		ksft_print_msg("load %s: %s, status %#x\n", loads[i].name,
			       loads[i].reaped ? "exited" : "killed", loads[i].status);
		bad = true;
	}
	if (shm->count[C_ABNORMAL]) {
		ksft_print_msg("%llu abnormal exits, first: %s\n",
			       ULL(shm->count[C_ABNORMAL]), shm->abnormal);
		bad = true;
	}
	check_result(!bad, CK_WORKERS);
}

static void report_parts(const struct stats *st, const char *why32, const char *why_uring)
{
	__u64 uring = st->kind[0][K_URING] + st->kind[1][K_URING];
	__u64 execs = st->kind[0][K_EXEC] + st->kind[1][K_EXEC];
	__u64 compat = 0;
	bool bad;
	int k;

	for (k = 0; k < NR_KINDS; k++)
		compat += st->kind[1][k];

	ksft_print_msg("forks %llu, exec'd images %llu, execs from threads %llu\n",
		       ULL(shm->count[C_FORKS]), ULL(shm->count[C_EXEC_IMAGES]),
		       ULL(shm->count[C_EXEC_THREADS]));
	ksft_print_msg("records of execve() checked: %llu\n", ULL(execs));
	bad = !shm->count[C_FORKS] || !shm->count[C_EXEC_IMAGES] ||
	      !shm->count[C_EXEC_THREADS] || !execs;
	check_result(!bad, CK_FORK_EXEC);

	ksft_print_msg("signals %llu, sigreturn records %llu, tgkill records %llu\n",
		       ULL(shm->count[C_SIGNALS]), ULL(st->n[S_SIGRETURN]),
		       ULL(st->kind[0][K_KILL] + st->kind[1][K_KILL]));
	bad = !st->n[S_SIGRETURN] || !shm->count[C_SIGNALS] ||
	      !(st->kind[0][K_KILL] + st->kind[1][K_KILL]);
	check_result(!bad, CK_SIGNALS);

	if (why32) {
		ksft_print_msg("no compat (-m32) load: %s\n", why32);
		check_result(false, CK_COMPAT);
	} else {
		ksft_print_msg("records of the 32-bit workers checked: %llu\n", ULL(compat));
		check_result(compat > 0, CK_COMPAT);
	}

	if (uprobe_why[0] || tp_id[TP_PROBE64] < 0) {
		ksft_print_msg("no uprobes: %s\n",
			       uprobe_why[0] ? uprobe_why : "no uprobe events");
		check_result(false, CK_UPROBES);
	} else {
		ksft_print_msg("uprobe event samples %llu; records in stress_probed():\n",
			       ULL(st->n[S_UPROBE_SAMPLES]));
		ksft_print_msg("%llu at its edges, %llu in its body\n",
			       ULL(st->n[S_PROBED_ENTRY]), ULL(st->n[S_PROBED_BODY]));
		bad = !st->n[S_UPROBE_SAMPLES] || !st->n[S_PROBED_BODY] ||
		      !st->n[S_PROBED_ENTRY];
		check_result(!bad, CK_UPROBES);
	}

	if (why_uring) {
		ksft_print_msg("no io_uring load: %s\n", why_uring);
		check_result(false, CK_URING);
	} else {
		ksft_print_msg("io_uring requests %llu, failed %llu, records %llu\n",
			       ULL(shm->count[C_URING_OPS]), ULL(shm->count[C_URING_BAD]),
			       ULL(uring));
		ksft_print_msg("io-wq worker samples %llu\n", ULL(st->n[S_IOWRK_SAMPLES]));
		bad = !shm->count[C_URING_OPS] || shm->count[C_URING_BAD] || !uring;
		check_result(!bad, CK_URING);
	}
}

static void report(double seconds, const char *why32, const char *why_uring)
{
	const struct stats *st = &main_stats;
	bool bad;

	report_numbers();
	expect_none(st, S_MALFORMED, CK_WELL_FORMED);
	expect_none(st, S_DUP, CK_ONE_RECORD);
	report_stacks(st);

	bad = fail_if(st, S_UNRESOLVED) | fail_if(st, S_TID_MISMATCH);
	ksft_print_msg("%llu joined, %llu unresolved after losses, %llu in stopped stays\n",
		       ULL(st->n[S_JOINED]), ULL(st->n[S_UNRESOLVED_LOST]),
		       ULL(st->n[S_UNRESOLVED_STOPPED]));
	check_result(!bad, CK_MEETS);

	bad = fail_if(st, S_BAD_COOKIE) | fail_if(st, S_BAD_MISC) | fail_if(st, S_OVER_CAP);
	check_result(!bad, CK_COOKIES);

	bad = fail_if(st, S_DEFERRED_USER) | fail_if(st, S_USER_PART) |
	      fail_if(st, S_UPROBE_DEFERRED) | fail_if(st, S_IOWRK_DEFERRED);
	if (!st->n[S_DEFERRED]) {
		ksft_print_msg("no deferred sample at all\n");
		bad = true;
	}
	check_result(!bad, CK_KERNEL_MODE);

	report_workers();
	report_parts(st, why32, why_uring);

	/* one line, for harness/stress-guest */
	printf("# stress: %.0f s, %d events, %llu samples, %llu deferred,", seconds,
	       nr_opened, ULL(st->n[S_SAMPLES]), ULL(st->n[S_DEFERRED]));
	printf(" %llu records, %llu checked, %llu lost,", ULL(st->n[S_RECORDS]),
	       ULL(st->n[S_CLASSIFIED]), ULL(st->n[S_LOST]));
	printf(" %llu forks, %llu execs, %llu threads,", ULL(shm->count[C_FORKS]),
	       ULL(shm->count[C_EXECS]), ULL(shm->count[C_THREADS]));
	printf(" %llu workers, %llu iterations\n", ULL(shm->count[C_FINISHED]),
	       ULL(shm->count[C_ITERS]));
}

static int checker_main(int argc, char **argv)
{
	double seconds = STRESS_SECONDS, margin, t0, t, last = 0, last_stall = 0;
	const char *ready = NULL, *why32, *why_uring = NULL;
	pthread_t churn, hopper, signaller;
	struct pollfd pfd[MAX_RINGS];
	bool stopped = false, killed = false;
	unsigned int seed = 1;
	int opt, i, fd;

	while ((opt = getopt(argc, argv, "s:S:r:p:vl")) != -1) {
		switch (opt) {
		case 'l':
			for (i = 0; i < NR_CHECKS; i++)
				printf("%s\n", check_name[i]);
			return 0;
		case 's':
			seconds = atof(optarg);
			break;
		case 'S':
			seed = strtoul(optarg, NULL, 0);
			break;
		case 'p':
			period_us = strtoul(optarg, NULL, 0);
			if (!period_us)
				usage(argv[0]);
			break;
		case 'v':
			verbose = true;
			break;
		case 'r':
			ready = optarg;
			break;
		default:
			usage(argv[0]);
		}
	}
	no_aslr(argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ksft_print_header();
	if (geteuid())
		ksft_exit_skip("needs root: per-CPU events, tracefs, uprobes\n");
	if (!(personality(0xffffffff) & ADDR_NO_RANDOMIZE))
		ksft_exit_fail_msg("could not turn address space randomization off\n");
	ksft_set_plan(NR_CHECKS);
	margin = 120 + seconds / 5;

	fd = memfd_create("deferred_stress", 0);
	if (fd < 0 || ftruncate(fd, sizeof(struct shm)) || map_shm(fd))
		ksft_exit_fail_msg("shared memory: %s\n", strerror(errno));
	shm->seed = seed;
	ksft_print_msg("seed %u (-S %u replays the draws)\n", seed, seed);
	if (install_handler())
		ksft_exit_fail_msg("sigaction: %s\n", strerror(errno));
	nr_cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (nr_cpus > MAX_CPUS)
		nr_cpus = MAX_CPUS;
	if (read_number("/proc/sys/kernel/perf_event_max_stack") > 0)
		max_stack = read_number("/proc/sys/kernel/perf_event_max_stack");

	if (learn_image(&shm->img[0]))
		ksft_exit_fail_msg("could not learn this program's addresses\n");
	calibrate(shm->img[0].rate, ~0u);
	shm->img[0].ready = 1;
	if (!shm->img[0].rate[K_URING]) {
		struct uring *u = uring_alloc(4);

		static char why[80];

		snprintf(why, sizeof(why), "io_uring_setup(): %s",
			 u ? "works, but the calibration failed" : strerror(errno));
		why_uring = why;
		if (u)
			uring_free(u);
	}
	if (readlink("/proc/self/exe", self_path, sizeof(self_path) - 1) < 0)
		ksft_exit_fail_msg("/proc/self/exe: %s\n", strerror(errno));
	snprintf(path32, sizeof(path32), "%s_32", self_path);
	why32 = learn32();
	for (i = 0; i < NR_KINDS; i++)
		ksft_print_msg("calibration: %s: %llu/s (64-bit), %llu/s (32-bit)\n",
			       kind_name[i], ULL(shm->img[0].rate[i]),
			       ULL(shm->img[1].rate[i]));

	tracefs = tracefs_root();
	for (i = 0; i < NR_TPS; i++)
		tp_id[i] = i < TP_PROBE64 ? read_tp_id(tp_name[i]) : -1;
	for (i = 0; i < TP_PROBE64; i++)
		if (tp_id[i] < 0)
			ksft_print_msg("no tracepoint %s: its events are left out\n",
				       tp_name[i]);
	if (tracefs) {
		uprobes_remove();
		uprobe_add(TP_PROBE64, self_path, shm->img[0].probe_off);
		uprobe_add(TP_RPROBE64, self_path, shm->img[0].probe_off);
		if (!why32) {
			uprobe_add(TP_PROBE32, path32, shm->img[1].probe_off);
			uprobe_add(TP_RPROBE32, path32, shm->img[1].probe_off);
		}
	} else {
		snprintf(uprobe_why, sizeof(uprobe_why), "no tracefs");
	}
	fork_load("threads", L_THREADS, false);
	fork_load("uprobe", L_UPROBE, false);
	fork_load("io_uring", L_URING, false);
	fork_load("forker", L_FORKER, false);
	if (!why32) {
		fork_load("threads32", L_THREADS, true);
		fork_load("forker32", L_FORKER, true);
	}
	for (i = 0; i < nr_loads; i++) {
		int first = nr_rings, j;

		open_load_events(&loads[i]);
		for (j = first; j < nr_rings; j++)
			rings[j].load = i;
	}
	open_system_events();
	qsort(events, nr_events, sizeof(events[0]), evinfo_cmp);
	ksft_print_msg("%d events, %d buffers, %d CPUs; %.0f s\n", nr_opened, nr_rings,
		       nr_cpus, seconds);

	/* the reader first: what it falls behind on is lost */
	setpriority(PRIO_PROCESS, 0, -10);
	t0 = now_ns() / 1e9;
	for (i = 0; i < nr_loads; i++)
		close(loads[i].go);
	if (pthread_create(&churn, NULL, churn_main, NULL) ||
	    pthread_create(&hopper, NULL, hopper_main, NULL) ||
	    pthread_create(&signaller, NULL, signaller_main, NULL))
		ksft_exit_fail_msg("pthread_create: %s\n", strerror(errno));
	if (ready) {
		fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0)
			close(fd);
	}

	for (;;) {
		int n = 0;

		for (i = 0; i < nr_rings; i++) {
			/* the events of a load that exited poll as hung up */
			if (rings[i].unread ||
			    (rings[i].load >= 0 && loads[rings[i].load].reaped))
				continue;
			pfd[n].fd = rings[i].r.fd;
			pfd[n++].events = POLLIN;
		}
		poll(pfd, n, 50);
		drain_all();
		t = now_ns() / 1e9 - t0;
		if (reap_loads())
			break;
		if (t >= seconds && !stopped) {
			__atomic_store_n(&shm->stop, 1, __ATOMIC_RELEASE);
			__atomic_store_n(&helpers_stop, true, __ATOMIC_RELEASE);
			stopped = true;
			ksft_print_msg("%.0f s: stopping, waiting for the workers' quotas\n", t);
		}
		if (t - last_stall >= 10 && !killed) {
			last_stall = t;
			nr_stalled = stalled_workers();
		}
		if ((nr_stalled || t >= seconds + margin) && !killed) {
			if (nr_stalled)
				ksft_print_msg("%.0f s: %d workers made no progress for %d s\n",
					       t, nr_stalled, STALL_S);
			else
				ksft_print_msg("%.0f s: workers at work %.0f s after the end\n",
					       t, margin);
			report_stuck();
			for (i = 0; i < nr_loads; i++)
				if (!loads[i].reaped)
					kill(loads[i].pid, SIGKILL);
			killed = true;
		}
		if (t - last >= 10) {
			progress(t);
			last = t;
		}
	}
	t = now_ns() / 1e9 - t0;
	pthread_join(churn, NULL);
	pthread_join(hopper, NULL);
	pthread_join(signaller, NULL);
	stop_events();
	drain_all();
	for (i = 0; i < nr_rings; i++) {
		struct sring *s = &rings[i];

		if (!s->unread)
			continue;
		sring_drain(s);
		/* never read: full, or it would not have lost anything */
		if (s->r.off + 4096 > s->r.data_size)
			s->d->lossy = true;
	}
	/* also the losses no PERF_RECORD_LOST told of: none was written since */
	for (i = 0; i < nr_events; i++) {
		__u64 lost = lost_count(events[i].fd);

		if (lost && events[i].d) {
			events[i].d->lossy = true;
			events[i].d->format_lost += lost;
		}
	}
	for (i = 0; i < nr_missed; i++) {
		int j;

		for (j = 0; j < nr_domains; j++) {
			const struct centry *e = ctab_find(&domains[j].t, missed[i]);

			if (e)
				ksft_print_msg("missed %#llx: %s: tid %u, rings %#llx at %llu\n",
					       ULL(missed[i]), domains[j].name, e->tid1 - 1,
					       ULL(e->rings), ULL(e->rtime));
		}
	}
	/* all first, so that each can look the others' cookies up */
	for (i = 0; i < nr_domains; i++)
		domain_finish(&domains[i]);
	for (i = 0; i < nr_domains; i++)
		domain_free(&domains[i]);
	merge_stats(&main_stats, &churn_stats);
	for (i = 0; i < nr_rings; i++)
		close_ring(&rings[i].r);
	uprobes_remove();
	report(t, why32, why_uring);
	ksft_finished();
}
#endif /* __x86_64__ */

int main(int argc, char **argv)
{
	find_labels();
	if (argc > 1 && !strcmp(argv[1], "load"))
		return load_main(&argv[1]);
	if (argc > 1 && !strcmp(argv[1], "exec-child"))
		return exec_child_main(&argv[1]);
	if (argc > 1 && !strcmp(argv[1], "learn"))
		return learn_main(&argv[1]);
#ifdef __x86_64__
	return checker_main(argc, argv);
#else
	ksft_print_header();
	ksft_exit_skip("the checker is the 64-bit build; this one runs its loads\n");
#endif
}
