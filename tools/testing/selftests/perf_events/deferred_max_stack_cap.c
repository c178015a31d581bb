// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED: a ring buffer that events share gets one
 * PERF_RECORD_CALLCHAIN_DEFERRED record per cookie, cut by the largest
 * sample_max_stack of its events, whichever event the kernel meets first.
 *
 * Build with frame pointers and no sibling calls (see Makefile). Built
 * 64-bit, and 32-bit as deferred_max_stack_cap_32, a compat task.
 */
#define _GNU_SOURCE
#include <sys/ioctl.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_progress.h"

/* shared_buffer_capped_by_largest_max_stack */
#define DEPTH			40	/* recursion at the system call */
#define SMALL_MAX_STACK		4
#define LARGE_MAX_STACK		32	/* < DEPTH: the walk is always cut */
/*
 * A sample costs some 100 us under TCG and KASAN, which task-clock counts
 * too: at a period near that, the samples' own cost made thousands of them
 * (6,670 for 20 reads of "2 ms" in a compat task) and the test ran past
 * the harness's 30 s. A period of 1 ms with reads of 4 ms still samples
 * every read several times.
 */
#define CAP_PERIOD_NS		1000000
#define CAP_DATA_PAGES		64
#define CAP_READ_SECONDS	0.004
#define CAP_WANT_RECORDS	20
#define CAP_WALL_SECONDS	3.0

/*
 * shared_buffer_capped_by_largest_max_stack: two events write into one
 * buffer, one with sample_max_stack SMALL_MAX_STACK, one with
 * LARGE_MAX_STACK; the thread samples a system call DEPTH frames deep.
 */
struct deep {
	struct zero_reader z;
	struct ring *r;
	unsigned long where;	/* user IP after the readv() at the bottom */
	unsigned long ret;	/* return address of every level but the top */
	size_t seen;		/* records of r looked at */
	size_t bottom;		/* records whose walk starts at the bottom */
	double deadline;
	long reads;
	long err;
};

static bool deep_done(struct deep *d)
{
	ring_drain(d->r);
	for (; d->seen < d->r->nr_rec; d->seen++) {
		const struct ring_record *rr = &d->r->rec[d->seen];

		d->bottom += rr->type == PERF_RECORD_CALLCHAIN_DEFERRED &&
			     rr->nr && rr->ips[0] == d->where;
	}
	return d->bottom >= CAP_WANT_RECORDS || ring_now() > d->deadline;
}

static __attribute__((noipa)) long deep_call(struct deep *d, int depth)
{
	long ret;

	if (depth) {
		ret = deep_call(d, depth - 1);
		return ret + 1;		/* no tail call */
	}
	d->ret = (unsigned long)__builtin_return_address(0);
	do {
		ret = raw_syscall(d->where, __NR_readv, d->z.fd, d->z.iov,
				  d->z.iovcnt, 0, 0, 0);
		if (ret != (long)d->z.len) {
			d->err = ret;
			break;
		}
		d->reads++;
	} while (!deep_done(d));
	return 0;
}

static void capped_run(struct __test_metadata *_metadata, bool small_owns)
{
	struct perf_event_attr small = clock_attr(PERF_COUNT_SW_TASK_CLOCK, true,
						  CAP_PERIOD_NS);
	struct perf_event_attr large = small;
	struct perf_event_attr *own = small_owns ? &small : &large;
	struct perf_event_attr *other = small_owns ? &large : &small;
	int records = 0, bottom = 0, bad_nr = 0, bad_frames = 0, over = 0;
	char nr_msg[128] = "", frame_msg[160] = "", over_msg[128] = "";
	const char *order = small_owns ?
		"the capped event owns the buffer" :
		"the capped event is redirected into the buffer";
	struct ring_stats st;
	struct deep d = { 0 };
	struct ring r;
	size_t i;
	__u64 k;
	int fd;

	small.sample_max_stack = SMALL_MAX_STACK;
	large.sample_max_stack = LARGE_MAX_STACK;
	zero_init(_metadata, &d.z, CAP_READ_SECONDS);
	open_ring(_metadata, &r, own, 0, -1, CAP_DATA_PAGES);
	fd = perf_open(other, 0, -1);
	ASSERT_LE(0, fd) TH_LOG("perf_event_open, sample_max_stack %u: %s",
				other->sample_max_stack, strerror(errno));
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r.fd))
		TH_LOG("PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));

	d.r = &r;
	d.deadline = ring_now() + CAP_WALL_SECONDS;
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	deep_call(&d, DEPTH);
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	ASSERT_EQ(0, d.err) TH_LOG("readv of /dev/zero: %ld", d.err);
	EXPECT_EQ(0, r.nr_malformed)
		TH_LOG("%s: expected well-formed records, saw %s", order, r.why);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED)
			continue;
		records++;
		if (rr->nr > LARGE_MAX_STACK && !over++)
			snprintf(over_msg, sizeof(over_msg), "cookie %#llx: %llu ips",
				 (unsigned long long)rr->cookie,
				 (unsigned long long)rr->nr);
		if (!rr->nr || rr->ips[0] != d.where)
			continue;
		bottom++;
		/* DEPTH + 2 frames up there: the walk is cut at the larger cap. */
		if (rr->nr != LARGE_MAX_STACK) {
			if (!bad_nr++)
				snprintf(nr_msg, sizeof(nr_msg), "cookie %#llx: %llu ips",
					 (unsigned long long)rr->cookie,
					 (unsigned long long)rr->nr);
			continue;
		}
		for (k = 1; k < rr->nr; k++) {
			if (rr->ips[k] == d.ret)
				continue;
			if (!bad_frames++)
				snprintf(frame_msg, sizeof(frame_msg),
					 "cookie %#llx: ips[%llu] = %#llx, expected the recursion's return address %#lx",
					 (unsigned long long)rr->cookie,
					 (unsigned long long)k,
					 (unsigned long long)rr->ips[k], d.ret);
			break;
		}
	}
	analyze_ring(_metadata, &r, gettid_(), &st);

	TH_LOG("%s: %zu samples, %zu with a cookie, %ld reads",
	       order, st.samples, st.deferred, d.reads);
	TH_LOG("%s: %d records, %d from the bottom of %d frames",
	       order, records, bottom, DEPTH);
	ASSERT_LE(1, bottom)
		TH_LOG("%s: want records of the readv() at ips[0] %#lx, none of %d",
		       order, d.where, records);
	EXPECT_EQ(0, bad_nr)
		TH_LOG("%s: want nr = the larger max stack %d, %d of %d differ (first: %s)",
		       order, LARGE_MAX_STACK, bad_nr, bottom, nr_msg);
	EXPECT_EQ(0, over)
		TH_LOG("%s: want nr <= the larger max stack %d, %d exceed it (first: %s)",
		       order, LARGE_MAX_STACK, over, over_msg);
	EXPECT_EQ(0, bad_frames)
		TH_LOG("%s: %d records differ from the recursion (first: %s)",
		       order, bad_frames, frame_msg);
	EXPECT_EQ(0, st.dup)
		TH_LOG("%s: want one record per cookie, %zu cookies had more (first: %s)",
		       order, st.dup, st.dup_msg);

	close(fd);
	close_ring(&r);
	zero_fini(&d.z);
}

TEST(shared_buffer_capped_by_largest_max_stack)
{
	long max = read_number("/proc/sys/kernel/perf_event_max_stack");

	if (max >= 0 && max < LARGE_MAX_STACK)
		SKIP(return, "kernel.perf_event_max_stack is %ld, below %d",
		     max, LARGE_MAX_STACK);
	/* The old code took the cap of whichever event it met first. */
	capped_run(_metadata, true);
	capped_run(_metadata, false);
}

TEST_HARNESS_MAIN
