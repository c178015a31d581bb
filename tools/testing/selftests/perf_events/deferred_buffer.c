// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user callchains in a buffer: one record per cookie in a buffer
 * two events share, the loss of records in a tiny buffer, and the sample's
 * max stack that cuts the record short.
 *
 * Built 64-bit, and 32-bit as deferred_buffer_32, a compat task (see
 * deferred_chain.h).
 */
#define _GNU_SOURCE

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_chain.h"

static void cookies_of(const struct ring *r, pid_t tid, __u64 id, size_t *n,
		       __u64 *cookies, size_t max)
{
	size_t i;

	*n = 0;
	for (i = 0; i < r->nr_rec && *n < max; i++)
		if (r->rec[i].type == PERF_RECORD_SAMPLE &&
		    r->rec[i].tid == (__u32)tid && r->rec[i].id == id &&
		    r->rec[i].cookie)
			cookies[(*n)++] = r->rec[i].cookie;
}

TEST(shared_buffer_one_record_per_cookie)
{
	struct perf_event_attr task = clock_attr(PERF_COUNT_SW_TASK_CLOCK, true);
	struct perf_event_attr cpu = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	static __u64 a[4096], b[4096];
	size_t na, nb, i, j, both = 0;
	pid_t tid = gettid_();
	struct ring r[2], *rp[2] = { &r[0], &r[1] };
	__u64 id[2];
	struct chain c;
	int fd;

	chain_init(_metadata, &c, 2 * WANT_SAMPLES);

	/* Two events, one buffer, twice the size: it takes both's samples. */
	open_ring(_metadata, &r[0], &task, 0, -1, 2 * DATA_PAGES);
	fd = perf_open(&cpu, 0, -1);
	ASSERT_LE(0, fd) TH_LOG("perf_event_open: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r[0].fd))
		TH_LOG("PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(r[0].fd, PERF_EVENT_IOC_ID, &id[0]));
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ID, &id[1]));
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	sample_chain(_metadata, &c, rp, 1);
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r[0]);

	cookies_of(&r[0], tid, id[0], &na, a, 4096);
	cookies_of(&r[0], tid, id[1], &nb, b, 4096);
	for (i = 0; i < na; i++)
		for (j = 0; j < nb; j++)
			if (a[i] == b[j]) {
				both++;
				break;
			}
	ASSERT_LE(1, both)
		TH_LOG("expected cookies sampled by both events (%zu and %zu samples), saw none",
		       na, nb);
	TH_LOG("shared buffer: %zu + %zu samples, %zu cookies in both",
	       na, nb, both);
	check_cookies(_metadata, &r[0], tid, ALL_DEFERRED | RECORD_AFTER);
	close(fd);
	close_ring(&r[0]);

	/* Two events, two buffers: each gets its own record. */
	open_ring(_metadata, &r[0], &task, 0, -1, DATA_PAGES);
	open_ring(_metadata, &r[1], &cpu, 0, -1, DATA_PAGES);
	sample_chain(_metadata, &c, rp, 2);
	check_cookies(_metadata, &r[0], tid, ALL_DEFERRED);
	check_cookies(_metadata, &r[1], tid, ALL_DEFERRED);
	close_ring(&r[0]);
	close_ring(&r[1]);
	chain_fini(&c);
}

TEST(lost_records_with_a_tiny_buffer)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	struct ring r, *rp = &r;
	__u64 id, lost, lost_rec = 0;
	int lost_records = 0, records = 0, cookies = 0;
	struct chain c;
	size_t i;

	attr.read_format = PERF_FORMAT_LOST;
	chain_init(_metadata, &c, SIZE_MAX);
	open_ring(_metadata, &r, &attr, 0, -1, 1);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ID, &id));

	/* No reader: the one page fills up and the rest is lost. */
	r.keep_tail = true;
	c.lost_fd = r.fd;
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
	c.deadline = ring_now() + RUN_SECONDS;
	chain_run(&c);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	lost = lost_count(r.fd);
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed)
		TH_LOG("expected well-formed records in the full buffer, saw %s", r.why);
	EXPECT_LT(0, lost)
		TH_LOG("expected lost samples after %ld reads into one page, read() says %llu",
		       c.reads, (unsigned long long)lost);

	/* Hand the page back: the next output starts with PERF_RECORD_LOST. */
	r.keep_tail = false;
	ring_drain(&r);
	c.lost_fd = -1;
	c.want_samples = r.nr_samples + 5;
	sample_chain(_metadata, &c, &rp, 1);
	for (i = 0; i < r.nr_rec; i++) {
		cookies += r.rec[i].type == PERF_RECORD_SAMPLE && r.rec[i].cookie;
		records += r.rec[i].type == PERF_RECORD_CALLCHAIN_DEFERRED;
		if (r.rec[i].type != PERF_RECORD_LOST &&
		    r.rec[i].type != PERF_RECORD_LOST_SAMPLES)
			continue;
		lost_records++;
		lost_rec += r.rec[i].lost;
		if (r.rec[i].type == PERF_RECORD_LOST)
			EXPECT_EQ(id, r.rec[i].id)
				TH_LOG("PERF_RECORD_LOST for id %llu, expected %llu",
				       (unsigned long long)r.rec[i].id,
				       (unsigned long long)id);
	}
	EXPECT_LE(1, lost_records)
		TH_LOG("want PERF_RECORD_LOST once there is room, none in %zu records",
		       r.nr_rec);
	EXPECT_LT(0, lost_rec)
		TH_LOG("expected a lost count > 0 in the lost records, saw %llu",
		       (unsigned long long)lost_rec);
	EXPECT_LE(1, cookies) TH_LOG("expected samples with a cookie, saw none");
	/*
	 * One page holds fewer samples than one system call takes: the
	 * record written at its end may well be lost too. Not asserted.
	 */
	TH_LOG("%d deferred records made it into the page", records);

	close_ring(&r);
	chain_fini(&c);
}

TEST(max_stack_truncates_the_record)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	int records = 0, bad = 0;
	struct ring r, *rp = &r;
	char msg[128] = "";
	struct chain c;
	size_t i;

	attr.sample_max_stack = 2;
	chain_init(_metadata, &c, WANT_SAMPLES);
	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	sample_chain(_metadata, &c, &rp, 1);
	check_cookies(_metadata, &r, gettid_(), ALL_DEFERRED | RECORD_AFTER);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED)
			continue;
		records++;
		if (rr->nr > 2 && !bad++)
			snprintf(msg, sizeof(msg), "cookie %#llx has %llu ips",
				 (unsigned long long)rr->cookie,
				 (unsigned long long)rr->nr);
	}
	ASSERT_LE(1, records) TH_LOG("expected deferred records, saw none");
	EXPECT_EQ(0, bad)
		TH_LOG("want nr <= sample_max_stack 2, %d of %d exceed (%s)",
		       bad, records, msg);
	/* The walk is cut, not lost: the two innermost frames are there. */
	check_chain_records(_metadata, &r, gettid_(), &c, 2);

	close_ring(&r);
	chain_fini(&c);
}

TEST_HARNESS_MAIN
