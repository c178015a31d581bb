// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED from the observer's side: a backward
 * (overwritable) buffer gets its PERF_RECORD_CALLCHAIN_DEFERRED records,
 * written backward.
 *
 * Build with frame pointers and no sibling calls (see Makefile).
 */
#define _GNU_SOURCE
#include <sys/ioctl.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_observe.h"

#define BACKWARD_PAGES		8	/* small: overwritten several times */
#define BACKWARD_WRAPS		4	/* ... this many times at least */

/*
 * Read a backward buffer from its newest record (data_head) towards older
 * ones, up to the oldest whole record. *wrapped: older data was overwritten.
 */
static void ring_read_backward(struct ring *r, bool *wrapped)
{
	__u64 head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	__u64 end, pos = head;

	/* Backward, data_head goes down from 0: -head bytes were written. */
	*wrapped = -head > r->data_size;
	end = *wrapped ? head + r->data_size : 0;
	while (end - pos >= sizeof(struct perf_event_header)) {
		struct perf_event_header hdr;

		ring_copy(r, &hdr, pos, sizeof(hdr));
		/* The oldest record may be cut by the newest: the end. */
		if (*wrapped && hdr.size > end - pos)
			break;
		if (hdr.size < sizeof(hdr) || hdr.size % 8 || hdr.size > end - pos) {
			if (!r->nr_malformed++)
				snprintf(r->why, sizeof(r->why),
					 "header size %u at offset %llu from data_head",
					 hdr.size, (unsigned long long)(pos - head));
			break;
		}
		if (!ring_append(r, &hdr, pos))
			break;
		pos += hdr.size;
	}
}

TEST(backward_buffer_gets_records)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK);
	long page = sysconf(_SC_PAGESIZE);
	int records = 0, bad_misc = 0, dup = 0;
	__u32 tid = gettid_(), first = 0;
	__u64 excuse[2] = { 0, 0 }, written;
	bool wrapped = false;
	int sampled = 0;
	struct burner b;
	double deadline;
	struct join j;
	struct ring r;
	size_t i, k;

	attr.write_backward = 1;
	burner_init(_metadata, &b);
	memset(&r, 0, sizeof(r));
	r.fd = perf_open(&attr, 0, -1);
	ASSERT_LE(0, r.fd) TH_LOG("perf_event_open(write_backward): %s", strerror(errno));
	r.sample_type = attr.sample_type;
	r.sample_id_all = true;
	r.keep_tail = true;
	r.data_size = BACKWARD_PAGES * page;
	r.map_size = r.data_size + page;
	/* Read-only: the kernel overwrites the oldest data. */
	r.meta = mmap(NULL, r.map_size, PROT_READ, MAP_SHARED, r.fd, 0);
	ASSERT_FALSE(r.meta == MAP_FAILED) TH_LOG("mmap: %s", strerror(errno));
	r.data = (char *)r.meta + page;

	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
	deadline = ring_now() + RUN_SECONDS;
	do {
		burn(&b);
		written = -__atomic_load_n(&r.meta->data_head, __ATOMIC_ACQUIRE);
	} while (written < BACKWARD_WRAPS * r.data_size && ring_now() < deadline);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));

	ring_read_backward(&r, &wrapped);
	ASSERT_TRUE(wrapped)
		TH_LOG("expected the %zu bytes of buffer overwritten, %llu bytes written",
		       r.data_size, (unsigned long long)written);
	EXPECT_EQ(0, r.nr_malformed)
		TH_LOG("want whole records back from data_head, saw %s", r.why);

	/*
	 * rec[0] is the newest. The newest stay may have no record (sampling
	 * stopped in it), the oldest one's record may be older than its
	 * samples (taken after its walk), overwritten. A newest or oldest
	 * sample taken in user mode (cookie 0) excuses nothing: no stay was
	 * under way then.
	 */
	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type == PERF_RECORD_SAMPLE && rr->tid == tid) {
			if (!sampled++)
				excuse[0] = rr->cookie;
			excuse[1] = rr->cookie;
		}
		if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED)
			continue;
		records++;
		if ((rr->misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER)
			bad_misc++;
		if (records_of_cookie(&r, rr->cookie, &k) > 1)
			dup++;
	}
	j = join_tid(&r, tid, excuse, 2, false);
	ASSERT_LE(MIN_SAMPLES, j.samples)
		TH_LOG("expected samples in the newest %zu bytes, saw %d",
		       r.data_size, j.samples);
	EXPECT_LE(1, records) TH_LOG("expected records in the backward buffer, saw none");
	EXPECT_EQ(0, dup) TH_LOG("want 1 record per cookie, %d records have another", dup);
	EXPECT_EQ(0, bad_misc) TH_LOG("want PERF_RECORD_MISC_USER, %d records had not", bad_misc);
	EXPECT_EQ(0, count_other(&r, PERF_RECORD_CALLCHAIN_DEFERRED, tid, getpid(), &first))
		TH_LOG("expected records of this thread only, saw tid %u", first);
	expect_joined(_metadata, "the backward buffer", tid, &j);
	TH_LOG("%zu records in the newest %zu bytes of %llu: %d samples, %d joined, %d records",
	       r.nr_rec, r.data_size, (unsigned long long)written, j.samples,
	       j.joined, records);

	munmap(r.meta, r.map_size);
	r.meta = NULL;
	close_ring(&r);
	burner_fini(&b);
}

TEST_HARNESS_MAIN
