// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED from NMI context, through the test hook of
 * lib/test_unwind_deferred.c, which sends the task real NMIs: a
 * tracepoint raised inside an NMI handler (nmi:nmi_handler, whose
 * registers are synthetic: the handler's own, not what the NMI
 * interrupted) defers like any other sample, and its record carries the
 * user stack of the stay the NMI interrupted, also when the NMI came at
 * the very end of the return to user space, past the exit work's last
 * look at the thread flags (where a return thunk runs on a distribution
 * kernel).
 *
 * Build with frame pointers and no sibling calls (see Makefile). Built
 * 64-bit, and 32-bit as deferred_nmi_32, a compat task.
 */
#define _GNU_SOURCE
#include <sys/ioctl.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_progress.h"
#include "../unwind_deferred/udt_hook.h"
#include "../unwind_deferred/udt_test.h"

#define NMI_DATA_PAGES		64
/* NMIs sent from inside system calls, before their exit work. */
#define NMI_IN_SYSCALLS		8

/* The samples of nmi:nmi_handler in @r, for this thread. */
static size_t nmi_samples(const struct ring *r, pid_t tid)
{
	size_t i, n = 0;

	for (i = 0; i < r->nr_rec; i++)
		if (r->rec[i].type == PERF_RECORD_SAMPLE && r->rec[i].tid == (__u32)tid)
			n++;
	return n;
}

TEST_F(unwind, event_in_nmi_handler_gets_the_stack_of_its_stay)
{
	long id = tracepoint_id("nmi/nmi_handler");
	struct perf_event_attr attr;
	struct udt_arm_result armed;
	struct frames fr = { };
	const struct ring_record *rec;
	pid_t tid = sys_gettid();
	size_t i, first = 0, exit_records = 0;
	struct ring r;
	long ret;
	int n;

	ASSERT_LE(0, id) TH_LOG("no nmi:nmi_handler tracepoint in tracefs");
	attr = sample_attr(PERF_TYPE_TRACEPOINT, id, 1,
			   PERF_SAMPLE_CALLCHAIN_DEFERRED);
	open_ring(_metadata, &r, &attr, 0, -1, NMI_DATA_PAGES);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));

	/* NMIs in system calls: the exit work is still to come. */
	for (i = 0; i < NMI_IN_SYSCALLS; i++) {
		struct udt_request req = { };

		add_step(&req, 0, UDT_CTX_NMI);
		ASSERT_EQ(0, request(self->fd, &req))
			TH_LOG("REQUEST: %s", strerror(errno));
		ASSERT_TRUE(req.steps[0].in_nmi);
	}
	/* One NMI past the exit work of getppid(): only the event asks. */
	ASSERT_EQ(0, arm(self->fd, __NR_getppid, UDT_ARM_EXIT_NMI_ONLY))
		TH_LOG("ARM: %s", strerror(errno));
	ret = frames_1(&fr, __NR_getppid, 0, 0, 0);
	ASSERT_EQ(getppid(), ret);
	ASSERT_EQ(0, get_arm_result(self->fd, &armed));

	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ASSERT_LE(0, ring_drain(&r)) TH_LOG("ring: %s", r.why);
	ASSERT_EQ(UDT_HIT_SYSCALL | UDT_HIT_EXIT_NMI, armed.hits)
		TH_LOG("expected an NMI at the exit of getppid, hits %#x", armed.hits);
	ASSERT_EQ(1, armed.exit_nmi_in_nmi);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("%s", r.why);
	EXPECT_LE(NMI_IN_SYSCALLS + 1, nmi_samples(&r, tid))
		TH_LOG("expected a sample per NMI at least, seen %zu",
		       nmi_samples(&r, tid));

	/*
	 * Every sample was deferred (taken in kernel mode) and has the one
	 * record of its cookie, written after it.
	 */
	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *s = &r.rec[i];

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)tid)
			continue;
		ASSERT_NE(0, s->cookie)
			TH_LOG("sample %zu: not deferred (cookie 0)", i);
		n = records_of_cookie(&r, s->cookie, &first);
		EXPECT_EQ(1, n)
			TH_LOG("sample %zu, cookie %#llx: %d records", i,
			       (unsigned long long)s->cookie, n);
		if (n >= 1)
			EXPECT_LT(i, first)
				TH_LOG("sample %zu: its record %zu came before it", i, first);
	}

	/*
	 * The samples of the NMI at the exit of getppid() took a new cookie
	 * (one NMI may run several handlers, each a sample), as the stay of
	 * getppid() was over; the record of that cookie has the stack of
	 * getppid(), walked before any user instruction: not the stack of
	 * the next system call.
	 */
	for (i = 0; i < r.nr_rec; i++) {
		struct udt_result walk = { };
		unsigned int k;

		rec = &r.rec[i];
		if (rec->type != PERF_RECORD_CALLCHAIN_DEFERRED || !rec->nr ||
		    rec->ips[0] != (__u64)(unsigned long)frames_syscall_ip)
			continue;
		exit_records++;
		walk.nr = rec->nr;
		for (k = 0; k < rec->nr && k < UDT_MAX_ENTRIES; k++)
			walk.entries[k] = rec->ips[k];
		expect_frames(_metadata, &walk, &fr);
	}
	EXPECT_EQ(1, exit_records)
		TH_LOG("expected one record with the stack of getppid(), seen %zu",
		       exit_records);
	close_ring(&r);
}

TEST_HARNESS_MAIN
