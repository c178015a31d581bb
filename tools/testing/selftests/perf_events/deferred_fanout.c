// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED: which ring buffers get the
 * PERF_RECORD_CALLCHAIN_DEFERRED records. Every ring buffer that observes
 * the task gets exactly one record per cookie, with more than 16 buffers
 * and with events sharing a buffer.
 *
 * Build with frame pointers and no sibling calls (see Makefile). Built
 * 64-bit, and 32-bit as deferred_fanout_32, a compat task. Pointers are
 * checked as truth values (ASSERT_FALSE(!p)): the harness would print them
 * as 64-bit integers.
 */
#define _GNU_SOURCE
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/uio.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_progress.h"

/* every_buffer_gets_one_record */
#define NR_BUFFERS		20	/* more than the 16 the old table held */
#define FANOUT_PERIOD_NS	2000000
#define FANOUT_DATA_PAGES	16
#define FANOUT_ITERATIONS	30
#define FANOUT_READ_SECONDS	0.004	/* each readv(): 2 samples per event */
#define FANOUT_SPIN_SECONDS	0.0005
#define FANOUT_WALL_SECONDS	10.0

static int cmp_u64(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

/*
 * every_buffer_gets_one_record: NR_BUFFERS buffers on this thread, each
 * written to by two events (the second one redirected with
 * PERF_EVENT_IOC_SET_OUTPUT), all sampling the same long system calls.
 * Each stay's record goes to every buffer, once.
 */
/* Is c in the sorted v[0..n)? */
static bool has_u64(const __u64 *v, size_t n, __u64 c)
{
	return bsearch(&c, v, n, sizeof(*v), cmp_u64);
}

/* The distinct cookies of the samples of tid in r, sorted; returns how many. */
static size_t sample_cookies(const struct ring *r, pid_t tid, __u64 **v)
{
	size_t i, n = 0, u = 0;

	*v = calloc(r->nr_samples + 1, sizeof(**v));
	if (!*v)
		return 0;
	for (i = 0; i < r->nr_rec; i++)
		if (r->rec[i].type == PERF_RECORD_SAMPLE &&
		    r->rec[i].tid == (__u32)tid && r->rec[i].cookie && n < r->nr_samples)
			(*v)[n++] = r->rec[i].cookie;
	qsort(*v, n, sizeof(**v), cmp_u64);
	for (i = 0; i < n; i++)
		if (!u || (*v)[u - 1] != (*v)[i])
			(*v)[u++] = (*v)[i];
	return u;
}

/* How many records r has for cookie c; refs are its sorted records. */
static size_t records_of(const struct cookie_ref *refs, size_t nrefs, __u64 c)
{
	size_t i = find_ref(refs, nrefs, c), n = 0;

	while (i + n < nrefs && refs[i + n].cookie == c)
		n++;
	return n;
}

TEST(every_buffer_gets_one_record)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_TASK_CLOCK, true,
						 FANOUT_PERIOD_NS);
	size_t nall = 0, nuniq = 0, i, j, k, n, shared = 0, checked = 0;
	int extra[NR_BUFFERS], b, dup = 0, missing = 0, no_records = 0, lost = 0;
	char dup_msg[128] = "", missing_msg[128] = "", none_msg[64] = "";
	struct cookie_ref *refs[NR_BUFFERS];
	size_t nrefs[NR_BUFFERS], nmine[NR_BUFFERS];
	__u64 *all, *mine[NR_BUFFERS], last[NR_BUFFERS];
	bool lost_in[NR_BUFFERS];
	pid_t tid = gettid_();
	struct ring r[NR_BUFFERS];
	struct zero_reader z;
	unsigned long loops;
	double wall;
	long it;

	zero_init(_metadata, &z, FANOUT_READ_SECONDS);
	loops = spin_loops(FANOUT_SPIN_SECONDS);
	for (b = 0; b < NR_BUFFERS; b++) {
		open_ring(_metadata, &r[b], &attr, 0, -1, FANOUT_DATA_PAGES);
		extra[b] = perf_open(&attr, 0, -1);
		ASSERT_LE(0, extra[b])
			TH_LOG("perf_event_open, event %d: %s", 2 * b + 1, strerror(errno));
		ASSERT_EQ(0, ioctl(extra[b], PERF_EVENT_IOC_SET_OUTPUT, r[b].fd))
			TH_LOG("PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
	}

	/* All at once, so that every stay is seen by every buffer. */
	ASSERT_EQ(0, prctl(PR_TASK_PERF_EVENTS_ENABLE, 0, 0, 0, 0))
		TH_LOG("PR_TASK_PERF_EVENTS_ENABLE: %s", strerror(errno));
	wall = ring_now() + FANOUT_WALL_SECONDS;
	for (it = 0; it < FANOUT_ITERATIONS && ring_now() < wall; it++) {
		ASSERT_EQ((ssize_t)z.len, readv(z.fd, z.iov, z.iovcnt))
			TH_LOG("readv of /dev/zero: %s", strerror(errno));
		spin_user(loops);
		for (b = 0; b < NR_BUFFERS; b++)
			ring_drain(&r[b]);
	}
	ASSERT_EQ(0, prctl(PR_TASK_PERF_EVENTS_DISABLE, 0, 0, 0, 0))
		TH_LOG("PR_TASK_PERF_EVENTS_DISABLE: %s", strerror(errno));

	for (b = 0; b < NR_BUFFERS; b++) {
		ring_drain(&r[b]);
		EXPECT_EQ(0, r[b].nr_malformed)
			TH_LOG("buffer %d: expected well-formed records, saw %s",
			       b, r[b].why);
		nrefs[b] = sorted_records(&r[b], &refs[b]);
		ASSERT_FALSE(!refs[b]);
		nmine[b] = sample_cookies(&r[b], tid, &mine[b]);
		ASSERT_FALSE(!mine[b]);
		nall += nmine[b];
		last[b] = last_cookie(&r[b], tid);
		lost_in[b] = false;
		for (i = 0; i < r[b].nr_rec; i++)
			lost_in[b] |= r[b].rec[i].type == PERF_RECORD_LOST;
		lost += lost_in[b];
		if (!nrefs[b] && !no_records++)
			snprintf(none_msg, sizeof(none_msg), "buffer %d of %d",
				 b, NR_BUFFERS);
		/* Never two records of one cookie in one buffer. */
		for (i = 0; i < nrefs[b]; i = j) {
			for (j = i + 1; j < nrefs[b] && refs[b][j].cookie == refs[b][i].cookie; j++)
				;
			if (j - i > 1 && !dup++)
				snprintf(dup_msg, sizeof(dup_msg),
					 "buffer %d of %d: cookie %#llx has %zu records",
					 b, NR_BUFFERS,
					 (unsigned long long)refs[b][i].cookie, j - i);
		}
	}

	/* The cookies any buffer's samples carry, each once. */
	all = calloc(nall + 1, sizeof(*all));
	ASSERT_FALSE(!all);
	nall = 0;
	for (b = 0; b < NR_BUFFERS; b++)
		for (i = 0; i < nmine[b]; i++)
			all[nall++] = mine[b][i];
	qsort(all, nall, sizeof(*all), cmp_u64);
	for (i = 0; i < nall; i++)
		if (!nuniq || all[nuniq - 1] != all[i])
			all[nuniq++] = all[i];

	/* Each of them has its record in every buffer, sampled there or not. */
	for (k = 0; k < nuniq; k++) {
		bool stopped = false;
		int sampled_in = 0;

		for (b = 0; b < NR_BUFFERS; b++) {
			stopped |= last[b] == all[k];
			sampled_in += has_u64(mine[b], nmine[b], all[k]);
		}
		checked++;
		shared += sampled_in > 1;
		for (b = 0; b < NR_BUFFERS; b++) {
			n = records_of(refs[b], nrefs[b], all[k]);
			if (n || lost_in[b])
				continue;
			/*
			 * The stay sampling stopped in: the events were
			 * disabled before its walk, and only those that
			 * sampled it get its record.
			 */
			if (stopped && !has_u64(mine[b], nmine[b], all[k]))
				continue;
			if (!missing++)
				snprintf(missing_msg, sizeof(missing_msg),
					 "buffer %d of %d: no record of cookie %#llx, sampled in %d buffers",
					 b, NR_BUFFERS, (unsigned long long)all[k], sampled_in);
		}
	}

	TH_LOG("%d buffers of 2 events: %ld reads of %zu bytes, %d buffers lost records",
	       NR_BUFFERS, it, z.len, lost);
	TH_LOG("%zu cookies, %zu of them sampled by events of several buffers",
	       checked, shared);
	ASSERT_EQ(0, no_records)
		TH_LOG("expected records in every buffer, %d had none (first: %s)",
		       no_records, none_msg);
	ASSERT_LE(1, checked) TH_LOG("expected samples with a cookie, saw none");
	EXPECT_LE(1, shared)
		TH_LOG("expected stays sampled by events of several buffers, saw none");
	EXPECT_EQ(0, dup)
		TH_LOG("want one record per cookie per buffer, %d cookies had more (first: %s)",
		       dup, dup_msg);
	EXPECT_EQ(0, missing)
		TH_LOG("want every stay's record in every buffer, %d missing (first: %s)",
		       missing, missing_msg);

	free(all);
	for (b = 0; b < NR_BUFFERS; b++) {
		free(mine[b]);
		free(refs[b]);
		close(extra[b]);
		close_ring(&r[b]);
	}
	zero_fini(&z);
}

TEST_HARNESS_MAIN
