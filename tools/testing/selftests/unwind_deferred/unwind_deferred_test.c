// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user stack walks, driven through the test hook of
 * lib/test_unwind_deferred.c: the walk is the caller's own frames; one
 * cookie and one walk per kernel stay, shared by requests from task, IRQ and
 * NMI context and by every consumer, kept across migration and served again
 * after the work ran; exit, exec and fork; the consumer limit; and frame
 * pointer chains that must end the walk. Built 64-bit and 32-bit (compat).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "../perf_events/deferred_iwi.h"
#include "../perf_events/deferred_kallsyms.h"
#include "udt_hook.h"

/* argv[1] of the image that the exec test starts. */
#define EXEC_CHECK_ARG	"--unwind-deferred-exec-check"

/*
 * Keep each function whole and called: its frame is what a test expects.
 * noipa (GCC) implies noinline and noclone.
 */
#define NOIPA		__attribute__((noipa))

#ifdef __x86_64__
/* Above the user half: the walker must not read there. */
#define OUTSIDE_USER	0xffff888000000000UL
#else
/* Above a compat task's TASK_SIZE: never mapped, any read faults. */
#define OUTSIDE_USER	0xfffff000UL
#endif

/*
 * The user IPs the kernel sees for the system calls made by
 * frames_syscall() and corrupt_syscall(): the labels right after their
 * syscall (int $0x80) instructions.
 */
#include "syscall_ip.h"

/**
 * struct frames - what a walk from frames_syscall() must find after its IP
 * @ret: the return addresses of frames_syscall(), frames_2() and frames_1()
 */
struct frames {
	unsigned long ret[3];
};

static const char *const context_name[] = {
	[UDT_CTX_TASK]	= "task",
	[UDT_CTX_IRQ]	= "IRQ",
	[UDT_CTX_NMI]	= "NMI",
};

/*
 * A system call with no libc frame between it and the caller: the walk
 * starts at frames_syscall_ip, then finds frames_syscall()'s frame.
 */
static NOIPA long frames_syscall(struct frames *fr, long nr, long a1, long a2,
				 long a3)
{
	long ret = nr;

	fr->ret[0] = (unsigned long)__builtin_return_address(0);
#ifdef __x86_64__
	asm volatile("syscall\n"
		     ".globl frames_syscall_ip\n"
		     ".hidden frames_syscall_ip\n"
		     "frames_syscall_ip:"
		     : "+a" (ret)
		     : "D" (a1), "S" (a2), "d" (a3)
		     : "rcx", "r11", "memory");
#else
	asm volatile("int $0x80\n"
		     ".globl frames_syscall_ip\n"
		     ".hidden frames_syscall_ip\n"
		     "frames_syscall_ip:"
		     : "+a" (ret)
		     : "b" (a1), "c" (a2), "d" (a3)
		     : "memory");
#endif
	return ret;
}

static NOIPA long frames_2(struct frames *fr, long nr, long a1, long a2, long a3)
{
	long ret;

	fr->ret[1] = (unsigned long)__builtin_return_address(0);
	ret = frames_syscall(fr, nr, a1, a2, a3);
	asm volatile("" : : : "memory");	/* not a tail call */
	return ret;
}

/* f1 -> f2 -> f3: a system call whose user stack the test knows. */
static NOIPA long frames_1(struct frames *fr, long nr, long a1, long a2, long a3)
{
	long ret;

	fr->ret[2] = (unsigned long)__builtin_return_address(0);
	ret = frames_2(fr, nr, a1, a2, a3);
	asm volatile("" : : : "memory");	/* not a tail call */
	return ret;
}

/* A system call made with the frame pointer register set to @fp. */
static NOIPA long corrupt_syscall(unsigned long fp, long nr, long a1, long a2,
				  long a3)
{
	unsigned long saved;
	long ret = nr;

#ifdef __x86_64__
	asm volatile("mov %%rbp, %[saved]\n\t"
		     "mov %[fp], %%rbp\n\t"
		     "syscall\n"
		     ".globl corrupt_syscall_ip\n"
		     ".hidden corrupt_syscall_ip\n"
		     "corrupt_syscall_ip:\n\t"
		     "mov %[saved], %%rbp"
		     : "+a" (ret), [saved] "=&r" (saved)
		     : [fp] "r" (fp), "D" (a1), "S" (a2), "d" (a3)
		     : "rcx", "r11", "memory");
#else
	asm volatile("mov %%ebp, %[saved]\n\t"
		     "mov %[fp], %%ebp\n\t"
		     "int $0x80\n"
		     ".globl corrupt_syscall_ip\n"
		     ".hidden corrupt_syscall_ip\n"
		     "corrupt_syscall_ip:\n\t"
		     "mov %[saved], %%ebp"
		     : "+a" (ret), [saved] "=&r" (saved)
		     : [fp] "r" (fp), "b" (a1), "c" (a2), "d" (a3)
		     : "memory");
#endif
	return ret;
}

/* Its address is the return address of a crafted frame. */
static NOIPA void crafted_return(void)
{
	asm volatile("");
}

static pid_t sys_gettid(void)
{
	return syscall(SYS_gettid);
}

static int arm(int fd, __u32 nr, __u32 flags)
{
	struct udt_arm arm = { .nr = nr, .flags = flags };

	return ioctl(fd, UDT_IOC_ARM, &arm);
}

static int get_arm_result(int fd, struct udt_arm_result *res)
{
	memset(res, 0, sizeof(*res));
	return ioctl(fd, UDT_IOC_ARM_RESULT, res);
}

static void *map_shared(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* The cookie names the CPU of the stay's first request; its counter is odd. */
static void expect_cookie_shape(struct __test_metadata *_metadata,
				__u64 cookie, __u32 cpu)
{
	EXPECT_NE(0, cookie) TH_LOG("a cookie is never 0");
	EXPECT_EQ(cpu + 1, (__u32)cookie)
		TH_LOG("cookie %#llx: low half must be cpu + 1 = %u of the first request, seen %u",
		       (unsigned long long)cookie, cpu + 1, (__u32)cookie);
	EXPECT_EQ(1, (cookie >> 32) & 1)
		TH_LOG("cookie %#llx: the counter in the high 32 bits must be odd",
		       (unsigned long long)cookie);
}

static void expect_entry(struct __test_metadata *_metadata,
			 const struct udt_result *res, int i,
			 unsigned long expected, const char *what)
{
	EXPECT_EQ((__u64)expected, res->entries[i])
		TH_LOG("entries[%d]: expected %#lx (%s), seen %#llx", i,
		       expected, what, (unsigned long long)res->entries[i]);
}

/* The walk must be frames_syscall_ip, then the chain's return addresses. */
static void expect_frames(struct __test_metadata *_metadata,
			  const struct udt_result *res, const struct frames *fr)
{
	EXPECT_LE(4, res->nr)
		TH_LOG("expected at least 4 entries (the IP and 3 frames), seen %u",
		       res->nr);
	expect_entry(_metadata, res, 0, (unsigned long)frames_syscall_ip,
		     "after the syscall instruction");
	expect_entry(_metadata, res, 1, fr->ret[0], "return address of frames_syscall");
	expect_entry(_metadata, res, 2, fr->ret[1], "return address of frames_2");
	expect_entry(_metadata, res, 3, fr->ret[2], "return address of frames_1");
}

/* Two consumers served by one walk saw the same trace. */
static void expect_same_trace(struct __test_metadata *_metadata,
			      const struct udt_result *a,
			      const struct udt_result *b)
{
	unsigned int i, nr = a->nr < UDT_MAX_ENTRIES ? a->nr : UDT_MAX_ENTRIES;

	EXPECT_EQ(a->nr, b->nr)
		TH_LOG("one walk: consumer %u got %u entries, consumer %u %u",
		       a->consumer, a->nr, b->consumer, b->nr);
	for (i = 0; i < nr && a->entries[i] == b->entries[i]; i++)
		;
	EXPECT_EQ(nr, i)
		TH_LOG("one walk: entries[%u] is %#llx for consumer %u, %#llx for consumer %u",
		       i, (unsigned long long)a->entries[i], a->consumer,
		       (unsigned long long)b->entries[i], b->consumer);
}

FIXTURE(unwind) {
	int fd;
};

FIXTURE_SETUP(unwind)
{
	setup_hook(_metadata, &self->fd);
}

FIXTURE_TEARDOWN(unwind)
{
	teardown_hook(self->fd);
}

TEST_F(unwind, walk_is_the_callers_own_frames)
{
	struct udt_request req = { };
	struct frames fr = { };
	struct udt_result res;
	long ret;

	add_step(&req, 0, UDT_CTX_TASK);
	ret = frames_1(&fr, __NR_ioctl, self->fd, UDT_IOC_REQUEST, (long)&req);
	ASSERT_EQ(0, ret) TH_LOG("REQUEST: %s", strerror(-ret));
	EXPECT_EQ(0, req.steps[0].ret)
		TH_LOG("first request: expected 0 (queued), seen %d", req.steps[0].ret);

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	ASSERT_EQ(1, res.calls)
		TH_LOG("expected 1 callback before the return to user, seen %u", res.calls);
	EXPECT_EQ(sys_gettid(), res.tid);
	EXPECT_EQ(getpid(), res.tgid);
	EXPECT_EQ(req.steps[0].cookie, res.cookie);
	expect_frames(_metadata, &res, &fr);
	EXPECT_EQ(1, res.walks);
}

TEST_F(unwind, cookie_names_the_cpu_and_has_an_odd_counter)
{
	struct udt_request req = { };

	add_step(&req, 0, UDT_CTX_TASK);
	ASSERT_EQ(0, request(self->fd, &req)) TH_LOG("REQUEST: %s", strerror(errno));
	ASSERT_EQ(0, req.steps[0].ret);
	expect_cookie_shape(_metadata, req.steps[0].cookie, req.steps[0].cpu);
}

TEST_F(unwind, task_irq_and_nmi_requests_share_one_cookie)
{
	static const __u32 context[] = {
		UDT_CTX_TASK, UDT_CTX_IRQ, UDT_CTX_NMI,
		UDT_CTX_NMI, UDT_CTX_IRQ, UDT_CTX_TASK,
	};
	struct udt_request req = { };
	struct udt_result res[UDT_CONSUMERS];
	__u64 cookie;
	unsigned int i;

	for (i = 0; i < 6; i++)
		add_step(&req, i < 3 ? 0 : 1, context[i]);
	ASSERT_EQ(0, request(self->fd, &req)) TH_LOG("REQUEST: %s", strerror(errno));

	cookie = req.steps[0].cookie;
	expect_cookie_shape(_metadata, cookie, req.steps[0].cpu);
	for (i = 0; i < req.nr_steps; i++) {
		const struct udt_step *step = &req.steps[i];
		const char *ctx = context_name[step->context];

		EXPECT_EQ(0, step->ret)
			TH_LOG("step %u (%s, consumer %u): expected 0 (queued), seen %d",
			       i, ctx, step->consumer, step->ret);
		EXPECT_EQ(cookie, step->cookie)
			TH_LOG("step %u (%s): expected the stay's cookie %#llx, seen %#llx",
			       i, ctx, (unsigned long long)cookie,
			       (unsigned long long)step->cookie);
		EXPECT_EQ(step->context != UDT_CTX_TASK, step->in_hardirq)
			TH_LOG("step %u (%s): in_hardirq() was %u", i, ctx,
			       step->in_hardirq);
		EXPECT_EQ(step->context == UDT_CTX_NMI, step->in_nmi)
			TH_LOG("step %u (%s): in_nmi() was %u", i, ctx, step->in_nmi);
	}

	for (i = 0; i < UDT_CONSUMERS; i++) {
		ASSERT_EQ(0, get_result(self->fd, i, &res[i]));
		EXPECT_EQ(1, res[i].calls)
			TH_LOG("consumer %u: expected 1 callback, seen %u", i, res[i].calls);
		EXPECT_EQ(cookie, res[i].cookie);
		EXPECT_EQ(sys_gettid(), res[i].tid);
	}
	EXPECT_EQ(1, res[0].walks)
		TH_LOG("expected 1 walk for the stay, seen %u", res[0].walks);
	expect_same_trace(_metadata, &res[0], &res[1]);
}

/* The stay's first request comes from @context and takes the cookie there. */
static void first_request_takes_the_cookie(struct __test_metadata *_metadata,
					   int fd, __u32 context)
{
	struct udt_request req = { };
	struct udt_result res[UDT_CONSUMERS];
	unsigned int i;

	add_step(&req, 0, context);
	add_step(&req, 1, UDT_CTX_TASK);
	ASSERT_EQ(0, request(fd, &req)) TH_LOG("REQUEST: %s", strerror(errno));

	EXPECT_EQ(context == UDT_CTX_NMI, req.steps[0].in_nmi)
		TH_LOG("the %s request ran with in_nmi() %u", context_name[context],
		       req.steps[0].in_nmi);
	EXPECT_EQ(1, req.steps[0].in_hardirq)
		TH_LOG("the %s request ran outside hard interrupt context",
		       context_name[context]);
	EXPECT_EQ(0, req.steps[0].ret)
		TH_LOG("%s request: expected 0 (queued), seen %d",
		       context_name[context], req.steps[0].ret);
	expect_cookie_shape(_metadata, req.steps[0].cookie, req.steps[0].cpu);
	EXPECT_EQ(req.steps[0].cookie, req.steps[1].cookie)
		TH_LOG("the task request after the %s one: expected cookie %#llx, seen %#llx",
		       context_name[context],
		       (unsigned long long)req.steps[0].cookie,
		       (unsigned long long)req.steps[1].cookie);

	for (i = 0; i < UDT_CONSUMERS; i++) {
		ASSERT_EQ(0, get_result(fd, i, &res[i]));
		EXPECT_EQ(1, res[i].calls)
			TH_LOG("consumer %u: expected 1 callback, seen %u", i, res[i].calls);
		EXPECT_EQ(req.steps[0].cookie, res[i].cookie);
		EXPECT_EQ(sys_gettid(), res[i].tid);
	}
	EXPECT_EQ(1, res[0].walks);
}

TEST_F(unwind, first_request_from_nmi_takes_the_cookie)
{
	first_request_takes_the_cookie(_metadata, self->fd, UDT_CTX_NMI);
}

TEST_F(unwind, first_request_from_irq_takes_the_cookie)
{
	first_request_takes_the_cookie(_metadata, self->fd, UDT_CTX_IRQ);
}

/*
 * An NMI that interrupts kernel code before the exit work (a PMU sample of
 * a system call) needs no self-interrupt: the return to user space runs the
 * walk anyway. Raising one for every NMI request made it 1 per request.
 */
#define NMI_STAYS		200
#define NMI_MAX_IWI_PER_STAY	0.05

TEST_F(unwind, nmi_requests_in_kernel_code_raise_no_interrupt)
{
	long long before, after;
	struct udt_result res;
	double per_stay;
	int i;

	before = iwi_count();
	ASSERT_LE(0, before) TH_LOG("no IWI line in /proc/interrupts");
	for (i = 0; i < NMI_STAYS; i++) {
		struct udt_request req = { };

		add_step(&req, 0, UDT_CTX_NMI);
		ASSERT_EQ(0, request(self->fd, &req))
			TH_LOG("REQUEST %d: %s", i, strerror(errno));
		ASSERT_TRUE(req.steps[0].in_nmi);
		ASSERT_EQ(0, req.steps[0].ret)
			TH_LOG("stay %d: expected 0 (queued), seen %d", i,
			       req.steps[0].ret);
	}
	after = iwi_count();

	/* Every walk ran, each before its system call returned. */
	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	EXPECT_EQ(NMI_STAYS, res.calls)
		TH_LOG("expected %d callbacks, one per stay, seen %u", NMI_STAYS,
		       res.calls);
	per_stay = (double)(after - before) / NMI_STAYS;
	TH_LOG("%d NMI requests from kernel code: %lld interrupt work interrupts, %.3f per request",
	       NMI_STAYS, after - before, per_stay);
	EXPECT_GE(NMI_MAX_IWI_PER_STAY, per_stay)
		TH_LOG("expected at most %.2f self-interrupts per NMI request, seen %.3f",
		       NMI_MAX_IWI_PER_STAY, per_stay);
}

TEST_F(unwind, each_stay_has_its_own_cookie_and_walk)
{
	struct udt_request req[2] = { };
	struct udt_result res;
	int i;

	for (i = 0; i < 2; i++) {
		add_step(&req[i], 0, UDT_CTX_TASK);
		ASSERT_EQ(0, request(self->fd, &req[i]))
			TH_LOG("REQUEST %d: %s", i, strerror(errno));
		EXPECT_EQ(0, req[i].steps[0].ret)
			TH_LOG("stay %d: expected 0 (queued), seen %d", i,
			       req[i].steps[0].ret);
		expect_cookie_shape(_metadata, req[i].steps[0].cookie,
				    req[i].steps[0].cpu);

		ASSERT_EQ(0, get_result(self->fd, 0, &res));
		EXPECT_EQ(i + 1, res.calls)
			TH_LOG("after stay %d: expected %d callbacks, seen %u", i,
			       i + 1, res.calls);
		EXPECT_EQ(req[i].steps[0].cookie, res.cookie);
		EXPECT_EQ(i + 1, res.walks)
			TH_LOG("after stay %d: expected %d walks, seen %u", i, i + 1,
			       res.walks);
	}
	EXPECT_NE(req[0].steps[0].cookie, req[1].steps[0].cookie)
		TH_LOG("two stays, one cookie: %#llx",
		       (unsigned long long)req[0].steps[0].cookie);
}

/* failslab's knobs (Documentation/fault-injection/fault-injection.rst). */
#define FAILSLAB	"/sys/kernel/debug/failslab/"

static int write_knob(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, value, strlen(value));
	close(fd);
	return n == (ssize_t)strlen(value) ? 0 : -EIO;
}

static long read_knob(const char *path)
{
	char buf[32] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtol(buf, NULL, 0) : -EIO;
}

/* Three stays of a new thread, whose first walk cache allocations fail. */
struct failing_stays {
	int fd;
	const char *failed;	/* what went wrong, NULL when nothing */
	int err;
	struct frames fr;
	struct udt_request req[3];
	struct udt_result res[3][UDT_CONSUMERS];
	long times_left[3];	/* failslab's failures left after each stay */
};

static void *failing_stays_thread(void *arg)
{
	struct failing_stays *fs = arg;
	int i, c, ret;

	/* A new task: no walk cache yet; failslab's task filter takes it. */
	ret = write_knob("/proc/thread-self/make-it-fail", "1");
	if (ret) {
		fs->failed = "/proc/thread-self/make-it-fail";
		fs->err = -ret;
		return NULL;
	}
	for (i = 0; i < 3; i++) {
		/* Asked, walked, then asked again in the same stay. */
		for (c = 0; c < UDT_CONSUMERS; c++)
			add_step(&fs->req[i], c, UDT_CTX_TASK);
		add_step(&fs->req[i], 0, UDT_CTX_TASK_WORK);
		for (c = 0; c < UDT_CONSUMERS; c++)
			add_step(&fs->req[i], c, UDT_CTX_TASK);
		add_step(&fs->req[i], 0, UDT_CTX_IRQ);
		ret = frames_1(&fs->fr, __NR_ioctl, fs->fd, UDT_IOC_REQUEST,
			       (long)&fs->req[i]);
		if (ret) {
			fs->failed = "REQUEST";
			fs->err = -ret;
			return NULL;
		}
		fs->times_left[i] = read_knob(FAILSLAB "times");
		for (c = 0; c < UDT_CONSUMERS; c++)
			if (get_result(fs->fd, c, &fs->res[i][c])) {
				fs->failed = "RESULT";
				fs->err = errno;
				return NULL;
			}
	}
	return NULL;
}

/*
 * When the walk cache cannot be allocated, the stay's consumers get an
 * empty stack once each and the stay is served: the requests that come
 * after the walk in the same stay (the hook runs the task work in its
 * system call, as io_uring's wait does) are told it ran, and queue no
 * new walk and no new allocation. The next stay tries again, and walks
 * once the allocation succeeds. failslab fails the first two allocations
 * made by the deferred walk (a stack filter on unwind_deferred_run()) of
 * one thread (its task filter).
 */
TEST_F(unwind, walk_cache_allocation_fails_once_per_stay)
{
	struct failing_stays fs = { .fd = self->fd };
	unsigned long long start, end;
	char value[32];
	pthread_t th;
	int i, c;

	ASSERT_TRUE(kernel_function("unwind_deferred_run", &start, &end))
		TH_LOG("unwind_deferred_run() is not in /proc/kallsyms");
	ASSERT_EQ(0, write_knob(FAILSLAB "probability", "0"))
		TH_LOG("%s: needs CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS",
		       FAILSLAB);
	ASSERT_EQ(0, write_knob(FAILSLAB "task-filter", "Y"));
	ASSERT_EQ(0, write_knob(FAILSLAB "ignore-gfp-wait", "N"));
	ASSERT_EQ(0, write_knob(FAILSLAB "verbose", "0"));
	ASSERT_EQ(0, write_knob(FAILSLAB "interval", "1"));
	snprintf(value, sizeof(value), "%#llx", start);
	ASSERT_EQ(0, write_knob(FAILSLAB "require-start", value))
		TH_LOG("needs CONFIG_FAULT_INJECTION_STACKTRACE_FILTER");
	snprintf(value, sizeof(value), "%#llx", end);
	ASSERT_EQ(0, write_knob(FAILSLAB "require-end", value));
	ASSERT_EQ(0, write_knob(FAILSLAB "times", "2"));
	ASSERT_EQ(0, write_knob(FAILSLAB "probability", "100"));

	ASSERT_EQ(0, pthread_create(&th, NULL, failing_stays_thread, &fs));
	ASSERT_EQ(0, pthread_join(th, NULL));

	/* failslab's defaults again. */
	EXPECT_EQ(0, write_knob(FAILSLAB "probability", "0"));
	EXPECT_EQ(0, write_knob(FAILSLAB "times", "1"));
	EXPECT_EQ(0, write_knob(FAILSLAB "require-start", "0"));
	EXPECT_EQ(0, write_knob(FAILSLAB "require-end", "0xffffffffffffffff"));
	EXPECT_EQ(0, write_knob(FAILSLAB "task-filter", "N"));
	EXPECT_EQ(0, write_knob(FAILSLAB "ignore-gfp-wait", "Y"));
	EXPECT_EQ(0, write_knob(FAILSLAB "verbose", "2"));

	ASSERT_TRUE(!fs.failed) TH_LOG("%s: %s", fs.failed, strerror(fs.err));
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(i < 2 ? 1 - i : 0, fs.times_left[i])
			TH_LOG("stay %d: want %d failslab failures left (one per stay), seen %ld",
			       i, i < 2 ? 1 - i : 0, fs.times_left[i]);
		for (c = 0; c < UDT_CONSUMERS; c++) {
			EXPECT_EQ(i + 1, fs.res[i][c].calls)
				TH_LOG("stay %d, consumer %d: want %d callbacks in all, seen %u",
				       i, c, i + 1, fs.res[i][c].calls);
			EXPECT_EQ(fs.req[i].steps[0].cookie, fs.res[i][c].cookie);
		}
		EXPECT_EQ(i < 2 ? 0 : 1, fs.res[i][0].walks)
			TH_LOG("stay %d: want %d walks in all, seen %u", i,
			       i < 2 ? 0 : 1, fs.res[i][0].walks);
		/* The steps after the task work's. */
		for (c = UDT_CONSUMERS + 1; c < (int)fs.req[i].nr_steps; c++) {
			EXPECT_EQ(1, fs.req[i].steps[c].ret)
				TH_LOG("stay %d, request %d after the walk: want 1 (ran), seen %d",
				       i, c, fs.req[i].steps[c].ret);
			EXPECT_EQ(fs.req[i].steps[0].cookie, fs.req[i].steps[c].cookie)
				TH_LOG("stay %d, request %d: want the stay's cookie", i, c);
		}
	}
	for (i = 0; i < 2; i++)
		EXPECT_EQ(0, fs.res[i][0].nr)
			TH_LOG("stay %d, no cache: want an empty stack, seen %u entries",
			       i, fs.res[i][0].nr);
	expect_frames(_metadata, &fs.res[2][0], &fs.fr);
}

struct migrator {
	int fd;
	pid_t tid;		/* the thread to move */
	int to_cpu;
	const char *failed;	/* what went wrong, NULL when nothing */
	int err;
};

/* Wait until the test thread blocks in the hook, move it, release it. */
static void *migrate(void *arg)
{
	struct migrator *m = arg;
	struct udt_release rel = { .tid = m->tid, .flags = UDT_RELEASE_PEEK };
	cpu_set_t set;
	int i;

	for (i = 0; ioctl(m->fd, UDT_IOC_RELEASE, &rel); i++) {
		if (errno != ESRCH || i == 5000) {
			m->failed = "waiting for the test thread to block";
			m->err = errno;
			return NULL;
		}
		usleep(1000);
	}
	CPU_ZERO(&set);
	CPU_SET(m->to_cpu, &set);
	if (sched_setaffinity(m->tid, sizeof(set), &set)) {
		m->failed = "sched_setaffinity";
		m->err = errno;
	}
	rel.flags = 0;
	if (ioctl(m->fd, UDT_IOC_RELEASE, &rel) && !m->failed) {
		m->failed = "RELEASE";
		m->err = errno;
	}
	return NULL;
}

TEST_F(unwind, cookie_survives_migration)
{
	struct migrator m = { .fd = self->fd, .tid = sys_gettid() };
	struct udt_request req = { };
	struct udt_result res[UDT_CONSUMERS];
	int cpu, from = -1, to = -1, ret;
	cpu_set_t set;
	pthread_t thread;
	__u64 cookie;
	unsigned int i;

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
	for (cpu = 0; cpu < CPU_SETSIZE && to < 0; cpu++) {
		if (!CPU_ISSET(cpu, &set))
			continue;
		if (from < 0)
			from = cpu;
		else
			to = cpu;
	}
	if (to < 0)
		SKIP(return, "needs 2 CPUs to migrate between");
	m.to_cpu = to;
	CPU_ZERO(&set);
	CPU_SET(from, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));

	/* task request on one CPU; wait; moved; task and NMI requests */
	add_step(&req, 0, UDT_CTX_TASK);
	req.wait_after = 1;
	add_step(&req, 1, UDT_CTX_TASK);
	add_step(&req, 0, UDT_CTX_NMI);

	ASSERT_EQ(0, pthread_create(&thread, NULL, migrate, &m));
	ret = request(self->fd, &req);
	ASSERT_EQ(0, pthread_join(thread, NULL));
	ASSERT_TRUE(!m.failed)
		TH_LOG("migrating thread: %s: %s", m.failed, strerror(m.err));
	ASSERT_EQ(0, ret) TH_LOG("REQUEST: %s", strerror(errno));

	ASSERT_EQ(from, req.steps[0].cpu)
		TH_LOG("first request: expected CPU %d, seen %u", from, req.steps[0].cpu);
	ASSERT_NE(req.steps[0].cpu, req.steps[1].cpu)
		TH_LOG("the task did not migrate: expected CPU %d after the wait, seen %u",
		       m.to_cpu, req.steps[1].cpu);
	EXPECT_EQ(m.to_cpu, req.steps[1].cpu);

	cookie = req.steps[0].cookie;
	expect_cookie_shape(_metadata, cookie, from);
	for (i = 1; i < req.nr_steps; i++) {
		EXPECT_EQ(0, req.steps[i].ret)
			TH_LOG("step %u after the migration: expected 0 (queued), seen %d",
			       i, req.steps[i].ret);
		EXPECT_EQ(cookie, req.steps[i].cookie)
			TH_LOG("step %u on CPU %u: expected cookie %#llx from CPU %d, seen %#llx",
			       i, req.steps[i].cpu, (unsigned long long)cookie, from,
			       (unsigned long long)req.steps[i].cookie);
	}
	EXPECT_EQ(1, req.steps[2].in_nmi);

	for (i = 0; i < UDT_CONSUMERS; i++) {
		ASSERT_EQ(0, get_result(self->fd, i, &res[i]));
		EXPECT_EQ(1, res[i].calls)
			TH_LOG("consumer %u: expected 1 callback, seen %u", i, res[i].calls);
		EXPECT_EQ(cookie, res[i].cookie);
	}
	EXPECT_EQ(1, res[0].walks);
}

TEST_F(unwind, one_callback_per_consumer_per_stay)
{
	struct udt_request req = { };
	struct udt_result res;
	unsigned int i;

	add_step(&req, 0, UDT_CTX_TASK);
	add_step(&req, 0, UDT_CTX_TASK);
	add_step(&req, 0, UDT_CTX_IRQ);
	ASSERT_EQ(0, request(self->fd, &req)) TH_LOG("REQUEST: %s", strerror(errno));
	for (i = 0; i < req.nr_steps; i++) {
		EXPECT_EQ(0, req.steps[i].ret)
			TH_LOG("request %u before the work ran: expected 0 (queued), seen %d",
			       i, req.steps[i].ret);
		EXPECT_EQ(req.steps[0].cookie, req.steps[i].cookie);
	}

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	EXPECT_EQ(1, res.calls)
		TH_LOG("3 requests of one consumer in one stay: expected 1 callback, seen %u",
		       res.calls);
	EXPECT_EQ(1, res.walks)
		TH_LOG("expected 1 walk, seen %u", res.walks);
}

TEST_F(unwind, one_walk_serves_every_consumer)
{
	struct udt_request req = { };
	struct udt_result res[UDT_CONSUMERS];
	unsigned int i;

	add_step(&req, 0, UDT_CTX_TASK);
	add_step(&req, 1, UDT_CTX_TASK);
	ASSERT_EQ(0, request(self->fd, &req)) TH_LOG("REQUEST: %s", strerror(errno));
	EXPECT_EQ(req.steps[0].cookie, req.steps[1].cookie);

	for (i = 0; i < UDT_CONSUMERS; i++) {
		ASSERT_EQ(0, get_result(self->fd, i, &res[i]));
		EXPECT_EQ(1, res[i].calls)
			TH_LOG("consumer %u: expected 1 callback, seen %u", i, res[i].calls);
		EXPECT_EQ(req.steps[0].cookie, res[i].cookie);
	}
	EXPECT_EQ(1, res[0].walks)
		TH_LOG("two consumers in one stay: expected 1 walk, seen %u", res[0].walks);
	expect_same_trace(_metadata, &res[0], &res[1]);
}

static int got_sigusr1;

static void on_sigusr1(int sig)
{
	__atomic_store_n(&got_sigusr1, 1, __ATOMIC_RELAXED);
}

/*
 * The hook asks for consumer 0 when tgkill() is entered. On the way out,
 * get_signal() runs the task work first (consumer 0 is called back), then
 * delivers SIGUSR1, where the hook asks again for consumer 0 (already
 * served: 1) and for the first time for consumer 1 (queued: 0). Consumer 1
 * must be called back with the same cookie and the walk already made.
 */
/*
 * A signal's frame rewrites the user registers: get_signal() runs the walk
 * pending from tgkill() and ends the stay before it dequeues the signal.
 * Requests at the delivery start a new stay, walked before the frame is set
 * up: the same stack as tgkill()'s, under a new cookie.
 */
TEST_F(unwind, signal_delivery_ends_the_stay)
{
	struct sigaction sa = { .sa_handler = on_sigusr1 };
	struct udt_result res[UDT_CONSUMERS];
	struct udt_arm_result armed;
	struct frames fr = { };
	__u64 cookie, signal_cookie;
	unsigned int i;
	long ret;

	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	ASSERT_EQ(0, arm(self->fd, __NR_tgkill, UDT_ARM_SIGNAL))
		TH_LOG("ARM: %s", strerror(errno));

	ret = frames_1(&fr, __NR_tgkill, getpid(), sys_gettid(), SIGUSR1);
	ASSERT_EQ(0, ret) TH_LOG("tgkill: %s", strerror(-ret));
	ASSERT_EQ(1, __atomic_load_n(&got_sigusr1, __ATOMIC_RELAXED))
		TH_LOG("SIGUSR1 was not delivered on the way out of tgkill");

	ASSERT_EQ(0, get_arm_result(self->fd, &armed));
	ASSERT_EQ(UDT_HIT_SYSCALL | UDT_HIT_SIGNAL, armed.hits)
		TH_LOG("expected the hook to ask at tgkill and at the signal, hits %#x",
		       armed.hits);
	cookie = armed.syscall_cookie;
	EXPECT_EQ(0, armed.syscall_ret);
	expect_cookie_shape(_metadata, cookie, (__u32)cookie - 1);
	signal_cookie = armed.signal_cookie[0];
	EXPECT_NE(cookie, signal_cookie)
		TH_LOG("the stay did not end at the signal: cookie %#llx at both",
		       (unsigned long long)cookie);
	expect_cookie_shape(_metadata, signal_cookie, (__u32)signal_cookie - 1);
	for (i = 0; i < UDT_CONSUMERS; i++) {
		EXPECT_EQ(0, armed.signal_ret[i])
			TH_LOG("consumer %u asking in the new stay: expected 0 (queued), seen %d",
			       i, armed.signal_ret[i]);
		EXPECT_EQ(signal_cookie, armed.signal_cookie[i])
			TH_LOG("consumer %u at the signal: expected %#llx, seen %#llx",
			       i, (unsigned long long)signal_cookie,
			       (unsigned long long)armed.signal_cookie[i]);
	}

	for (i = 0; i < UDT_CONSUMERS; i++) {
		ASSERT_EQ(0, get_result(self->fd, i, &res[i]));
		EXPECT_EQ(signal_cookie, res[i].cookie);
	}
	EXPECT_EQ(2, res[0].calls)
		TH_LOG("consumer 0: expected a callback per stay, seen %u", res[0].calls);
	EXPECT_EQ(1, res[1].calls)
		TH_LOG("consumer 1: expected 1 callback, seen %u", res[1].calls);
	/* Before the frame: the handler is not on the stack yet. */
	expect_frames(_metadata, &res[0], &fr);
	expect_same_trace(_metadata, &res[0], &res[1]);
	EXPECT_EQ(2, res[0].walks)
		TH_LOG("expected a walk per stay, seen %u", res[0].walks);
}

/* Exit codes of the children of the exit and exec tests. */
enum {
	CHILD_ARM_FAILED = 10,
	CHILD_SYSCALL_RETURNED,
	/* from the new image of the exec test */
	NEW_IMAGE_NO_HOOK = 20,
	NEW_IMAGE_NOT_CALLED_ONCE,
	NEW_IMAGE_WRONG_STACK,
};

static const char *child_failure(int status)
{
	if (!WIFEXITED(status))
		return "killed";
	switch (WEXITSTATUS(status)) {
	case 0:
		return "none";
	case CHILD_ARM_FAILED:
		return "ARM failed";
	case CHILD_SYSCALL_RETURNED:
		return "the system call returned";
	case NEW_IMAGE_NO_HOOK:
		return "the new image could not read the hook";
	case NEW_IMAGE_NOT_CALLED_ONCE:
		return "consumer 1 was not called back once";
	case NEW_IMAGE_WRONG_STACK:
		return "consumer 1 did not get the new image's stack";
	}
	return "unknown";
}

TEST_F(unwind, exit_runs_the_pending_walk_on_the_exiting_stack)
{
	struct frames *fr = map_shared(sizeof(*fr));
	struct udt_arm_result armed;
	struct udt_result res;
	int status;
	pid_t child;

	ASSERT_TRUE(!!fr) TH_LOG("mmap: %s", strerror(errno));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		if (arm(self->fd, __NR_exit_group, 0))
			_exit(CHILD_ARM_FAILED);
		frames_1(fr, __NR_exit_group, 0, 0, 0);
		_exit(CHILD_SYSCALL_RETURNED);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_EQ(0, status)
		TH_LOG("child: wait status %#x: %s", status, child_failure(status));

	ASSERT_EQ(0, get_arm_result(self->fd, &armed));
	ASSERT_EQ(UDT_HIT_SYSCALL, armed.hits);
	EXPECT_EQ(child, armed.tid);
	EXPECT_EQ(0, armed.syscall_ret)
		TH_LOG("request at exit_group: expected 0 (queued), seen %d",
		       armed.syscall_ret);

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	ASSERT_EQ(1, res.calls)
		TH_LOG("a walk pending at exit: expected 1 callback, seen %u", res.calls);
	EXPECT_EQ(child, res.tid);
	EXPECT_EQ(child, res.tgid);
	EXPECT_EQ(armed.syscall_cookie, res.cookie)
		TH_LOG("expected the cookie of the request at exit_group %#llx, seen %#llx",
		       (unsigned long long)armed.syscall_cookie,
		       (unsigned long long)res.cookie);
	expect_frames(_metadata, &res, fr);
	EXPECT_EQ(1, res.walks);
	munmap(fr, sizeof(*fr));
}

/*
 * In the new image of exec_walks_the_old_image_under_the_old_cookie:
 * consumer 1, asked at sched_process_exec, must have been called back on
 * the way out of execve with the new image's IP: the entry point of its
 * ELF interpreter, or its own without one.
 */
static int exec_check(void)
{
	struct udt_result res = { .consumer = 1 };
	unsigned long base = getauxval(AT_BASE), expected;
	int fd = open(UDT_PATH, O_RDWR | O_CLOEXEC);

	if (base)
		/* e_entry: offset 24 of the ELF header, a word wide in both classes */
		expected = base + *(const unsigned long *)(base + 24);
	else
		expected = getauxval(AT_ENTRY);

	if (fd < 0 || ioctl(fd, UDT_IOC_RESULT, &res)) {
		fprintf(stderr, "# new image: %s: %s\n", UDT_PATH, strerror(errno));
		return NEW_IMAGE_NO_HOOK;
	}
	if (res.calls != 1) {
		fprintf(stderr, "# new image: consumer 1: expected 1 callback, seen %u\n",
			res.calls);
		return NEW_IMAGE_NOT_CALLED_ONCE;
	}
	if (!res.nr || res.entries[0] != expected) {
		fprintf(stderr, "# new image: consumer 1's entries[0]: expected %#lx, seen %#llx\n",
			expected, (unsigned long long)res.entries[0]);
		fprintf(stderr, "# (the new image's entry point; %u entries)\n", res.nr);
		return NEW_IMAGE_WRONG_STACK;
	}
	return 0;
}

TEST_F(unwind, exec_walks_the_old_image_under_the_old_cookie)
{
	struct frames *fr = map_shared(sizeof(*fr));
	struct udt_result res[UDT_CONSUMERS];
	struct udt_arm_result armed;
	int status;
	pid_t child;

	ASSERT_TRUE(!!fr) TH_LOG("mmap: %s", strerror(errno));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		char *const argv[] = { "/proc/self/exe", EXEC_CHECK_ARG, NULL };

		if (arm(self->fd, __NR_execve, UDT_ARM_EXEC))
			_exit(CHILD_ARM_FAILED);
		frames_1(fr, __NR_execve, (long)argv[0], (long)argv, (long)environ);
		_exit(CHILD_SYSCALL_RETURNED);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_EQ(0, status)
		TH_LOG("child: wait status %#x: %s", status, child_failure(status));

	ASSERT_EQ(0, get_arm_result(self->fd, &armed));
	ASSERT_EQ(UDT_HIT_SYSCALL | UDT_HIT_EXEC, armed.hits)
		TH_LOG("expected the hook to ask at execve and at exec, hits %#x",
		       armed.hits);
	EXPECT_EQ(0, armed.syscall_ret)
		TH_LOG("request at execve: expected 0 (queued), seen %d", armed.syscall_ret);
	EXPECT_EQ(0, armed.exec_ret)
		TH_LOG("request after exec: expected 0 (queued), seen %d", armed.exec_ret);
	EXPECT_NE(0, armed.exec_cookie);
	EXPECT_NE(armed.syscall_cookie, armed.exec_cookie)
		TH_LOG("exec must end the cookie: %#llx before and after",
		       (unsigned long long)armed.exec_cookie);

	/* consumer 0: the old image's stack, under the old cookie */
	ASSERT_EQ(0, get_result(self->fd, 0, &res[0]));
	ASSERT_EQ(1, res[0].calls)
		TH_LOG("a walk pending at exec: expected 1 callback, seen %u", res[0].calls);
	EXPECT_EQ(child, res[0].tid);
	EXPECT_EQ(armed.syscall_cookie, res[0].cookie)
		TH_LOG("expected the cookie of the request at execve %#llx, seen %#llx",
		       (unsigned long long)armed.syscall_cookie,
		       (unsigned long long)res[0].cookie);
	expect_frames(_metadata, &res[0], fr);

	/* consumer 1: the new cookie, and not the old image's stack */
	ASSERT_EQ(0, get_result(self->fd, 1, &res[1]));
	EXPECT_EQ(1, res[1].calls);
	EXPECT_EQ(child, res[1].tid);
	EXPECT_EQ(armed.exec_cookie, res[1].cookie)
		TH_LOG("expected the cookie of the request after exec %#llx, seen %#llx",
		       (unsigned long long)armed.exec_cookie,
		       (unsigned long long)res[1].cookie);
	EXPECT_NE((__u64)(uintptr_t)frames_syscall_ip, res[1].entries[0])
		TH_LOG("the old image's stack under the new cookie");

	EXPECT_EQ(2, res[0].walks)
		TH_LOG("expected 2 walks (old image, new image), seen %u", res[0].walks);
	munmap(fr, sizeof(*fr));
}

TEST_F(unwind, fork_child_has_no_pending_walk)
{
	struct udt_arm_result armed;
	struct frames fr = { };
	struct udt_result res;
	int status;
	long child;

	ASSERT_EQ(0, arm(self->fd, __NR_fork, 0)) TH_LOG("ARM: %s", strerror(errno));
	child = frames_1(&fr, __NR_fork, 0, 0, 0);
	if (!child)
		_exit(0);
	ASSERT_LT(0, child) TH_LOG("fork: %s", strerror(-child));
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_EQ(0, status);

	ASSERT_EQ(0, get_arm_result(self->fd, &armed));
	ASSERT_EQ(UDT_HIT_SYSCALL, armed.hits);
	EXPECT_EQ(0, armed.syscall_ret);

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	EXPECT_EQ(1, res.calls)
		TH_LOG("a walk pending at fork: expected 1 callback (the parent's), seen %u",
		       res.calls);
	EXPECT_EQ(sys_gettid(), res.tid)
		TH_LOG("expected the callback in the parent (%d), seen in %u",
		       sys_gettid(), res.tid);
	EXPECT_EQ(armed.syscall_cookie, res.cookie);
	expect_frames(_metadata, &res, &fr);
	EXPECT_EQ(1, res.walks)
		TH_LOG("expected 1 walk (the parent's), seen %u", res.walks);
}

TEST_F(unwind, consumers_past_the_limit_are_refused)
{
	struct udt_limit lim[2] = { };
	int i;

	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, ioctl(self->fd, UDT_IOC_LIMIT, &lim[i]))
			TH_LOG("LIMIT: %s", strerror(errno));
		EXPECT_EQ(-EBUSY, lim[i].refusal)
			TH_LOG("past the limit of %u: expected -EBUSY, seen %d after %u more",
			       lim[i].max, lim[i].refusal, lim[i].registered);
		EXPECT_LT(0, lim[i].registered)
			TH_LOG("no free consumer slot besides the hook's two");
		EXPECT_GE(lim[i].max - UDT_CONSUMERS, lim[i].registered)
			TH_LOG("%u more consumers past the hook's two, limit %u",
			       lim[i].registered, lim[i].max);
		EXPECT_EQ(1, lim[i].distinct_slots)
			TH_LOG("two registered consumers share a slot, or a slot is out of range");
		EXPECT_EQ(0, lim[i].reregister)
			TH_LOG("registering again after one unregister: expected 0, seen %d",
			       lim[i].reregister);
		EXPECT_EQ(-EBUSY, lim[i].refusal_again)
			TH_LOG("one more after that: expected -EBUSY, seen %d",
			       lim[i].refusal_again);
	}
	EXPECT_EQ(lim[0].registered, lim[1].registered)
		TH_LOG("unregister must free slots: %u more consumers the first time, %u then",
		       lim[0].registered, lim[1].registered);
	TH_LOG("limit %u: the hook's 2, %u more, so %u registered by others",
	       lim[0].max, lim[0].registered,
	       lim[0].max - UDT_CONSUMERS - lim[0].registered);
}

/* How the frame pointer chain is broken. */
enum corruption {
	NEXT_POINTS_DOWN,	/* the frame's next pointer is below it */
	NEXT_POINTS_AT_ITSELF,
	NEXT_MISALIGNED,	/* above it, but not word aligned */
	FRAME_MISALIGNED,	/* the frame pointer itself is not aligned */
	FRAME_OUTSIDE_USER,	/* the frame pointer is not a user address */
	FRAME_NULL,
};

FIXTURE(corrupt_frame) {
	int fd;
};

/**
 * FIXTURE_VARIANT(corrupt_frame) - a broken chain and what the walk may find
 * @corruption:	how the chain is broken
 * @max_nr:	2 when the walker may report the crafted frame's return address
 *		before it stops; 1 when it must stop at the IP
 */
FIXTURE_VARIANT(corrupt_frame) {
	enum corruption corruption;
	unsigned int max_nr;
};

FIXTURE_VARIANT_ADD(corrupt_frame, next_points_down) {
	.corruption = NEXT_POINTS_DOWN,
	.max_nr = 2,
};

FIXTURE_VARIANT_ADD(corrupt_frame, next_points_at_itself) {
	.corruption = NEXT_POINTS_AT_ITSELF,
	.max_nr = 2,
};

FIXTURE_VARIANT_ADD(corrupt_frame, next_misaligned) {
	.corruption = NEXT_MISALIGNED,
	.max_nr = 2,
};

FIXTURE_VARIANT_ADD(corrupt_frame, frame_misaligned) {
	.corruption = FRAME_MISALIGNED,
	.max_nr = 1,
};

FIXTURE_VARIANT_ADD(corrupt_frame, frame_outside_user_memory) {
	.corruption = FRAME_OUTSIDE_USER,
	.max_nr = 1,
};

FIXTURE_VARIANT_ADD(corrupt_frame, frame_null) {
	.corruption = FRAME_NULL,
	.max_nr = 1,
};

FIXTURE_SETUP(corrupt_frame)
{
	setup_hook(_metadata, &self->fd);
}

FIXTURE_TEARDOWN(corrupt_frame)
{
	teardown_hook(self->fd);
}

/*
 * The system call is made with the frame pointer at a crafted frame in
 * this function's own stack frame, above the stack pointer: { next, return
 * address }. The walk must stop there, and the kernel must not complain
 * (the VM harness checks its log).
 */
TEST_F(corrupt_frame, walk_stops_at_the_broken_frame)
{
	unsigned long stack[16] = { };
	unsigned long *frame = &stack[8];
	unsigned long fp = (unsigned long)frame;
	unsigned long ret_addr = (unsigned long)crafted_return;
	struct udt_request req = { };
	struct udt_result res;
	long ret;

	frame[1] = ret_addr;
	switch (variant->corruption) {
	case NEXT_POINTS_DOWN:
		frame[0] = (unsigned long)&stack[2];
		break;
	case NEXT_POINTS_AT_ITSELF:
		frame[0] = fp;
		break;
	case NEXT_MISALIGNED:
		frame[0] = (unsigned long)&stack[12] + 1;
		break;
	case FRAME_MISALIGNED:
		frame[0] = (unsigned long)&stack[12];
		fp += sizeof(long) / 2;
		break;
	case FRAME_OUTSIDE_USER:
		fp = OUTSIDE_USER;
		break;
	case FRAME_NULL:
		fp = 0;
		break;
	}

	add_step(&req, 0, UDT_CTX_TASK);
	ret = corrupt_syscall(fp, __NR_ioctl, self->fd, UDT_IOC_REQUEST, (long)&req);
	ASSERT_EQ(0, ret) TH_LOG("REQUEST: %s", strerror(-ret));

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	ASSERT_EQ(1, res.calls)
		TH_LOG("expected 1 callback, also for a broken chain, seen %u", res.calls);
	EXPECT_LE(1, res.nr) TH_LOG("the IP at least must be reported");
	EXPECT_EQ((__u64)(uintptr_t)corrupt_syscall_ip, res.entries[0])
		TH_LOG("entries[0]: expected %#lx, seen %#llx",
		       (unsigned long)corrupt_syscall_ip,
		       (unsigned long long)res.entries[0]);
	EXPECT_GE(variant->max_nr, res.nr)
		TH_LOG("walk past the frame at %#lx: %u entries, [1] %#llx, [2] %#llx",
		       fp, res.nr, (unsigned long long)res.entries[1],
		       (unsigned long long)res.entries[2]);
	if (res.nr >= 2) {
		EXPECT_EQ((__u64)ret_addr, res.entries[1])
			TH_LOG("entries[1]: expected the crafted return address %#lx, seen %#llx",
			       ret_addr, (unsigned long long)res.entries[1]);
	}
	EXPECT_EQ(1, res.walks);
}

#ifndef __x86_64__
/* SFrame tables are for 64-bit tasks: a compat task is told so. */
TEST(sframe_tables_are_not_for_compat_tasks)
{
	struct prctl_sframe arg = { };

	EXPECT_EQ(-1, prctl(PR_SFRAME, PR_SFRAME_ADD, &arg, sizeof(arg), 0));
	EXPECT_EQ(EOPNOTSUPP, errno)
		TH_LOG("expected EOPNOTSUPP, seen %s", strerror(errno));
}
#endif

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], EXEC_CHECK_ARG))
		return exec_check();
	return test_harness_run(argc, argv);
}
