// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED: progress when a record is lost. A stay's
 * record that does not fit its buffer is lost, and the samples of the stay
 * taken on the task's way out to user space (the preemptirq:irq_enable
 * tracepoint fires there, after the exit work) carry the walk themselves,
 * with cookie 0.
 *
 * Build with frame pointers and no sibling calls (see Makefile). Built
 * 64-bit, and 32-bit as deferred_lost_record_32, a compat task. Pointers
 * are checked as truth values (ASSERT_FALSE(!p)): the harness would print
 * them as 64-bit integers.
 */
#define _GNU_SOURCE
#include <sys/ioctl.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_progress.h"

/*
 * lost_record_is_not_taken_for_written: a stay's record that does not fit
 * its buffer is lost, and the samples of the stay taken after its walk (the
 * irq_enable tracepoint on the way out, after the exit work's task work)
 * must not be told that the buffer has it: they carry the walk themselves,
 * with cookie 0. The buffer once remembered the cookie before the write,
 * and those samples came out with a cookie whose record nobody would see.
 * The record is made too big for the room the reader leaves in the buffer
 * (it holds back all but LOST_ROOM bytes of what it read; a second event's
 * sample_max_stack makes the walk LOST_MAX_STACK frames deep) while the
 * tracepoint's samples stay small. The walk is kept short on purpose: the
 * timer tick's irq_enable samples ask for a walk too, and a walk longer
 * than a tick left the task no time of its own.
 */
#define LOST_ROOM		1024
#define LOST_MAX_STACK		200	/* a record of 1.6 KiB */
#define LOST_DEPTH		210
#define LOST_SYSCALLS		200
#define LOST_SMALL_STACK	8

struct lost_run {
	struct ring *r;
	long err;
	size_t first, end;	/* records read while the stack was deep */
	int cookie0;		/* samples of this thread with cookie 0 */
	int deferred;		/* ... and with a cookie */
};

static __attribute__((noipa)) long lost_call(struct lost_run *l, int depth)
{
	long ret = 0;
	size_t i, seen;
	int n;

	if (depth)
		return lost_call(l, depth - 1) + 1;	/* no tail call */
	/* Until the reader holds back that much, the buffer has more room. */
	for (n = 0; n < LOST_SYSCALLS && l->r->off <= l->r->hold_back; n++) {
		syscall(__NR_getppid);
		ring_drain(l->r);
	}
	l->first = l->r->nr_rec;
	for (n = 0; n < LOST_SYSCALLS; n++) {
		seen = l->r->nr_rec;
		syscall(__NR_getppid);
		ring_drain(l->r);
		for (i = seen; i < l->r->nr_rec; i++) {
			const struct ring_record *rr = &l->r->rec[i];

			if (rr->type != PERF_RECORD_SAMPLE || rr->tid != gettid_())
				continue;
			if (rr->cookie)
				l->deferred++;
			else
				l->cookie0++;
		}
	}
	l->end = l->r->nr_rec;
	return ret;
}

TEST(lost_record_is_not_taken_for_written)
{
	const char *sysctl = "/proc/sys/kernel/perf_event_max_stack";
	long id = tracepoint_id("preemptirq/irq_enable");
	long max = read_number(sysctl);
	struct perf_event_attr tp =
		sample_attr(PERF_TYPE_TRACEPOINT, 0, 1,
			    PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN_DEFERRED);
	struct perf_event_attr big = clock_attr(PERF_COUNT_SW_DUMMY, true, 0);
	struct lost_run l = { 0 };
	int fd, records = 0;
	struct ring r;
	char buf[32];
	size_t i;
	FILE *f;

	ASSERT_LE(0, id) TH_LOG("no preemptirq:irq_enable tracepoint");
	ASSERT_LE(0, max) TH_LOG("%s: %s", sysctl, strerror(errno));
	f = fopen(sysctl, "w");
	ASSERT_FALSE(!f) TH_LOG("%s: %s", sysctl, strerror(errno));
	ASSERT_LT(0, fprintf(f, "%d\n", LOST_MAX_STACK));
	ASSERT_EQ(0, fclose(f)) TH_LOG("%s = %d: %s", sysctl, LOST_MAX_STACK,
				       strerror(errno));

	tp.config = id;
	tp.sample_max_stack = LOST_SMALL_STACK;
	big.sample_max_stack = LOST_MAX_STACK;
	open_ring(_metadata, &r, &tp, 0, -1, 1);
	r.hold_back = r.data_size - LOST_ROOM;
	fd = perf_open(&big, 0, -1);
	ASSERT_LE(0, fd) TH_LOG("perf_event_open(dummy): %s", strerror(errno));
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r.fd))
		TH_LOG("PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));

	l.r = &r;
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
	lost_call(&l, LOST_DEPTH);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);

	snprintf(buf, sizeof(buf), "%ld\n", max);
	f = fopen(sysctl, "w");
	if (f) {
		fputs(buf, f);
		fclose(f);
	}
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed records: %s", r.why);
	ASSERT_LT(r.hold_back, r.off)
		TH_LOG("%d getppid() wrote less than %zu bytes", LOST_SYSCALLS,
		       r.hold_back);
	/*
	 * The records of the deep stays: a tick's stay in code a walk by
	 * frame pointers cannot leave (a compat libc) has a small one.
	 */
	for (i = l.first; i < l.end; i++)
		records += r.rec[i].type == PERF_RECORD_CALLCHAIN_DEFERRED &&
			   r.rec[i].nr >= LOST_MAX_STACK;
	EXPECT_EQ(0, records)
		TH_LOG("a record of %d frames fit in %d bytes", LOST_MAX_STACK,
		       LOST_ROOM);
	TH_LOG("%d getppid(): %d samples with a cookie, %d with cookie 0",
	       LOST_SYSCALLS, l.deferred, l.cookie0);
	ASSERT_LE(LOST_SYSCALLS / 2, l.deferred)
		TH_LOG("expected the samples before each walk deferred, saw %d", l.deferred);
	/* At least one sample after each walk, but for a few. */
	EXPECT_LE(LOST_SYSCALLS / 2, l.cookie0)
		TH_LOG("expected the samples after a lost record with cookie 0, saw %d",
		       l.cookie0);
	close(fd);
	close_ring(&r);
}

TEST_HARNESS_MAIN
