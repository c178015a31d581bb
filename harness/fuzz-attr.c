// SPDX-License-Identifier: GPL-2.0
/*
 * An attribute fuzzer for perf_event_open() around
 * PERF_SAMPLE_CALLCHAIN_DEFERRED: random perf_event_attrs with and without
 * the bit (sample_type and flag bits, branch stacks, user registers and
 * stacks, AUX fields, inherit, precise_ip, odd attr.size), opened on the
 * fuzzer itself, its threads, its children, per CPU and per cgroup, in
 * groups and with shared buffers; random ioctls, with bad arguments too;
 * mmaps of odd sizes and AUX areas, reads, polls, closes while the events
 * run; children that fork, exec and exit, threads that exit with events
 * on them, signals and ptrace stops, and system calls deep in a user call
 * chain so that deferred walks are pending all the time.
 *
 * Not a kselftest: the kernel's errors are expected, what counts is what
 * the kernel log, the hang watchdog and the leak check of the caller
 * (harness/fuzz-attr-guest) say. The fuzzer itself fails only when a
 * PERF_RECORD_CALLCHAIN_DEFERRED it reads back is malformed, and exits 2
 * when a worker hangs.
 *
 *	deferred_fuzz_attr [-s SEED] [-j WORKERS] [-c CGROUP_DIR] [-r RATE] [-v] SECONDS
 *
 * Each worker process draws every decision from its own random stream,
 * seeded from SEED: the same seed replays the same sequence of attempts
 * (timing and the kernel's answers can still make runs diverge). -v logs
 * every operation on stderr; without it, the last operations of each
 * worker are printed when the kernel's taint flags change or a worker
 * hangs. -c gives a cgroup2 directory where the fuzzer may create two
 * cgroups and move its tasks, for cgroup events. -r sets
 * kernel.perf_event_max_sample_rate for the run (default 1000; 0 leaves
 * it), and the fuzzer restores it and kernel.perf_event_max_stack after.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "test_unwind_deferred_uapi.h"

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))

#define MAX_WORKERS		16
#define MAX_EVENTS		40	/* open events per worker */
#define MAX_EXTRA_MAPS		16	/* second mappings, closed events' mappings */
#define MAX_CHILDREN		6
#define MAX_THREADS		4
#define THREAD_EVENTS		3
#define MAX_MAPPED		(48UL << 20)	/* bytes of ring buffers per worker */
#define ATTR_BUF		4160	/* an attr of any size up to past a page */
#define OPLOG			32	/* operations remembered per worker */
#define OPLOG_LEN		160
#define CLEANUP_EVERY		100	/* iterations between full cleanups */
#define EXEC_DEPTH		2	/* re-execs of an exec'd child */
#define STORM_SIGNALS		500	/* signals in one iteration: a livelock */
#define STORM_END		20000	/* ... that break_storm() did not end */
/* The shortest periods of sigtrap events (see least_period()). */
#define SIGTRAP_MIN_CLOCK_NS	5000000
#define SIGTRAP_MIN_COUNT	1000
/* The shortest period of events on the irq_enable/irq_disable tracepoints. */
#define IRQ_TP_MIN_PERIOD	1000
#define NESTING_MAX		8	/* SIGTRAP handlers running at once */
#define NESTING_END		100
#define EXIT_STORM		3	/* a worker's status after STORM_END */
#define EXIT_FAULT		4	/* ... after SIGSEGV or SIGBUS */

/* ---- random numbers: splitmix64, one stream per worker, thread, child */

struct rng {
	__u64 s;
};

static __u64 rnd(struct rng *r)
{
	__u64 z;

	r->s += 0x9e3779b97f4a7c15ULL;
	z = r->s;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static __u64 below(struct rng *r, __u64 n)
{
	return n ? rnd(r) % n : 0;
}

static bool chance(struct rng *r, unsigned int percent)
{
	return below(r, 100) < percent;
}

#define PICK(r, a)		((a)[below((r), sizeof(a) / sizeof((a)[0]))])

/* ---- what the machine offers, found once by the main process */

#define MAX_TP			24
#define MAX_PMU			32
#define MAX_KADDR		8

static struct {
	long page;
	int ncpus;		/* online */
	int cpus_conf;		/* configured: bound of a cookie's CPU */
	int tp[MAX_TP];		/* tracepoint ids */
	int nr_tp;
	int irq_tp[2];		/* of them, preemptirq's: -1, none */
	__u32 pmu[MAX_PMU];	/* every PMU's type */
	int nr_pmu;
	int kprobe_type, uprobe_type;	/* -1: none */
	__u64 kprobe_ret, uprobe_ret;	/* their retprobe config bit */
	__u64 kaddr[MAX_KADDR];	/* kernel text for execute breakpoints */
	int nr_kaddr;
	char exe[512];
	__u64 uprobe_off;	/* file offset of uprobe_target(), 0: none */
	int cg_fd[2];		/* cgroup directories, -1: none */
	char cg_procs[2][640];
	__u64 taint;		/* kernel taint flags at start */
	bool verbose;
	double deadline;
	__u64 seed;
} env;

/* ---- counters and operation logs, shared by every process of the run */

enum {
	ST_ITER, ST_OPEN, ST_OPEN_OK, ST_OPEN_DEFERRED, ST_IOCTL, ST_IOCTL_OK,
	ST_MMAP, ST_MMAP_OK, ST_READ, ST_FORK, ST_EXEC, ST_THREAD, ST_SIGNAL,
	ST_PTRACE, ST_RECORDS, ST_DEFERRED, ST_MALFORMED, ST_CLOSE, ST_BPF,
	ST_WORKER_DIED, ST_STORM, ST_SIGTRAP, ST_UDT, ST_FAULT, ST_NR
};

#define NR_ERRNO		140

struct oplog {
	unsigned int next;
	char op[OPLOG][OPLOG_LEN];
};

struct shared {
	__u64 st[ST_NR];
	__u64 open_errno[NR_ERRNO];
	__u64 taint_seen;
	struct oplog log[MAX_WORKERS];
	/* What each worker's open events are, for a hang's report. */
	char ev_desc[MAX_WORKERS][MAX_EVENTS][OPLOG_LEN];
	bool ev_async[MAX_WORKERS][MAX_EVENTS];
};

static struct shared *sh;

static void stat_add(int which, __u64 n)
{
	__atomic_fetch_add(&sh->st[which], n, __ATOMIC_RELAXED);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- one worker's state (a process; its children get a copy) */

struct event {
	int fd;			/* -1: free slot */
	bool dup;		/* dup() of another slot's fd: never mapped */
	bool foreign;		/* the parent's, in a child: never mapped */
	bool deferred;		/* opened with PERF_SAMPLE_CALLCHAIN_DEFERRED */
	bool backward;		/* attr.write_backward */
	bool overwrite;		/* some mapping of it was read-only */
	__u64 min_period;	/* PERF_EVENT_IOC_PERIOD goes no lower */
	struct perf_event_mmap_page *meta;
	size_t map_len;
	bool writable;
	bool tail_bad;		/* we wrote a bogus data_tail */
	__u64 tail;
};

struct extra_map {
	void *addr;
	size_t len;
};

struct thread_slot {
	bool used;
	pthread_t pt;
	__u64 seed;
	int tid;
	int fd[THREAD_EVENTS];
	void *map[THREAD_EVENTS];
	size_t map_len[THREAD_EVENTS];
};

static struct {
	int id;
	struct rng r;
	bool child;		/* a fork of the worker */
	int main_tid;
	__u64 iter;
	struct event ev[MAX_EVENTS];
	struct extra_map extra[MAX_EXTRA_MAPS];
	size_t mapped;
	pid_t kid[MAX_CHILDREN];
	bool kid_traced[MAX_CHILDREN];
	struct thread_slot thr[MAX_THREADS];
	int bpf_fd[3];
	void *bad;		/* a PROT_NONE page */
	int devzero, devnull, pipe[2];
	int udt;		/* lib/test_unwind_deferred.c's device, -1: none */
} w;

static void logop(const char *fmt, ...)
{
	struct oplog *l = &sh->log[w.id];
	unsigned int slot;
	va_list ap;
	char *p;
	int n;

	slot = __atomic_fetch_add(&l->next, 1, __ATOMIC_RELAXED) % OPLOG;
	p = l->op[slot];
	n = snprintf(p, OPLOG_LEN, "%s%llu: ", w.child ? "child " : "",
		     (unsigned long long)w.iter);
	va_start(ap, fmt);
	vsnprintf(p + n, OPLOG_LEN - n, fmt, ap);
	va_end(ap);
	if (env.verbose)
		fprintf(stderr, "fuzz-attr[%d/%d]: %s\n", w.id, getpid(), p);
}

static void dump_oplog(int id, const char *why)
{
	struct oplog *l = &sh->log[id];
	unsigned int i, next = __atomic_load_n(&l->next, __ATOMIC_RELAXED);

	fprintf(stderr, "fuzz-attr: worker %d, %s; its last operations:\n", id, why);
	for (i = next > OPLOG ? next - OPLOG : 0; i < next; i++)
		fprintf(stderr, "fuzz-attr:   [%d] %s\n", id, l->op[i % OPLOG]);
	fprintf(stderr, "fuzz-attr: worker %d's open events:\n", id);
	for (i = 0; i < MAX_EVENTS; i++)
		if (sh->ev_desc[id][i][0])
			fprintf(stderr, "fuzz-attr:   [%d] %s%s\n", id, sh->ev_desc[id][i],
				sh->ev_async[id][i] ? ", O_ASYNC" : "");
}

static __u64 read_taint(void)
{
	char buf[32] = "";
	int fd = open("/proc/sys/kernel/tainted", O_RDONLY);

	if (fd < 0)
		return 0;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	close(fd);
	return strtoull(buf, NULL, 10);
}

/* A new taint flag (WARN, KASAN, ...): say what this worker did last. */
static void check_taint(void)
{
	__u64 t = read_taint(), seen;

	if (t == env.taint)
		return;
	seen = __atomic_exchange_n(&sh->taint_seen, t, __ATOMIC_RELAXED);
	if (seen == t)
		return;
	fprintf(stderr, "fuzz-attr: kernel taint %#llx -> %#llx\n",
		(unsigned long long)env.taint, (unsigned long long)t);
	dump_oplog(w.id, "kernel tainted");
}

static const char max_stack_sysctl[] = "/proc/sys/kernel/perf_event_max_stack";
static const char max_rate_sysctl[] = "/proc/sys/kernel/perf_event_max_sample_rate";

static int read_int_file(const char *path, long long *val)
{
	char buf[64];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	*val = strtoll(buf, NULL, 0);
	return 0;
}

static int write_int_file(const char *path, long long val)
{
	char buf[32];
	int fd = open(path, O_WRONLY), ret = 0;

	if (fd < 0)
		return -1;
	snprintf(buf, sizeof(buf), "%lld\n", val);
	if (write(fd, buf, strlen(buf)) < 0)
		ret = -1;
	close(fd);
	return ret;
}

/* ---- signals: counted, so that signal frames come and go under samples */

/* Signals since the worker's last iteration began, and handlers running. */
static unsigned int storm, nesting;

/*
 * A sigtrap event or an O_ASYNC one whose event the handler's own system
 * calls trigger (rt_sigreturn at least: a tracepoint on every system call
 * entry, a watchpoint the handler hits), or a sigtrap event on a clock with
 * a period shorter than a signal delivery, feeds itself: the task only runs
 * signal handlers, nested ever deeper for SIGTRAP. A livelock of our
 * making: stop it, with signals off, events off, closed events' mappings
 * gone; and if that does not do it, end the worker (the main process
 * starts another).
 */
static void break_storm(void)
{
	static const char msg[] = "fuzz-attr: an unbreakable signal storm, worker ends\n";
	int i, j;

	__atomic_fetch_add(&sh->st[ST_STORM], 1, __ATOMIC_RELAXED);
	if (w.child)
		_exit(0);
	/* Their events, their fds on ours (O_ASYNC files), go with them. */
	for (i = 0; i < MAX_CHILDREN; i++)
		if (w.kid[i] > 0)
			kill(w.kid[i], SIGKILL);
	if (storm > STORM_END || nesting > NESTING_END) {
		if (write(2, msg, sizeof(msg) - 1) < 0)
			_exit(EXIT_STORM);
		_exit(EXIT_STORM);
	}
	prctl(PR_TASK_PERF_EVENTS_DISABLE);
	for (i = 0; i < MAX_EVENTS; i++) {
		if (w.ev[i].fd < 0)
			continue;
		fcntl(w.ev[i].fd, F_SETFL, 0);
		ioctl(w.ev[i].fd, PERF_EVENT_IOC_DISABLE, 0);
	}
	for (i = 0; i < MAX_THREADS; i++) {
		for (j = 0; j < THREAD_EVENTS; j++)
			if (w.thr[i].used && w.thr[i].fd[j] > 0)
				ioctl(w.thr[i].fd[j], PERF_EVENT_IOC_DISABLE, 0);
	}
	for (i = 0; i < MAX_EXTRA_MAPS; i++) {
		if (w.extra[i].addr && w.extra[i].len) {
			munmap(w.extra[i].addr, w.extra[i].len);
			w.mapped -= w.extra[i].len;
			w.extra[i].addr = NULL;
		}
	}
}

static void on_signal(int sig, siginfo_t *info, void *uc)
{
	unsigned int n, depth;

	(void)info;
	(void)uc;
	__atomic_fetch_add(&sh->st[sig == SIGTRAP ? ST_SIGTRAP : ST_SIGNAL], 1,
			   __ATOMIC_RELAXED);
	n = __atomic_add_fetch(&storm, 1, __ATOMIC_RELAXED);
	depth = __atomic_add_fetch(&nesting, 1, __ATOMIC_RELAXED);
	if ((n >= STORM_SIGNALS && !(n % 100)) || depth > NESTING_MAX)
		break_storm();
	else
		/* A system call in the handler: a stay begun in a signal frame. */
		syscall(SYS_getppid);
	__atomic_sub_fetch(&nesting, 1, __ATOMIC_RELAXED);
}

/*
 * A worker that faults: its own bug, or the kernel's (a register or stack
 * rewritten under it). Say where, on the alternate stack.
 */
static void on_fault(int sig, siginfo_t *info, void *ucv)
{
	ucontext_t *uc = ucv;
	unsigned long long ip = 0, sp = 0;
	char buf[200];
	int n;

#ifdef __x86_64__
	ip = uc->uc_mcontext.gregs[REG_RIP];
	sp = uc->uc_mcontext.gregs[REG_RSP];
#endif
	n = snprintf(buf, sizeof(buf),
		     "fuzz-attr: worker %d (pid %d): signal %d, address %p, ip %#llx, sp %#llx\n",
		     w.id, getpid(), sig, info->si_addr, ip, sp);
	if (write(2, buf, n) < 0)
		_exit(EXIT_FAULT);
	_exit(EXIT_FAULT);
}

static void install_fault_handlers(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS };
	struct sigaction sa;
	stack_t st;
	unsigned int i;

	st.ss_size = 1 << 16;
	st.ss_flags = 0;
	st.ss_sp = mmap(NULL, st.ss_size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (st.ss_sp == MAP_FAILED || sigaltstack(&st, NULL))
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	for (i = 0; i < ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &sa, NULL);
}

static void install_handlers(void)
{
	static const int sigs[] = { SIGUSR1, SIGUSR2, SIGIO, SIGTRAP };
	struct sigaction sa;
	unsigned int i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	for (i = 0; i < ARRAY_SIZE(sigs); i++) {
		/*
		 * SA_NODEFER: a sigtrap event's SIGTRAP is forced, and a
		 * forced signal that is blocked, as in its own handler, kills.
		 */
		sa.sa_flags = SA_SIGINFO | SA_RESTART | (sigs[i] == SIGTRAP ? SA_NODEFER : 0);
		sigaction(sigs[i], &sa, NULL);
	}
	signal(SIGPIPE, SIG_IGN);
}

/* ---- busy work: system calls at the bottom of a user call chain */

static __u64 watched[8];	/* breakpoints watch it; read() fills it */

struct busy {
	struct rng *r;
	int loops;
	int probe_depth;
	long sum;
};

static __attribute__((noipa)) long busy_leaf(struct busy *b)
{
	struct timespec ts = { 0, 0 };
	struct pollfd pfd[4];
	long ret = 0;
	char buf[512];
	int i, n;
	void *p;

	for (i = 0; i < b->loops; i++) {
		switch (below(b->r, 12)) {
		case 0:
		case 1:
			ret += syscall(SYS_getppid);
			break;
		case 2:
			/* The kernel writes a watched variable: #DB in kernel mode. */
			ret += read(w.devzero, watched, below(b->r, sizeof(watched) + 1));
			break;
		case 3:
			ret += read(w.devzero, buf, below(b->r, sizeof(buf)));
			break;
		case 4:
			if (write(w.pipe[1], buf, 64) == 64)
				ret += read(w.pipe[0], buf, 64);
			break;
		case 5:
			ret += sched_yield();
			break;
		case 6:
			ts.tv_nsec = below(b->r, 20000);
			ret += nanosleep(&ts, NULL);
			break;
		case 7:
			/* Page faults under the samples. */
			p = mmap(NULL, 3 * env.page, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p != MAP_FAILED) {
				memset(p, 1, 3 * env.page);
				munmap(p, 3 * env.page);
			}
			break;
		case 8:
			n = 0;
			for (int j = 0; j < MAX_EVENTS && n < 4; j++) {
				if (w.ev[j].fd >= 0 && chance(b->r, 30)) {
					pfd[n].fd = w.ev[j].fd;
					pfd[n++].events = POLLIN;
				}
			}
			ret += poll(pfd, n, 0);
			break;
		case 9:
			if (chance(b->r, 20)) {
				raise(chance(b->r, 50) ? SIGUSR1 : SIGUSR2);
				break;
			}
			ret += syscall(SYS_getpid);
			break;
		case 10:
			for (n = 0; n < 2000; n++)
				asm volatile("" ::: "memory");
			break;
		default:
			ret += syscall(SYS_gettid);
			break;
		}
	}
	return ret;
}

static long busy_deep(struct busy *b, int depth);

/* A uprobe and uretprobe target, in the middle of the chain. */
static __attribute__((noipa)) long uprobe_target(struct busy *b, int depth)
{
	return busy_deep(b, depth) + 1;
}

static __attribute__((noipa)) long busy_deep(struct busy *b, int depth)
{
	if (depth <= 0)
		return busy_leaf(b);
	if (depth == b->probe_depth)
		return uprobe_target(b, depth - 1) + 1;
	return busy_deep(b, depth - 1) + 1;
}

static void busy(struct rng *r, int max_loops)
{
	struct busy b = {
		.r = r,
		.loops = 1 + below(r, max_loops),
	};
	int depth = below(r, 8) ? below(r, 24) : below(r, 200);

	b.probe_depth = depth / 2;
	b.sum = busy_deep(&b, depth);
}

/* ---- attributes */

struct fattr {
	union {
		struct perf_event_attr attr;
		char raw[ATTR_BUF];
	};
	__u32 size;
};

static const __u64 periods[] = {
	0, 1, 2, 3, 10, 100, 1000, 10007, 100000, 1000000, 10000000,
	1ULL << 40, ~0ULL,
};

static const __u32 attr_sizes[] = {
	0, PERF_ATTR_SIZE_VER0, PERF_ATTR_SIZE_VER1, PERF_ATTR_SIZE_VER2,
	PERF_ATTR_SIZE_VER3, PERF_ATTR_SIZE_VER4, PERF_ATTR_SIZE_VER5,
	PERF_ATTR_SIZE_VER6, PERF_ATTR_SIZE_VER7, PERF_ATTR_SIZE_VER8,
	1, 63, 65, 100, 135, 137, 144, 256, 4095, 4096, 4097,
};

static const __u16 max_stacks[] = {
	0, 1, 2, 3, 8, 16, 32, 64, 126, 127, 128, 255, 1000, 65535,
};

/*
 * Functions that only run in task context. A perf kprobe event on a
 * function that samples run in hard interrupt context (perf_callchain(),
 * perf_callchain_defer_user()), closed while a CPU hits it, ends in
 * "Oops: int3 ... Fatal exception in interrupt" within minutes on the
 * test kernel under TCG, with or without PERF_SAMPLE_CALLCHAIN_DEFERRED:
 * the base kernel's kprobe removal, not this project. Kernel text in the
 * sampling path is still fuzzed with execute breakpoints (#DB, no text
 * patching), see find_kernel_text().
 */
static const char * const kfuncs[] = {
	"__x64_sys_getppid", "__x64_sys_sched_yield", "ksys_read",
	"no_such_function_here",
};

/* The flag bits after read_format: disabled is bit 0, sigtrap bit 37. */
static __u64 attr_flags(const struct perf_event_attr *a)
{
	__u64 flags;

	memcpy(&flags, (const char *)&a->read_format + sizeof(a->read_format),
	       sizeof(flags));
	return flags;
}

static void flip_flag(struct perf_event_attr *a, unsigned int bit)
{
	__u64 flags = attr_flags(a) ^ (1ULL << bit);

	memcpy((char *)&a->read_format + sizeof(a->read_format), &flags, sizeof(flags));
}

static void breakpoint_attr(struct rng *r, struct perf_event_attr *a)
{
	static const __u32 lens[] = {
		HW_BREAKPOINT_LEN_1, HW_BREAKPOINT_LEN_2, HW_BREAKPOINT_LEN_4,
		HW_BREAKPOINT_LEN_8,
	};

	a->type = PERF_TYPE_BREAKPOINT;
	a->config = 0;
	a->sample_period = chance(r, 70) ? 1 : PICK(r, periods);
	switch (below(r, 5)) {
	case 0:
	case 1:
		/* Written by read() in the kernel, and by us. */
		a->bp_type = chance(r, 50) ? HW_BREAKPOINT_W : HW_BREAKPOINT_RW;
		a->bp_len = PICK(r, lens);
		a->bp_addr = (uintptr_t)&watched[below(r, ARRAY_SIZE(watched))];
		break;
	case 2:
		a->bp_type = HW_BREAKPOINT_X;
		a->bp_len = sizeof(long);
		a->bp_addr = (uintptr_t)(chance(r, 50) ? (void *)busy_leaf :
					 (void *)uprobe_target);
		break;
	case 3:
		/* Kernel text: a #DB in kernel mode, in NMI context. */
		a->bp_type = HW_BREAKPOINT_X;
		a->bp_len = sizeof(long);
		a->bp_addr = env.nr_kaddr ? env.kaddr[below(r, env.nr_kaddr)] : 0;
		break;
	default:
		a->bp_type = below(r, 8);
		a->bp_len = below(r, 16);
		a->bp_addr = chance(r, 50) ? rnd(r) : (uintptr_t)&watched[0];
		break;
	}
}

static void mutate(struct rng *r, struct fattr *fa)
{
	static const __u64 freqs[] = { 1, 10, 100, 1000, 4000, 100000, 1ULL << 31 };
	static const __u32 stack_user[] = {
		0, 7, 8, 13, 64, 4096, 8192, 65528, 65536, 1U << 31,
	};
	static const int clocks[] = { 0, 1, 4, 5, 6, 7, 11, 3, -1, 100 };
	struct perf_event_attr *a = &fa->attr;
	__u32 sz;

	switch (below(r, 27)) {
	case 0:
		a->sample_type ^= 1ULL << below(r, 28);
		break;
	case 1:
		a->read_format ^= 1ULL << below(r, 6);
		break;
	case 2:
		flip_flag(a, below(r, 40));
		break;
	case 3:
		a->precise_ip = below(r, 4);
		break;
	case 4:
		a->sample_type |= PERF_SAMPLE_BRANCH_STACK;
		a->branch_sample_type = rnd(r) & ((1ULL << below(r, 21)) - 1);
		break;
	case 5:
		a->sample_type |= PERF_SAMPLE_REGS_USER;
		/* x86-64: 24 registers, of which the segment ones are refused. */
		a->sample_regs_user = chance(r, 70) ? rnd(r) & 0xff0fffULL : rnd(r);
		break;
	case 6:
		a->sample_type |= PERF_SAMPLE_REGS_INTR;
		a->sample_regs_intr = chance(r, 70) ? rnd(r) & 0xff0fffULL : rnd(r);
		break;
	case 7:
		a->sample_type |= PERF_SAMPLE_STACK_USER;
		a->sample_stack_user = PICK(r, stack_user);
		break;
	case 8:
		if (chance(r, 50))
			a->sample_type |= PERF_SAMPLE_AUX;
		a->aux_sample_size = chance(r, 50) ? 4096 : (__u32)rnd(r);
		a->aux_watermark = chance(r, 50) ? 0 : (__u32)rnd(r);
		a->aux_output = chance(r, 30);
		break;
	case 9:
		a->use_clockid = 1;
		a->clockid = PICK(r, clocks);
		break;
	case 10:
		a->sigtrap = 1;
		a->remove_on_exec = chance(r, 90);
		a->sig_data = rnd(r);
		break;
	case 11:
		a->config = chance(r, 50) ? below(r, 16) : rnd(r);
		break;
	case 12:
		a->config1 = rnd(r);
		a->config2 = chance(r, 50) ? 0 : rnd(r);
		break;
	case 13:
		a->config3 = rnd(r);
		break;
	case 14:
		sz = PICK(r, attr_sizes);
		fa->size = sz;
		/* A non-zero byte past the kernel's struct: E2BIG. */
		if (sz > sizeof(*a) && sz < ATTR_BUF && chance(r, 30))
			fa->raw[sizeof(*a) + below(r, sz - sizeof(*a))] = 1;
		break;
	case 15:
		if (env.nr_pmu && chance(r, 70))
			a->type = env.pmu[below(r, env.nr_pmu)];
		else
			a->type = below(r, 4) ? below(r, 8) : (__u32)rnd(r);
		break;
	case 16:
		a->freq = 1;
		a->sample_freq = PICK(r, freqs);
		break;
	case 17:
		a->exclude_callchain_user ^= 1;
		break;
	case 18:
		a->exclude_callchain_kernel ^= 1;
		break;
	case 19:
		a->sample_max_stack = PICK(r, max_stacks);
		break;
	case 20:
		a->watermark = 1;
		a->wakeup_watermark = chance(r, 50) ? below(r, 2 * env.page) : (__u32)rnd(r);
		break;
	case 21:
		a->sample_period = PICK(r, periods);
		break;
	case 22:
		a->inherit = 1;
		a->inherit_thread = chance(r, 40);
		a->inherit_stat = chance(r, 20);
		break;
	case 23:
		a->write_backward ^= 1;
		break;
	case 24:
		a->sample_type |= PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_CALLCHAIN_DEFERRED;
		break;
	case 25:
		a->sample_type = rnd(r) & ((PERF_SAMPLE_CALLCHAIN_DEFERRED << 2) - 1);
		break;
	default:
		a->mmap2 = 1;
		a->build_id = chance(r, 50);
		a->namespaces = chance(r, 30);
		a->ksymbol = chance(r, 30);
		a->bpf_event = chance(r, 30);
		a->text_poke = chance(r, 30);
		a->cgroup = chance(r, 30);
		break;
	}
}

/*
 * The shortest period an event of attr @a may have, 0 for any: those
 * below feed themselves, in the base kernel as well.
 *
 * A SIGTRAP per overflow of an event that counts while a signal is
 * delivered (a clock, the page faults of signal frames, the signal
 * tracepoints) feeds itself inside the kernel once its period is shorter
 * than a delivery: the task delivers signal after signal and never returns
 * to user space, where break_storm() could end it. A delivery on the test
 * kernel takes tens of microseconds; the deferred walk, which runs in each
 * one, makes it longer.
 *
 * An overflow that queues the event's irq_work (O_ASYNC, a wakeup,
 * PERF_EVENT_IOC_REFRESH's limit) takes a self-interrupt, whose entry
 * disables interrupts and whose exit enables them again: an event on
 * irq_disable or irq_enable with period 1 overflows in every one and
 * queues the next. The CPU takes irq_work interrupts back to back and the
 * task never runs another instruction (an RCU stall; harness/irq-work-storm.c
 * does it on the base kernel). Each round on the way back to user space
 * toggles interrupts more often when there is a signal to deliver: with a
 * SIGIO handler, irq_disable with period 10 stalls the base kernel too
 * (irq-work-storm 10 irq_disable handler), period 100 does not; the
 * deferred walk alone does not make ten (see the README).
 * IRQ_TP_MIN_PERIOD leaves most of every period to the task.
 */
static __u64 least_period(const struct perf_event_attr *a)
{
	unsigned int i;

	if (a->sigtrap && a->type == PERF_TYPE_SOFTWARE &&
	    a->config <= PERF_COUNT_SW_TASK_CLOCK)
		return SIGTRAP_MIN_CLOCK_NS;
	if (a->sigtrap &&
	    (a->type == PERF_TYPE_SOFTWARE || a->type == PERF_TYPE_TRACEPOINT))
		return SIGTRAP_MIN_COUNT;
	if (a->type != PERF_TYPE_TRACEPOINT)
		return 0;
	for (i = 0; i < ARRAY_SIZE(env.irq_tp); i++)
		if (env.irq_tp[i] >= 0 && a->config == (__u64)env.irq_tp[i])
			return IRQ_TP_MIN_PERIOD;
	return 0;
}

/* Counted by perf_swevent_event(): software events but the clocks, tracepoints. */
static bool counted_per_hit(const struct perf_event_attr *a)
{
	return a->type == PERF_TYPE_TRACEPOINT ||
	       (a->type == PERF_TYPE_SOFTWARE && a->config > PERF_COUNT_SW_TASK_CLOCK);
}

/*
 * What every attr gets before it is opened, however it was made:
 *
 * A tracepoint event is on one of env.tp, whose probes the harness keeps
 * registered (hold_tracepoints in harness/lib.sh): the first or second
 * probe of any other tracepoint rewrites its static call sites, which QEMU's
 * TCG does not survive (see the README). Types and configs come from the
 * "tracepoint" PMU's type and from mutations too, not only from
 * build_attr()'s tracepoint case.
 *
 * A sampling event gets a period of least_period() or longer, not a
 * frequency; and if it is counted by perf_swevent_event() (a software event
 * other than the clocks, a tracepoint), no PERF_SAMPLE_PERIOD: with that bit
 * such an event overflows at every hit, whatever its period, and reports
 * the hit's count as the period. An irq_enable event of period 1000 with
 * PERF_SAMPLE_PERIOD stalled a 30-minute run in irq_work interrupts as
 * period 1 does (harness/irq-work-storm.c, option sample-period).
 */
static void tame_attr(struct rng *r, struct perf_event_attr *a)
{
	unsigned int i;
	__u64 min;

	if (a->type == PERF_TYPE_TRACEPOINT) {
		for (i = 0; i < env.nr_tp; i++)
			if (a->config == (__u64)env.tp[i])
				break;
		if (!env.nr_tp) {
			a->type = PERF_TYPE_SOFTWARE;
			a->config = PERF_COUNT_SW_CPU_CLOCK;
		} else if (i == env.nr_tp) {
			a->config = env.tp[below(r, env.nr_tp)];
		}
	}

	min = least_period(a);
	if (!min || (!a->freq && !a->sample_period))
		return;
	a->freq = 0;
	if (a->sample_period < min)
		a->sample_period = min;
	if (counted_per_hit(a))
		a->sample_type &= ~(__u64)PERF_SAMPLE_PERIOD;
}

static void build_attr(struct rng *r, struct fattr *fa)
{
	struct perf_event_attr *a = &fa->attr;
	unsigned int k = below(r, 100), n;

	memset(fa, 0, sizeof(*fa));
	fa->size = sizeof(*a);
	a->sample_period = 10000 + below(r, 2000000);
	if (k < 30) {
		a->type = PERF_TYPE_SOFTWARE;
		a->config = below(r, 2);	/* cpu-clock, task-clock */
	} else if (k < 42) {
		a->type = PERF_TYPE_SOFTWARE;
		a->config = below(r, PERF_COUNT_SW_MAX + 1);
		a->sample_period = PICK(r, periods);
	} else if (k < 57 && env.nr_tp) {
		a->type = PERF_TYPE_TRACEPOINT;
		a->config = env.tp[below(r, env.nr_tp)];
		a->sample_period = chance(r, 70) ? 1 : PICK(r, periods);
	} else if (k < 62) {
		a->type = PERF_TYPE_HARDWARE;
		a->config = below(r, PERF_COUNT_HW_MAX + 1);
	} else if (k < 64) {
		a->type = PERF_TYPE_HW_CACHE;
		a->config = below(r, 8) | below(r, 4) << 8 | below(r, 3) << 16;
	} else if (k < 66) {
		a->type = PERF_TYPE_RAW;
		a->config = chance(r, 50) ? below(r, 0x10000) : rnd(r);
	} else if (k < 78) {
		breakpoint_attr(r, a);
	} else if (k < 83 && env.kprobe_type >= 0) {
		a->type = env.kprobe_type;
		a->config = chance(r, 30) ? env.kprobe_ret : 0;
		a->config1 = (uintptr_t)PICK(r, kfuncs);
		a->config2 = chance(r, 90) ? 0 : below(r, 16);
		a->sample_period = 1;
	} else if (k < 88 && env.uprobe_type >= 0 && env.uprobe_off) {
		a->type = env.uprobe_type;
		a->config = chance(r, 40) ? env.uprobe_ret : 0;
		a->config1 = (uintptr_t)env.exe;
		a->config2 = env.uprobe_off;
		a->sample_period = 1;
	} else if (env.nr_pmu) {
		a->type = env.pmu[below(r, env.nr_pmu)];
		a->config = chance(r, 50) ? below(r, 64) : rnd(r);
	} else {
		a->type = PERF_TYPE_SOFTWARE;
	}

	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			 PERF_SAMPLE_CALLCHAIN;
	if (chance(r, 75))
		a->sample_type |= PERF_SAMPLE_CALLCHAIN_DEFERRED;
	if (chance(r, 40))
		a->sample_type |= PERF_SAMPLE_PERIOD;
	if (chance(r, 30))
		a->sample_type |= PERF_SAMPLE_CPU;
	if (chance(r, 30))
		a->sample_type |= PERF_SAMPLE_ID;
	if (chance(r, 30))
		a->sample_type |= PERF_SAMPLE_IDENTIFIER;
	if (chance(r, 10))
		a->sample_type |= PERF_SAMPLE_STREAM_ID;
	if (chance(r, 10))
		a->sample_type |= PERF_SAMPLE_READ;
	if (chance(r, 10))
		a->sample_type |= PERF_SAMPLE_RAW;
	a->sample_id_all = chance(r, 80);
	a->disabled = chance(r, 15);
	a->inherit = chance(r, 25);
	a->exclude_kernel = chance(r, 5);
	a->exclude_user = chance(r, 5);
	a->exclude_hv = chance(r, 20);
	a->exclude_idle = chance(r, 5);
	a->mmap = chance(r, 15);
	a->comm = chance(r, 15);
	a->task = chance(r, 15);
	a->comm_exec = chance(r, 10);
	a->context_switch = chance(r, 10);
	a->enable_on_exec = chance(r, 8);
	a->wakeup_events = chance(r, 30) ? below(r, 8) : 0;
	if (chance(r, 30))
		a->sample_max_stack = PICK(r, max_stacks);
	if (chance(r, 10))
		a->read_format = below(r, PERF_FORMAT_MAX);

	for (n = 0; n < 12 && chance(r, 55); n++)
		mutate(r, fa);
	tame_attr(r, a);
	/*
	 * The upper half of a uprobe's config is the offset of a USDT
	 * semaphore, which the kernel increments in every process that maps
	 * the file: in ours, a random offset would corrupt the fuzzer.
	 */
	if (a->type == (__u32)env.uprobe_type)
		a->config &= 0xffffffffULL;
	/* attr.size 0 stands for PERF_ATTR_SIZE_VER0. */
	a->size = fa->size;
}

/*
 * Before the run: whether every attr the workers make, as op_open and
 * op_open_burst make them, keeps tame_attr()'s rules, so that a change to
 * the builders or the mutations that lets a storm through fails here and
 * not as an RCU stall 900 s into a run.
 */
static int check_tamed_attrs(__u64 seed)
{
	struct rng r = { .s = seed };
	const struct perf_event_attr *a;
	unsigned int i, limited = 0;
	struct fattr fa;
	__u64 min;

	a = &fa.attr;
	for (i = 0; i < 50000; i++) {
		build_attr(&r, &fa);
		if (i & 1) {
			mutate(&r, &fa);
			tame_attr(&r, &fa.attr);
		}
		min = least_period(a);
		if (!min || (!a->freq && !a->sample_period))
			continue;
		limited++;
		if (!a->freq && a->sample_period >= min &&
		    !(counted_per_hit(a) && (a->sample_type & PERF_SAMPLE_PERIOD)))
			continue;
		fprintf(stderr,
			"fuzz-attr: attr %u escapes its least period %llu: t %u c %#llx %s %llu st %#llx\n",
			i, (unsigned long long)min, a->type, (unsigned long long)a->config,
			a->freq ? "freq" : "period", (unsigned long long)a->sample_period,
			(unsigned long long)a->sample_type);
		return -1;
	}
	printf("fuzz-attr: %u attrs built, %u with a least period, all tamed\n", i, limited);
	return 0;
}

static int perf_open(struct fattr *fa, pid_t pid, int cpu, int group, unsigned long flags)
{
	return syscall(__NR_perf_event_open, &fa->attr, pid, cpu, group, flags);
}

static void count_open(struct fattr *fa, int fd, int err)
{
	stat_add(ST_OPEN, 1);
	if (fd >= 0) {
		stat_add(ST_OPEN_OK, 1);
		if (fa->attr.sample_type & PERF_SAMPLE_CALLCHAIN_DEFERRED)
			stat_add(ST_OPEN_DEFERRED, 1);
	} else if (err > 0 && err < NR_ERRNO) {
		__atomic_fetch_add(&sh->open_errno[err], 1, __ATOMIC_RELAXED);
	}
}

/* ---- the event table */

static struct event *free_slot(void)
{
	for (int i = 0; i < MAX_EVENTS; i++)
		if (w.ev[i].fd < 0)
			return &w.ev[i];
	return NULL;
}

static struct event *any_event(void)
{
	int n = 0, pick, i;

	for (i = 0; i < MAX_EVENTS; i++)
		n += w.ev[i].fd >= 0;
	if (!n)
		return NULL;
	pick = below(&w.r, n);
	for (i = 0; i < MAX_EVENTS; i++)
		if (w.ev[i].fd >= 0 && !pick--)
			return &w.ev[i];
	return NULL;
}

static int any_fd(void)
{
	struct event *e = any_event();

	return e ? e->fd : -1;
}

static void extra_map_add(void *addr, size_t len)
{
	for (int i = 0; i < MAX_EXTRA_MAPS; i++) {
		if (!w.extra[i].addr) {
			w.extra[i].addr = addr;
			w.extra[i].len = len;
			return;
		}
	}
	munmap(addr, len);
	w.mapped -= len;
}

static void unmap_event(struct event *e)
{
	if (!e->meta)
		return;
	munmap(e->meta, e->map_len);
	w.mapped -= e->map_len;
	e->meta = NULL;
	e->map_len = 0;
}

/* The worker's own events only: a child's slots are copies. */
static void describe_event(const struct event *e, const char *fmt, ...)
{
	int slot = e - w.ev;
	va_list ap;

	if (w.child)
		return;
	sh->ev_async[w.id][slot] = false;
	va_start(ap, fmt);
	vsnprintf(sh->ev_desc[w.id][slot], OPLOG_LEN, fmt, ap);
	va_end(ap);
}

static void describe_attr(const struct event *e, const struct perf_event_attr *a)
{
	describe_event(e, "fd %d: t %u c %#llx %s %llu st %#llx fl %#llx wake %u",
		       e->fd, a->type, (unsigned long long)a->config,
		       a->freq ? "freq" : "period",
		       (unsigned long long)a->sample_period,
		       (unsigned long long)a->sample_type,
		       (unsigned long long)attr_flags(a), a->wakeup_events);
}

static void close_event(struct event *e, bool keep_map)
{
	if (!w.child)
		sh->ev_desc[w.id][e - w.ev][0] = 0;
	if (e->meta) {
		if (keep_map && !w.child) {
			/* The event lives on, sampling, until the munmap. */
			extra_map_add(e->meta, e->map_len);
			e->meta = NULL;
		} else {
			unmap_event(e);
		}
	}
	close(e->fd);
	stat_add(ST_CLOSE, 1);
	memset(e, 0, sizeof(*e));
	e->fd = -1;
}

static void unmap_extra(void)
{
	for (int i = 0; i < MAX_EXTRA_MAPS; i++) {
		if (w.extra[i].addr) {
			munmap(w.extra[i].addr, w.extra[i].len);
			w.mapped -= w.extra[i].len;
			w.extra[i].addr = NULL;
		}
	}
}

/* Record "bad" once it is seen, with what it was; the run then fails. */
static void malformed(struct event *e, const char *what, __u64 a, __u64 b)
{
	stat_add(ST_MALFORMED, 1);
	fprintf(stderr, "fuzz-attr: worker %d: fd %d: %s (%#llx, %#llx)\n",
		w.id, e->fd, what, (unsigned long long)a, (unsigned long long)b);
	logop("MALFORMED fd %d: %s", e->fd, what);
}

static void ring_copy(struct event *e, void *dst, __u64 off, size_t len)
{
	char *data = (char *)e->meta + e->meta->data_offset;
	__u64 size = e->meta->data_size;
	size_t pos = off % size, first = len < size - pos ? len : size - pos;

	memcpy(dst, data + pos, first);
	memcpy((char *)dst + first, data, len - first);
}

/*
 * Read what the kernel wrote since the last time and give it back: each
 * record's size must fit, and a PERF_RECORD_CALLCHAIN_DEFERRED must hold
 * its nr ips, a real cookie (an odd high half, cpu + 1 in the low one) and
 * PERF_RECORD_MISC_USER. Only buffers with a single reader (us) and
 * forward writing, whose data_tail is ours.
 */
static void drain(struct event *e)
{
	struct perf_event_mmap_page *m = e->meta;
	struct perf_event_header h;
	__u64 head, pos, size, rec[3];
	__u32 cpu1;

	if (!m || !e->writable || e->backward || e->overwrite || !m->data_size)
		return;
	size = m->data_size;
	head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
	if (e->tail_bad) {
		/* Our bogus tail made garbage of the positions: start again. */
		e->tail_bad = false;
		e->tail = head;
		__atomic_store_n(&m->data_tail, head, __ATOMIC_RELEASE);
		return;
	}
	if (head - e->tail > size) {
		malformed(e, "data_head overtook data_tail", head, e->tail);
		e->tail = head;
	}
	for (pos = e->tail; pos < head; pos += h.size) {
		ring_copy(e, &h, pos, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - pos) {
			malformed(e, "record size", h.type, h.size);
			break;
		}
		stat_add(ST_RECORDS, 1);
		if (h.type != PERF_RECORD_CALLCHAIN_DEFERRED)
			continue;
		stat_add(ST_DEFERRED, 1);
		if (h.size < sizeof(h) + 2 * sizeof(__u64)) {
			malformed(e, "deferred record too short", h.size, 0);
			continue;
		}
		ring_copy(e, rec, pos + sizeof(h), 2 * sizeof(__u64));
		cpu1 = (__u32)rec[0];
		if (rec[1] > (h.size - sizeof(h) - 2 * sizeof(__u64)) / sizeof(__u64))
			malformed(e, "deferred record: nr past its size", rec[1], h.size);
		if (!((rec[0] >> 32) & 1) || cpu1 < 1 || cpu1 > (__u32)env.cpus_conf)
			malformed(e, "deferred record: bad cookie", rec[0], 0);
		if ((h.misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER)
			malformed(e, "deferred record: misc", h.misc, 0);
	}
	e->tail = head;
	__atomic_store_n(&m->data_tail, head, __ATOMIC_RELEASE);
}

/* ---- operations */

/* Who an event watches: self, a CPU, a child, a thread, a cgroup. */
static void pick_target(pid_t *pid, int *cpu, unsigned long *flags)
{
	struct rng *r = &w.r;
	unsigned int k = below(r, 100);
	int i, tid;

	*pid = 0;
	*cpu = -1;
	if (k < 40)
		return;
	if (k < 50) {
		*cpu = below(r, env.ncpus + 1);	/* one past: EINVAL */
		return;
	}
	if (k < 65) {
		*pid = -1;
		*cpu = below(r, env.ncpus);
		return;
	}
	if (k < 78) {
		i = below(r, MAX_CHILDREN);
		if (w.kid[i] > 0)
			*pid = w.kid[i];
		if (chance(r, 20))
			*cpu = below(r, env.ncpus);
		return;
	}
	if (k < 88) {
		i = below(r, MAX_THREADS);
		tid = __atomic_load_n(&w.thr[i].tid, __ATOMIC_ACQUIRE);
		if (w.thr[i].used && tid > 0)
			*pid = tid;
		return;
	}
	if (k < 94 && env.cg_fd[0] >= 0) {
		*pid = env.cg_fd[below(r, 2)];
		*cpu = below(r, env.ncpus);
		*flags |= PERF_FLAG_PID_CGROUP;
		return;
	}
	/* Nobody: ESRCH. Never a task outside this run. */
	*pid = chance(r, 50) ? -2 : 4000000;
}

static void op_open(void)
{
	struct rng *r = &w.r;
	unsigned long flags = 0;
	struct fattr fa;
	struct event *e;
	int group = -1, fd, err, cpu;
	pid_t pid;

	e = free_slot();
	if (!e) {
		close_event(any_event(), chance(r, 50));
		e = free_slot();
	}
	build_attr(r, &fa);
	pick_target(&pid, &cpu, &flags);
	if (chance(r, 30))
		group = any_fd();
	if (chance(r, 20))
		flags |= PERF_FLAG_FD_NO_GROUP;
	if (chance(r, 20))
		flags |= PERF_FLAG_FD_OUTPUT;
	if (chance(r, 20))
		flags |= PERF_FLAG_FD_CLOEXEC;
	if (chance(r, 2))
		flags |= 1UL << below(r, 64);
	fd = perf_open(&fa, pid, cpu, group, flags);
	err = fd < 0 ? errno : 0;
	count_open(&fa, fd, err);
	logop("open t %u c %#llx st %#llx fl %#llx sz %u pid %d cpu %d g %d f %#lx: %d %s",
	      fa.attr.type, (unsigned long long)fa.attr.config,
	      (unsigned long long)fa.attr.sample_type,
	      (unsigned long long)attr_flags(&fa.attr),
	      fa.size, pid, cpu, group, flags, fd, fd < 0 ? strerror(err) : "");
	if (fd < 0)
		return;
	e->fd = fd;
	e->deferred = !!(fa.attr.sample_type & PERF_SAMPLE_CALLCHAIN_DEFERRED);
	e->backward = fa.attr.write_backward;
	e->min_period = least_period(&fa.attr);
	describe_attr(e, &fa.attr);
}

/* Many attributes in a row, most refused: the validation, cheaply. */
static void op_open_burst(void)
{
	struct rng *r = &w.r;
	int i, n = 5 + below(r, 25), fd, ok = 0, cpu;
	unsigned long flags = 0;
	struct fattr fa;
	struct event *e;
	pid_t pid;

	for (i = 0; i < n; i++) {
		build_attr(r, &fa);
		/* More mutations than op_open: past the first check or two. */
		mutate(r, &fa);
		tame_attr(r, &fa.attr);
		fa.attr.size = fa.size;
		flags = 0;
		pick_target(&pid, &cpu, &flags);
		fd = perf_open(&fa, pid, cpu, chance(r, 20) ? any_fd() : -1, flags);
		count_open(&fa, fd, fd < 0 ? errno : 0);
		if (fd < 0)
			continue;
		ok++;
		e = chance(r, 20) ? free_slot() : NULL;
		if (!e) {
			close(fd);
			continue;
		}
		e->fd = fd;
		e->deferred = !!(fa.attr.sample_type & PERF_SAMPLE_CALLCHAIN_DEFERRED);
		e->backward = fa.attr.write_backward;
		e->min_period = least_period(&fa.attr);
		describe_attr(e, &fa.attr);
	}
	logop("open burst: %d of %d opened", ok, n);
}

static void op_close(void)
{
	struct event *e = any_event();

	if (!e)
		return;
	logop("close fd %d%s", e->fd, e->meta ? " (mapped)" : "");
	close_event(e, chance(&w.r, 50));
}

static void op_dup(void)
{
	struct event *e = any_event(), *d = free_slot();
	int fd;

	if (!e || !d)
		return;
	fd = dup(e->fd);
	logop("dup fd %d: %d", e->fd, fd);
	if (fd < 0)
		return;
	d->fd = fd;
	d->dup = true;
	d->min_period = e->min_period;
	describe_event(d, "fd %d: dup of fd %d", fd, e->fd);
}

/* A pointer the kernel must not write or read through. */
static void *bad_pointer(struct rng *r)
{
	static void * const bad[] = {
		NULL, (void *)1, (void *)0xffff888000000000ULL, (void *)-1L,
	};

	return chance(r, 50) ? w.bad : PICK(r, bad);
}

static void op_ioctl(void)
{
	static const char * const filters[] = {
		"", "common_pid != 0", "prev_pid > 0 && next_pid >= 0",
		"garbage (", "filter 0x1000/0x100@/bin/true", "start 0x0/4096",
		"cookie == 1 || nr > 3", "ip == 0x1234",
	};
	struct rng *r = &w.r;
	struct perf_event_query_bpf *q;
	char qbuf[sizeof(*q) + 8 * sizeof(__u32)];
	char longfilter[4200];
	__u64 junk[64];
	struct event *e = any_event();
	unsigned long cmd = 0, arg = 0;
	struct fattr fa;
	__u64 val;
	long ret;

	if (!e)
		return;
	switch (below(r, 13)) {
	case 0:
		cmd = PERF_EVENT_IOC_ENABLE;
		arg = chance(r, 30) ? PERF_IOC_FLAG_GROUP : 0;
		break;
	case 1:
		cmd = PERF_EVENT_IOC_DISABLE;
		arg = chance(r, 30) ? PERF_IOC_FLAG_GROUP : 0;
		break;
	case 2:
		cmd = PERF_EVENT_IOC_RESET;
		arg = chance(r, 30) ? PERF_IOC_FLAG_GROUP : 0;
		break;
	case 3:
		cmd = PERF_EVENT_IOC_REFRESH;
		arg = chance(r, 70) ? below(r, 4) : rnd(r);
		break;
	case 4:
		cmd = PERF_EVENT_IOC_PERIOD;
		val = PICK(r, periods);
		if (val < e->min_period)
			val = e->min_period;
		arg = (uintptr_t)(chance(r, 85) ? (void *)&val : bad_pointer(r));
		break;
	case 5:
		cmd = PERF_EVENT_IOC_SET_OUTPUT;
		arg = chance(r, 60) ? any_fd() : chance(r, 50) ? -1 : w.devnull;
		break;
	case 6:
		cmd = PERF_EVENT_IOC_SET_FILTER;
		if (chance(r, 10)) {
			memset(longfilter, 'a', sizeof(longfilter) - 1);
			longfilter[sizeof(longfilter) - 1] = 0;
			arg = (uintptr_t)longfilter;
		} else {
			arg = (uintptr_t)(chance(r, 85) ? (void *)PICK(r, filters) :
					  bad_pointer(r));
		}
		break;
	case 7:
		cmd = PERF_EVENT_IOC_ID;
		arg = (uintptr_t)(chance(r, 80) ? (void *)&val : bad_pointer(r));
		break;
	case 8:
		cmd = PERF_EVENT_IOC_SET_BPF;
		arg = chance(r, 80) ? w.bpf_fd[below(r, 3)] : chance(r, 50) ? -1 : w.devnull;
		stat_add(ST_BPF, 1);
		break;
	case 9:
		cmd = PERF_EVENT_IOC_PAUSE_OUTPUT;
		arg = chance(r, 80) ? below(r, 2) : rnd(r);
		break;
	case 10:
		cmd = PERF_EVENT_IOC_QUERY_BPF;
		q = (struct perf_event_query_bpf *)qbuf;
		memset(qbuf, 0, sizeof(qbuf));
		q->ids_len = chance(r, 80) ? below(r, 9) : (__u32)rnd(r);
		arg = (uintptr_t)(chance(r, 70) ? (void *)q : bad_pointer(r));
		break;
	case 11:
		cmd = PERF_EVENT_IOC_MODIFY_ATTRIBUTES;
		build_attr(r, &fa);
		if (chance(r, 60))
			breakpoint_attr(r, &fa.attr);
		arg = (uintptr_t)(chance(r, 85) ? (void *)&fa.attr : bad_pointer(r));
		break;
	default:
		/*
		 * Numbers next to the real ones, sizes and directions random:
		 * some are real ones (QUERY_BPF writes as many ids as its
		 * zeroed ids_len allows), the buffer is large for them.
		 */
		cmd = _IOC(below(r, 4), '$', below(r, 16), below(r, 256));
		memset(junk, 0, sizeof(junk));
		arg = chance(r, 50) ? (uintptr_t)bad_pointer(r) : (uintptr_t)junk;
		break;
	}
	ret = ioctl(e->fd, cmd, arg);
	stat_add(ST_IOCTL, 1);
	if (!ret)
		stat_add(ST_IOCTL_OK, 1);
	logop("ioctl fd %d cmd %#lx arg %#lx: %ld %s", e->fd, cmd, arg, ret,
	      ret < 0 ? strerror(errno) : "");
}

static void op_mmap(void)
{
	struct rng *r = &w.r;
	struct event *e = any_event();
	int prot = PROT_READ | PROT_WRITE, flags = MAP_SHARED;
	size_t pages, len;
	off_t off = 0;
	void *p;

	if (!e || e->dup || e->foreign)
		return;
	switch (below(r, 10)) {
	case 0:
		pages = 0;	/* len 0: EINVAL */
		break;
	case 1:
		pages = 1;	/* the control page only */
		break;
	case 2:
		pages = 1 + 3 + below(r, 3) * 2;	/* not a power of two */
		break;
	case 3:
		pages = 1 + (1UL << (8 + below(r, 5)));	/* large */
		break;
	default:
		pages = 1 + (1UL << below(r, 6));
		break;
	}
	len = pages * env.page;
	if (chance(r, 5))
		len += 1 + below(r, env.page - 1);	/* rounded up by mmap */
	if (w.mapped + len > MAX_MAPPED)
		return;
	if (chance(r, 15))
		prot = PROT_READ;	/* overwrite mode */
	if (chance(r, 4))
		flags = MAP_PRIVATE;
	if (chance(r, 4))
		off = below(r, 4) * env.page;
	p = mmap(NULL, len, prot, flags, e->fd, off);
	stat_add(ST_MMAP, 1);
	logop("mmap fd %d len %zu prot %d flags %d off %lld: %s", e->fd, len,
	      prot, flags, (long long)off, p == MAP_FAILED ? strerror(errno) : "ok");
	if (p == MAP_FAILED)
		return;
	stat_add(ST_MMAP_OK, 1);
	len = (len + env.page - 1) / env.page * env.page;
	w.mapped += len;
	if (!(prot & PROT_WRITE))
		e->overwrite = true;
	if (e->meta || off) {
		/* A second mapping of the same buffer: never read. */
		extra_map_add(p, len);
		return;
	}
	e->meta = p;
	e->map_len = len;
	e->writable = prot & PROT_WRITE;
	e->tail = __atomic_load_n(&e->meta->data_tail, __ATOMIC_RELAXED);
}

/* The AUX area: aux_offset and aux_size in the control page, then mmap. */
static void op_mmap_aux(void)
{
	struct rng *r = &w.r;
	struct event *e = any_event();
	size_t len;
	void *p;

	if (!e || !e->meta || !e->writable)
		return;
	len = (1UL << below(r, 5)) * env.page;
	if (chance(r, 10))
		len = 3 * env.page;
	e->meta->aux_offset = chance(r, 85) ? e->map_len : below(r, 8) * env.page;
	e->meta->aux_size = chance(r, 85) ? len : rnd(r);
	p = mmap(NULL, len, chance(r, 80) ? PROT_READ | PROT_WRITE : PROT_READ,
		 MAP_SHARED, e->fd, e->meta->aux_offset);
	stat_add(ST_MMAP, 1);
	logop("mmap aux fd %d off %llu size %llu: %s", e->fd,
	      (unsigned long long)e->meta->aux_offset,
	      (unsigned long long)e->meta->aux_size,
	      p == MAP_FAILED ? strerror(errno) : "ok");
	if (p == MAP_FAILED)
		return;
	stat_add(ST_MMAP_OK, 1);
	w.mapped += len;
	extra_map_add(p, len);
}

/* Odd things to do to a mapping, and to its control page. */
static void op_map_misc(void)
{
	struct rng *r = &w.r;
	struct event *e = any_event();
	long ret = 0;
	void *p;
	int prot;

	if (!e || !e->meta)
		return;
	switch (below(r, 7)) {
	case 0:
		logop("munmap fd %d", e->fd);
		unmap_event(e);
		return;
	case 1:
		/* Refused: a buffer mapping does not split. */
		ret = munmap((char *)e->meta + (chance(r, 50) ? 0 : e->map_len - env.page),
			     env.page);
		if (!ret) {
			/* It did split: forget the whole range. */
			munmap(e->meta, e->map_len);
			w.mapped -= e->map_len;
			e->meta = NULL;
		}
		break;
	case 2:
		ret = madvise(e->meta, e->map_len, MADV_DONTNEED);
		break;
	case 3:
		p = mremap(e->meta, e->map_len, e->map_len + env.page, MREMAP_MAYMOVE);
		if (p != MAP_FAILED) {
			/* Grew: should not have. Keep track of it anyway. */
			e->meta = p;
			w.mapped += env.page;
			e->map_len += env.page;
		}
		ret = p == MAP_FAILED ? -1 : 0;
		break;
	case 4:
		if (e->writable) {
			e->meta->data_tail = chance(r, 50) ? rnd(r) : e->meta->data_head + 8;
			e->tail_bad = true;
		}
		break;
	case 5:
		if (e->writable)
			e->meta->aux_tail = rnd(r);
		break;
	default:
		prot = chance(r, 50) ? PROT_READ : PROT_READ | PROT_WRITE;
		ret = mprotect(e->meta, e->map_len, prot);
		if (!ret)
			e->writable = prot & PROT_WRITE;
		break;
	}
	logop("map misc fd %d: %ld", e->fd, ret);
}

static void op_read(void)
{
	static const size_t sizes[] = { 0, 7, 8, 16, 24, 32, 40, 100, 4096 };
	struct rng *r = &w.r;
	struct event *e = any_event();
	char buf[4096];
	ssize_t ret;

	if (!e)
		return;
	if (chance(r, 90))
		ret = read(e->fd, buf, PICK(r, sizes));
	else
		ret = read(e->fd, bad_pointer(r), 64);
	stat_add(ST_READ, 1);
	logop("read fd %d: %zd", e->fd, ret);
}

static void op_fcntl(void)
{
	struct rng *r = &w.r;
	struct event *e = any_event();
	bool async;

	if (!e)
		return;
	/*
	 * The owner is this process only: a process group would have the
	 * children's events signal the worker, where break_storm() cannot
	 * stop them.
	 */
	fcntl(e->fd, F_SETOWN, getpid());
	fcntl(e->fd, F_SETSIG, chance(r, 50) ? 0 : SIGUSR2);
	async = chance(r, 70);
	fcntl(e->fd, F_SETFL, async ? O_ASYNC | O_NONBLOCK : 0);
	if (!w.child)
		sh->ev_async[w.id][e - w.ev] = async;
	logop("fcntl %s fd %d", async ? "async" : "sync", e->fd);
}

static void op_misc(void)
{
	struct rng *r = &w.r;
	char val[16];
	int fd, n;

	switch (below(r, 4)) {
	case 0:
		prctl(PR_TASK_PERF_EVENTS_DISABLE);
		busy(r, 10);
		prctl(PR_TASK_PERF_EVENTS_ENABLE);
		logop("prctl perf events disable, enable");
		break;
	case 1:
		/* EBUSY while callchain events exist, which is most of the time. */
		n = 1 + below(r, 127);
		logop("sysctl perf_event_max_stack %d: %d", n, write_int_file(max_stack_sysctl, n));
		break;
	case 2:
		if (env.cg_fd[0] >= 0) {
			/* Move the whole worker between the two cgroups. */
			fd = open(env.cg_procs[below(r, 2)], O_WRONLY);
			if (fd >= 0) {
				snprintf(val, sizeof(val), "%d\n", getpid());
				if (write(fd, val, strlen(val)) < 0)
					val[0] = 0;
				close(fd);
			}
			logop("cgroup move");
		}
		break;
	default:
		for (int i = 0; i < MAX_EVENTS; i++)
			drain(&w.ev[i]);
		break;
	}
}

/*
 * The other consumer of deferred walks, lib/test_unwind_deferred.c:
 * requests from task, interrupt and NMI context for either of its two
 * consumers, armed points at a system call, exec and signal, and the
 * registration limit (consumers unregistered while perf's requests fly).
 */
static void op_udt(void)
{
	static const __u32 nrs[] = {
		SYS_getppid, SYS_read, SYS_execve, SYS_rt_sigreturn, SYS_nanosleep,
		SYS_sched_yield, SYS_exit_group,
	};
	struct rng *r = &w.r;
	union {
		struct udt_request req;
		struct udt_arm arm;
		struct udt_arm_result res;
		struct udt_limit lim;
	} u;
	unsigned long cmd;
	__u32 i;
	long ret;

	if (w.udt < 0)
		return;
	memset(&u, 0, sizeof(u));
	switch (below(r, 12)) {
	case 0:
		cmd = UDT_IOC_RESET;
		break;
	case 1:
	case 2:
		cmd = UDT_IOC_ARM;
		u.arm.nr = chance(r, 90) ? PICK(r, nrs) : (__u32)rnd(r);
		u.arm.flags = below(r, chance(r, 90) ? 4 : 8);
		break;
	case 3:
		cmd = UDT_IOC_ARM_RESULT;
		break;
	case 4:
		/* Consumers come and go; rarely, it takes a grace period. */
		if (!chance(r, 20))
			return;
		cmd = UDT_IOC_LIMIT;
		break;
	default:
		cmd = UDT_IOC_REQUEST;
		u.req.nr_steps = chance(r, 95) ? 1 + below(r, UDT_MAX_STEPS) :
				 below(r, 2 * UDT_MAX_STEPS);
		for (i = 0; i < UDT_MAX_STEPS; i++) {
			u.req.steps[i].consumer = chance(r, 95) ? below(r, UDT_CONSUMERS) : 7;
			u.req.steps[i].context = chance(r, 95) ? below(r, 3) : 9;
		}
		break;
	}
	ret = ioctl(w.udt, cmd, &u);
	stat_add(ST_UDT, 1);
	logop("udt ioctl %#lx: %ld %s", cmd, ret, ret < 0 ? strerror(errno) : "");
}

/* ---- threads: exit with their events still open */

static void *thread_main(void *arg)
{
	struct thread_slot *t = arg;
	struct rng r = { t->seed };
	struct fattr fa;
	void *p;
	int i;

	__atomic_store_n(&t->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	for (i = 0; i < THREAD_EVENTS; i++) {
		t->fd[i] = -1;
		t->map[i] = NULL;
		if (!chance(&r, 60))
			continue;
		build_attr(&r, &fa);
		t->fd[i] = perf_open(&fa, chance(&r, 80) ? 0 : w.main_tid,
				     chance(&r, 80) ? -1 : (int)below(&r, env.ncpus), -1, 0);
		count_open(&fa, t->fd[i], errno);
		if (t->fd[i] < 0 || !chance(&r, 50))
			continue;
		p = mmap(NULL, 5 * env.page, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd[i], 0);
		stat_add(ST_MMAP, 1);
		if (p != MAP_FAILED) {
			stat_add(ST_MMAP_OK, 1);
			t->map[i] = p;
			t->map_len[i] = 5 * env.page;
		}
	}
	busy(&r, 30);
	return NULL;
}

static void reap_thread(struct thread_slot *t)
{
	int i;

	if (!t->used)
		return;
	pthread_join(t->pt, NULL);
	for (i = 0; i < THREAD_EVENTS; i++) {
		if (t->map[i])
			munmap(t->map[i], t->map_len[i]);
		if (t->fd[i] >= 0)
			close(t->fd[i]);
	}
	memset(t, 0, sizeof(*t));
}

static void op_thread(void)
{
	struct thread_slot *t = &w.thr[below(&w.r, MAX_THREADS)];

	reap_thread(t);
	t->seed = rnd(&w.r);
	t->tid = 0;
	t->used = !pthread_create(&t->pt, NULL, thread_main, t);
	if (t->used)
		stat_add(ST_THREAD, 1);
	logop("thread: %s", t->used ? "started" : strerror(errno));
}

/* ---- children */

static void exec_self(struct rng *r, int depth)
{
	char seed[32], d[16];
	char *argv[5] = { env.exe, "--exec-child", seed, d, NULL };
	char *true_argv[2] = { "true", NULL };

	stat_add(ST_EXEC, 1);
	if (chance(r, 25)) {
		execv("/bin/true", true_argv);
		return;
	}
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)rnd(r));
	snprintf(d, sizeof(d), "%d", depth);
	execv(env.exe, argv);
}

static void *child_thread_main(void *arg)
{
	struct rng *r = arg;

	busy(r, 20);
	/* exec from a thread that is not the leader: de_thread() */
	if (chance(r, 50))
		exec_self(r, EXEC_DEPTH);
	return NULL;
}

/*
 * A child: a few of the worker's operations on its copy of the table (the
 * events and fds are shared with the worker, the mappings are not), busy
 * work, maybe a thread, maybe ptrace stops, maybe exec; then exit.
 */
static void child_main(__u64 seed, bool traced)
{
	struct rng tr;
	pthread_t pt;
	int i, ops;

	w.r.s = seed;
	w.child = true;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (i = 0; i < MAX_EVENTS; i++) {
		w.ev[i].meta = NULL;	/* not copied: VM_DONTCOPY */
		w.ev[i].foreign = true;
	}
	memset(w.extra, 0, sizeof(w.extra));
	memset(w.thr, 0, sizeof(w.thr));
	memset(w.kid, 0, sizeof(w.kid));
	if (traced && !ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		raise(SIGSTOP);
	ops = below(&w.r, 8);
	for (i = 0; i < ops; i++) {
		switch (below(&w.r, 9)) {
		case 0:
		case 1:
			op_open();
			break;
		case 7:
			op_udt();
			break;
		case 2:
			op_ioctl();
			break;
		case 3:
			op_close();
			break;
		case 4:
			op_mmap();
			break;
		case 5:
			op_read();
			break;
		default:
			busy(&w.r, 15);
			break;
		}
	}
	if (chance(&w.r, 20)) {
		tr.s = rnd(&w.r);
		if (!pthread_create(&pt, NULL, child_thread_main, &tr)) {
			busy(&w.r, 15);
			pthread_join(pt, NULL);
		}
	}
	busy(&w.r, 20);
	if (chance(&w.r, 40))
		exec_self(&w.r, EXEC_DEPTH);
	/* Exit with whatever is still open and mapped. */
	_exit(0);
}

static void op_fork(void)
{
	int i = below(&w.r, MAX_CHILDREN);
	bool traced = chance(&w.r, 10);
	__u64 seed = rnd(&w.r);
	pid_t pid;

	if (w.kid[i] > 0)
		return;
	pid = fork();
	if (!pid)
		child_main(seed, traced);
	stat_add(ST_FORK, pid > 0);
	logop("fork: %d%s", pid, traced ? " traced" : "");
	if (pid > 0) {
		w.kid[i] = pid;
		w.kid_traced[i] = traced;
	}
}

static int kid_slot(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (w.kid[i] == pid)
			return i;
	return -1;
}

/* Reap exited children; let stopped tracees go on, sometimes poking them. */
static void reap_children(bool all)
{
	struct user_regs_struct regs;
	int status, i, sig;
	pid_t pid;

	if (all) {
		for (i = 0; i < MAX_CHILDREN; i++)
			if (w.kid[i] > 0)
				kill(w.kid[i], SIGKILL);
	}
	for (;;) {
		pid = waitpid(-1, &status, __WALL | (all ? 0 : WNOHANG));
		if (pid <= 0)
			break;
		i = kid_slot(pid);
		if (WIFSTOPPED(status)) {
			sig = WSTOPSIG(status);
			if (sig == SIGSTOP || sig == SIGTRAP)
				sig = 0;
			/* A register write by ptrace: the stay ends there. */
			if (chance(&w.r, 50) && !ptrace(PTRACE_GETREGS, pid, NULL, &regs))
				ptrace(PTRACE_SETREGS, pid, NULL, &regs);
			stat_add(ST_PTRACE, 1);
			ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
			continue;
		}
		if (i >= 0)
			w.kid[i] = 0;
	}
}

/* ---- the worker */

static int load_bpf(__u32 type, int ret)
{
	struct bpf_insn insn[2] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = ret },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_type = type;
	a.insns = (uintptr_t)insn;
	a.insn_cnt = ARRAY_SIZE(insn);
	a.license = (uintptr_t)"GPL";
	return syscall(__NR_bpf, BPF_PROG_LOAD, &a, sizeof(a));
}

static void cleanup(void)
{
	int i;

	for (i = 0; i < MAX_THREADS; i++)
		reap_thread(&w.thr[i]);
	reap_children(true);
	for (i = 0; i < MAX_EVENTS; i++) {
		drain(&w.ev[i]);
		if (w.ev[i].fd >= 0)
			close_event(&w.ev[i], false);
	}
	unmap_extra();
	logop("cleanup");
}

static void worker_main(int id, __u64 seed)
{
	static void (* const ops[])(void) = {
		op_open, op_open, op_open, op_open, op_open, op_open,
		op_close, op_close, op_dup,
		op_ioctl, op_ioctl, op_ioctl, op_ioctl, op_ioctl,
		op_mmap, op_mmap, op_mmap, op_mmap_aux, op_map_misc, op_map_misc,
		op_read, op_read, op_fcntl, op_misc, op_misc,
		op_thread, op_thread, op_fork, op_fork, op_fork, op_udt, op_udt,
		op_open_burst, op_open_burst,
	};
	int i, n;

	memset(&w, 0, sizeof(w));
	w.id = id;
	w.r.s = seed;
	w.main_tid = syscall(SYS_gettid);
	for (i = 0; i < MAX_EVENTS; i++)
		w.ev[i].fd = -1;
	/* A replacement's slots: not the dead worker's events. */
	memset(sh->ev_desc[id], 0, sizeof(sh->ev_desc[id]));
	memset(sh->ev_async[id], 0, sizeof(sh->ev_async[id]));
	/* Its own process group: the watchdog kills the worker and its children. */
	setpgid(0, 0);
	install_fault_handlers();
	w.devzero = open("/dev/zero", O_RDONLY);
	w.devnull = open("/dev/null", O_RDWR);
	if (pipe(w.pipe)) {
		w.pipe[0] = -1;
		w.pipe[1] = -1;
	}
	w.bad = mmap(NULL, env.page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	w.udt = open(UDT_PATH, O_RDWR);
	w.bpf_fd[0] = load_bpf(BPF_PROG_TYPE_PERF_EVENT, 1);
	w.bpf_fd[1] = load_bpf(BPF_PROG_TYPE_PERF_EVENT, 0);
	w.bpf_fd[2] = load_bpf(chance(&w.r, 50) ? BPF_PROG_TYPE_TRACEPOINT :
			       BPF_PROG_TYPE_KPROBE, 1);

	while (now() < env.deadline) {
		w.iter++;
		stat_add(ST_ITER, 1);
		n = 1 + below(&w.r, 6);
		for (i = 0; i < n; i++)
			ops[below(&w.r, ARRAY_SIZE(ops))]();
		busy(&w.r, 12);
		reap_children(false);
		/* Sometimes let the buffers fill up: lost records. */
		if (chance(&w.r, 70))
			for (i = 0; i < MAX_EVENTS; i++)
				drain(&w.ev[i]);
		__atomic_store_n(&storm, 0, __ATOMIC_RELAXED);
		if (!(w.iter % CLEANUP_EVERY) || chance(&w.r, 1))
			cleanup();
		check_taint();
	}
	cleanup();
	check_taint();
	_exit(0);
}

/* ---- an exec'd child: --exec-child SEED DEPTH */

static int exec_child(int argc, char **argv)
{
	static struct shared dummy;
	struct rng r;
	int fd, depth;

	if (argc < 4)
		return 1;
	sh = &dummy;	/* counters no longer shared after exec */
	env.page = sysconf(_SC_PAGESIZE);
	r.s = strtoull(argv[2], NULL, 0);
	depth = atoi(argv[3]);
	install_handlers();
	w.devzero = open("/dev/zero", O_RDONLY);
	if (pipe(w.pipe)) {
		w.pipe[0] = -1;
		w.pipe[1] = -1;
	}
	for (int i = 0; i < MAX_EVENTS; i++)
		w.ev[i].fd = -1;
	/* The perf fds that survived the exec: poke or close some. */
	for (fd = 3; fd < 64; fd++) {
		if (fd == w.devzero || fd == w.pipe[0] || fd == w.pipe[1])
			continue;
		if (chance(&r, 20))
			ioctl(fd, chance(&r, 50) ? PERF_EVENT_IOC_ENABLE :
			      PERF_EVENT_IOC_DISABLE, 0);
		else if (chance(&r, 10))
			close(fd);
	}
	busy(&r, 15);
	if (depth > 0 && chance(&r, 30)) {
		env.verbose = false;
		if (readlink("/proc/self/exe", env.exe, sizeof(env.exe) - 1) > 0)
			exec_self(&r, depth - 1);
	}
	return 0;
}

/* ---- the main process: find what to fuzz, run the workers, watch them */

static void find_tracepoints(void)
{
	static const char * const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	static const char * const names[] = {
		"sched/sched_switch", "sched/sched_wakeup", "sched/sched_process_exec",
		"sched/sched_process_exit", "sched/sched_process_fork",
		"preemptirq/irq_enable", "preemptirq/irq_disable",
		"syscalls/sys_enter_getppid", "syscalls/sys_exit_read",
		"raw_syscalls/sys_enter", "raw_syscalls/sys_exit",
		"signal/signal_deliver", "task/task_newtask",
		"unwind/unwind_deferred_walk", "irq/softirq_entry",
		"timer/hrtimer_expire_entry",
	};
	char path[256];
	long long id;
	unsigned int i, j;

	env.irq_tp[0] = -1;
	env.irq_tp[1] = -1;
	for (i = 0; i < ARRAY_SIZE(roots) && !env.nr_tp; i++) {
		for (j = 0; j < ARRAY_SIZE(names) && env.nr_tp < MAX_TP; j++) {
			snprintf(path, sizeof(path), "%s/events/%s/id", roots[i], names[j]);
			if (read_int_file(path, &id))
				continue;
			env.tp[env.nr_tp++] = id;
			if (!strcmp(names[j], "preemptirq/irq_enable"))
				env.irq_tp[0] = id;
			else if (!strcmp(names[j], "preemptirq/irq_disable"))
				env.irq_tp[1] = id;
		}
	}
}

/* "config:0" in a PMU's format/retprobe: the bit to set. */
static __u64 retprobe_bit(const char *pmu)
{
	char path[128], buf[32] = "";
	int fd;

	snprintf(path, sizeof(path), "/sys/bus/event_source/devices/%s/format/retprobe", pmu);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 1;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	close(fd);
	if (strncmp(buf, "config:", 7))
		return 1;
	return 1ULL << (atoi(buf + 7) & 63);
}

static void find_pmus(void)
{
	struct dirent *d;
	char path[512];
	long long type;
	DIR *dir;

	env.kprobe_type = -1;
	env.uprobe_type = -1;
	dir = opendir("/sys/bus/event_source/devices");
	if (!dir)
		return;
	while ((d = readdir(dir)) && env.nr_pmu < MAX_PMU) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/event_source/devices/%s/type", d->d_name);
		if (read_int_file(path, &type))
			continue;
		env.pmu[env.nr_pmu++] = type;
		if (!strcmp(d->d_name, "kprobe")) {
			env.kprobe_type = type;
			env.kprobe_ret = retprobe_bit("kprobe");
		} else if (!strcmp(d->d_name, "uprobe")) {
			env.uprobe_type = type;
			env.uprobe_ret = retprobe_bit("uprobe");
		}
	}
	closedir(dir);
}

static void find_kernel_text(void)
{
	static const char * const names[] = {
		"__x64_sys_getppid", "ksys_read", "unwind_deferred_request",
		"perf_callchain_defer_user", "unwind_deferred_run",
		"perf_event_callchain_deferred", "task_work_run", "unwind_user",
	};
	char line[256], name[128], t;
	unsigned long long addr;
	unsigned int i;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && env.nr_kaddr < MAX_KADDR) {
		if (sscanf(line, "%llx %c %127s", &addr, &t, name) != 3 || !addr)
			continue;
		for (i = 0; i < ARRAY_SIZE(names); i++)
			if (!strcmp(name, names[i]))
				env.kaddr[env.nr_kaddr++] = addr;
	}
	fclose(f);
}

/* Where uprobe_target() is in the executable file. */
static void find_uprobe_offset(void)
{
	unsigned long long start, end, off;
	uintptr_t fn = (uintptr_t)uprobe_target;
	char line[768], perms[8], path[600];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		path[0] = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %599s", &start, &end,
			   perms, &off, path) < 4)
			continue;
		if (fn >= start && fn < end && !strcmp(path, env.exe)) {
			env.uprobe_off = fn - start + off;
			break;
		}
	}
	fclose(f);
}

static void setup_cgroups(const char *dir)
{
	char path[600];
	int i;

	env.cg_fd[0] = -1;
	env.cg_fd[1] = -1;
	if (!dir)
		return;
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/fuzz-attr-%c", dir, 'a' + i);
		if (mkdir(path, 0755) && errno != EEXIST)
			break;
		env.cg_fd[i] = open(path, O_RDONLY | O_DIRECTORY);
		snprintf(env.cg_procs[i], sizeof(env.cg_procs[i]), "%s/cgroup.procs", path);
	}
	if (env.cg_fd[0] < 0 || env.cg_fd[1] < 0) {
		fprintf(stderr, "fuzz-attr: no cgroups in %s: %s\n", dir, strerror(errno));
		env.cg_fd[0] = -1;
		env.cg_fd[1] = -1;
	}
}

/* The cgroups are empty once their dead tasks are gone: retry a while. */
static void remove_cgroups(const char *dir)
{
	char path[600];
	int i, tries;

	if (!dir || env.cg_fd[0] < 0)
		return;
	for (i = 0; i < 2; i++) {
		close(env.cg_fd[i]);
		snprintf(path, sizeof(path), "%s/fuzz-attr-%c", dir, 'a' + i);
		for (tries = 0; rmdir(path) && errno == EBUSY && tries < 100; tries++)
			usleep(100000);
	}
}

static void print_proc_file(pid_t pid, const char *file)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = 0;
		fprintf(stderr, "fuzz-attr: pid %d %s: %s%s", pid, file, buf,
			buf[n - 1] == '\n' ? "" : "\n");
	}
}

/* Print what a stuck task is doing (the kernel dumps the blocked ones). */
static void report_hang(pid_t pid)
{
	print_proc_file(pid, "stat");
	print_proc_file(pid, "wchan");
	print_proc_file(pid, "stack");
}

static void trigger_sysrq(char c)
{
	int fd = open("/proc/sysrq-trigger", O_WRONLY);

	if (fd >= 0) {
		if (write(fd, &c, 1) < 0)
			perror("sysrq");
		close(fd);
	}
}

static void print_usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-s SEED] [-j WORKERS] [-c CGROUP_DIR] [-r RATE] [-v] SECONDS\n",
		prog);
	exit(1);
}

int main(int argc, char **argv)
{
	static const char * const stat_names[] = {
		[ST_CLOSE] = "closes", [ST_READ] = "reads", [ST_SIGNAL] = "signals",
		[ST_PTRACE] = "ptrace stops", [ST_RECORDS] = "records read",
		[ST_BPF] = "SET_BPF", [ST_WORKER_DIED] = "workers ended early",
		[ST_STORM] = "signal storms broken", [ST_SIGTRAP] = "SIGTRAPs",
		[ST_UDT] = "test hook requests", [ST_FAULT] = "workers faulted",
	};
	pid_t pid[MAX_WORKERS] = { 0 };
	int gen[MAX_WORKERS] = { 0 };
	const char *cgroup = NULL;
	int workers = 2, running, i, c, status, ret = 0;
	double seconds, start, grace;
	long long max_stack = -1, max_rate = -1, rate = 1000;
	bool hung = false;
	__u64 seed = 0;
	pid_t p;

	if (argc >= 2 && !strcmp(argv[1], "--exec-child"))
		return exec_child(argc, argv);

	seed = (__u64)time(NULL) * 1000003 ^ getpid();
	while ((c = getopt(argc, argv, "s:j:c:r:v")) != -1) {
		switch (c) {
		case 'r':
			rate = atoll(optarg);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'j':
			workers = atoi(optarg);
			break;
		case 'c':
			cgroup = optarg;
			break;
		case 'v':
			env.verbose = true;
			break;
		default:
			print_usage(argv[0]);
		}
	}
	if (optind != argc - 1 || workers < 1 || workers > MAX_WORKERS)
		print_usage(argv[0]);
	seconds = atof(argv[optind]);

	setvbuf(stdout, NULL, _IOLBF, 0);
	env.seed = seed;
	env.page = sysconf(_SC_PAGESIZE);
	env.ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	env.cpus_conf = sysconf(_SC_NPROCESSORS_CONF);
	if (readlink("/proc/self/exe", env.exe, sizeof(env.exe) - 1) < 0)
		snprintf(env.exe, sizeof(env.exe), "%s", argv[0]);
	find_tracepoints();
	find_pmus();
	find_kernel_text();
	find_uprobe_offset();
	setup_cgroups(cgroup);
	env.taint = read_taint();
	read_int_file(max_stack_sysctl, &max_stack);
	/*
	 * Under TCG and KASAN a sample costs some 100 us: at the default
	 * rate (100000 a second, per event) a few events would take every
	 * CPU, and the fuzzer would do nothing else.
	 */
	if (rate > 0 && !read_int_file(max_rate_sysctl, &max_rate) &&
	    write_int_file(max_rate_sysctl, rate))
		max_rate = -1;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	sh->taint_seen = env.taint;
	if (check_tamed_attrs(seed))
		return 1;
	install_handlers();
	printf("fuzz-attr: seed %llu, %d workers, %.0f s\n", (unsigned long long)seed,
	       workers, seconds);
	printf("fuzz-attr: %d tracepoints, %d PMUs, %d kernel text addresses, kprobe %s, ",
	       env.nr_tp, env.nr_pmu, env.nr_kaddr, env.kprobe_type >= 0 ? "yes" : "no");
	printf("uprobe %s, cgroups %s\n",
	       env.uprobe_type >= 0 && env.uprobe_off ? "yes" : "no",
	       env.cg_fd[0] >= 0 ? "yes" : "no");

	start = now();
	env.deadline = start + seconds;
	/* Time to clean up: children killed, events closed, threads joined. */
	grace = 60 + seconds / 10;
	for (i = 0; i < workers; i++) {
		pid[i] = fork();
		if (!pid[i])
			worker_main(i, seed + 0x1000193ULL * (i + 1));
	}
	running = workers;
	while (running) {
		p = waitpid(-1, &status, WNOHANG);
		if (p <= 0) {
			if (now() > env.deadline + grace) {
				hung = true;
				break;
			}
			usleep(100000);
			continue;
		}
		for (i = 0; i < workers && pid[i] != p; i++)
			;
		if (i == workers)
			continue;
		if (!WIFSIGNALED(status) && WEXITSTATUS(status) == EXIT_FAULT) {
			/* A fuzzer bug, or the kernel broke a task's state: look. */
			stat_add(ST_FAULT, 1);
			ret = 1;
		}
		if (WIFSIGNALED(status) || WEXITSTATUS(status) == EXIT_STORM ||
		    WEXITSTATUS(status) == EXIT_FAULT) {
			/* Its own doing (a signal it drew), not the kernel's. */
			fprintf(stderr, "fuzz-attr: worker %d (pid %d) ended: %s %d\n", i, p,
				WIFSIGNALED(status) ? "signal" : "status",
				WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			dump_oplog(i, "ended");
			stat_add(ST_WORKER_DIED, 1);
			if (now() < env.deadline - 1) {
				gen[i]++;
				pid[i] = fork();
				if (!pid[i])
					worker_main(i, seed + 0x1000193ULL * (i + 1) +
						    0x9e3779b9ULL * gen[i]);
				continue;
			}
		} else if (WEXITSTATUS(status)) {
			ret = 1;
		}
		pid[i] = 0;
		running--;
	}

	if (hung) {
		fprintf(stderr,
			"fuzz-attr: HANG: %d workers still running %.0f s after the deadline\n",
			running, grace);
		/* Twice: does it still run, in the kernel or in user space? */
		for (i = 0; i < workers; i++)
			if (pid[i] > 0)
				print_proc_file(pid[i], "stat");
		sleep(5);
		for (i = 0; i < workers; i++) {
			if (pid[i] <= 0)
				continue;
			report_hang(pid[i]);
			dump_oplog(i, "hung");
		}
		trigger_sysrq('w');	/* blocked tasks */
		trigger_sysrq('l');	/* what every CPU runs */
		for (i = 0; i < workers; i++)
			if (pid[i] > 0)
				kill(-pid[i], SIGKILL);
		for (i = 0; i < 300 && waitpid(-1, NULL, WNOHANG) >= 0; i++)
			usleep(100000);
		ret = 2;
	}

	if (max_stack > 0)
		write_int_file(max_stack_sysctl, max_stack);
	if (max_rate > 0)
		write_int_file(max_rate_sysctl, max_rate);
	remove_cgroups(cgroup);

	if (sh->st[ST_MALFORMED]) {
		fprintf(stderr, "fuzz-attr: %llu malformed records\n",
			(unsigned long long)sh->st[ST_MALFORMED]);
		if (!ret)
			ret = 1;
	}
	printf("fuzz-attr: open errors:");
	for (i = 0; i < NR_ERRNO; i++)
		if (sh->open_errno[i])
			printf(" %s %llu;", strerrorname_np(i) ?: "?",
			       (unsigned long long)sh->open_errno[i]);
	printf("\nfuzz-attr:");
	for (i = 0; i < ST_NR; i++)
		if (i < (int)ARRAY_SIZE(stat_names) && stat_names[i])
			printf(" %llu %s;", (unsigned long long)sh->st[i], stat_names[i]);
	printf("\n");
	/* One line, the one harness/fuzz-attr-guest reports. */
	printf("fuzz-attr: %llu iterations, %llu opens ok (%llu with the deferred bit) of %llu, ",
	       (unsigned long long)sh->st[ST_ITER], (unsigned long long)sh->st[ST_OPEN_OK],
	       (unsigned long long)sh->st[ST_OPEN_DEFERRED], (unsigned long long)sh->st[ST_OPEN]);
	printf("%llu ioctls (%llu ok), %llu mmaps ok of %llu, %llu forks, %llu execs, ",
	       (unsigned long long)sh->st[ST_IOCTL], (unsigned long long)sh->st[ST_IOCTL_OK],
	       (unsigned long long)sh->st[ST_MMAP_OK], (unsigned long long)sh->st[ST_MMAP],
	       (unsigned long long)sh->st[ST_FORK], (unsigned long long)sh->st[ST_EXEC]);
	printf("%llu threads, %llu deferred records in %.0f s (seed %llu)\n",
	       (unsigned long long)sh->st[ST_THREAD], (unsigned long long)sh->st[ST_DEFERRED],
	       now() - start, (unsigned long long)seed);
	return ret;
}
