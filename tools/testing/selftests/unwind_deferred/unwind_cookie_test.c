// SPDX-License-Identifier: GPL-2.0
/*
 * The cookies of deferred user stack walks, through the test hook of
 * lib/test_unwind_deferred.c: one cookie and one walk per kernel stay,
 * shared by requests from task, IRQ and NMI context, at most one
 * self-interrupt per stay for NMI requests, an NMI past the exit work
 * walked in its own stay, and the cookie kept across migration.
 *
 * Built 64-bit and 32-bit (compat), as unwind_cookie_test_32.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "../kselftest_harness.h"
#include "../perf_events/deferred_iwi.h"
#include "udt_hook.h"
#include "udt_test.h"

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
 * An NMI may interrupt any instruction, the return thunk after the exit
 * work's last look at the thread flags too: every NMI request that queues
 * a walk raises a self-interrupt, whose return to user space runs it. The
 * other requests of the stay share that walk: at most one self-interrupt
 * per stay, however many NMIs asked in it (three here, for two consumers).
 */
#define NMI_STAYS		200
#define NMI_REQUESTS_PER_STAY	3
/* Other interrupt work of the machine meanwhile: a little, not a request's. */
#define NMI_MAX_IWI_PER_STAY	1.1

TEST_F(unwind, nmi_requests_raise_at_most_one_interrupt_per_stay)
{
	long long before, after;
	struct udt_result res[UDT_CONSUMERS];
	double per_stay;
	int i, j;

	before = iwi_count();
	ASSERT_LE(0, before) TH_LOG("no IWI line in /proc/interrupts");
	for (i = 0; i < NMI_STAYS; i++) {
		struct udt_request req = { };

		for (j = 0; j < NMI_REQUESTS_PER_STAY; j++)
			add_step(&req, j & 1, UDT_CTX_NMI);
		ASSERT_EQ(0, request(self->fd, &req))
			TH_LOG("REQUEST %d: %s", i, strerror(errno));
		for (j = 0; j < NMI_REQUESTS_PER_STAY; j++) {
			ASSERT_TRUE(req.steps[j].in_nmi);
			ASSERT_EQ(0, req.steps[j].ret)
				TH_LOG("stay %d, request %d: expected 0 (queued), seen %d",
				       i, j, req.steps[j].ret);
		}
	}
	after = iwi_count();

	/* Every walk ran, each before its system call returned. */
	for (j = 0; j < UDT_CONSUMERS; j++) {
		ASSERT_EQ(0, get_result(self->fd, j, &res[j]));
		EXPECT_EQ(NMI_STAYS, res[j].calls)
			TH_LOG("consumer %d: expected %d callbacks, one per stay, seen %u",
			       j, NMI_STAYS, res[j].calls);
	}
	EXPECT_EQ(NMI_STAYS, res[0].walks)
		TH_LOG("expected %d walks, one per stay, seen %u", NMI_STAYS,
		       res[0].walks);
	per_stay = (double)(after - before) / NMI_STAYS;
	TH_LOG("%d stays of %d NMI requests: %lld interrupt work interrupts, %.3f per stay",
	       NMI_STAYS, NMI_REQUESTS_PER_STAY, after - before, per_stay);
	EXPECT_GE(NMI_MAX_IWI_PER_STAY, per_stay)
		TH_LOG("expected one self-interrupt per stay at most (%.2f), seen %.3f",
		       NMI_MAX_IWI_PER_STAY, per_stay);
}

/*
 * An NMI past the exit work's last look at the thread flags (here, at the
 * very end of exit_to_user_mode(), where a return thunk would be on a
 * distribution kernel) starts a new stay, as the stay of the system call
 * ended already; its walk must run before any user instruction, so it
 * finds the stack of the system call, not that of the next kernel entry.
 * Nothing else would run it before the next system call, made here from
 * another place.
 */
TEST_F(unwind, nmi_past_the_exit_work_is_walked_in_its_own_stay)
{
	struct udt_result res[UDT_CONSUMERS];
	struct udt_arm_result armed;
	struct frames fr = { };
	long ret;
	int i;

	ASSERT_EQ(0, arm(self->fd, __NR_getppid, UDT_ARM_EXIT_NMI))
		TH_LOG("ARM: %s", strerror(errno));
	ret = frames_1(&fr, __NR_getppid, 0, 0, 0);
	ASSERT_EQ(getppid(), ret);

	ASSERT_EQ(0, get_arm_result(self->fd, &armed));
	ASSERT_EQ(UDT_HIT_SYSCALL | UDT_HIT_EXIT_NMI, armed.hits)
		TH_LOG("expected the hook to ask at getppid and in the NMI at its exit, hits %#x",
		       armed.hits);
	EXPECT_EQ(0, armed.syscall_ret);
	EXPECT_EQ(1, armed.exit_nmi_in_nmi)
		TH_LOG("the request at the exit did not run in an NMI");
	EXPECT_EQ(0, armed.exit_nmi_ret)
		TH_LOG("the NMI's request: expected 0 (queued), seen %d",
		       armed.exit_nmi_ret);
	expect_cookie_shape(_metadata, armed.exit_nmi_cookie,
			    (__u32)armed.exit_nmi_cookie - 1);
	EXPECT_NE(armed.syscall_cookie, armed.exit_nmi_cookie)
		TH_LOG("the NMI came after the stay ended, yet got its cookie %#llx",
		       (unsigned long long)armed.syscall_cookie);

	for (i = 0; i < UDT_CONSUMERS; i++) {
		ASSERT_EQ(0, get_result(self->fd, i, &res[i]));
		EXPECT_EQ(1, res[i].calls)
			TH_LOG("consumer %d: expected 1 callback, seen %u", i, res[i].calls);
	}
	EXPECT_EQ(armed.syscall_cookie, res[0].cookie);
	EXPECT_EQ(armed.exit_nmi_cookie, res[1].cookie)
		TH_LOG("consumer 1: expected the NMI's cookie %#llx, seen %#llx",
		       (unsigned long long)armed.exit_nmi_cookie,
		       (unsigned long long)res[1].cookie);
	/* Both stays saw the same user stack: that of getppid(). */
	expect_frames(_metadata, &res[0], &fr);
	expect_frames(_metadata, &res[1], &fr);
	EXPECT_EQ(2, res[0].walks)
		TH_LOG("expected a walk per stay, seen %u", res[0].walks);
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

TEST_HARNESS_MAIN
