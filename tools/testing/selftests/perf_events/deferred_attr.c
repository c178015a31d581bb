// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED: which attributes perf_event_open() takes,
 * and where the sample's cookie sits (the last field of PERF_RECORD_SAMPLE).
 * Built 64-bit, and 32-bit as deferred_attr_32, a compat task: the attribute
 * and the records are the same for both.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest_harness.h"

#define DATA_PAGES	16
#define WANT_SAMPLES	10

static int perf_open_self(struct perf_event_attr *attr)
{
	return syscall(__NR_perf_event_open, attr, 0, -1, -1, 0);
}

static struct perf_event_attr task_clock_attr(__u64 sample_type)
{
	struct perf_event_attr attr = {
		.size		= sizeof(attr),
		.type		= PERF_TYPE_SOFTWARE,
		.config		= PERF_COUNT_SW_TASK_CLOCK,
		.sample_period	= 1000000,	/* 1 ms of task time */
		.sample_type	= sample_type,
		.disabled	= 1,
	};
	return attr;
}

TEST(deferred_without_callchain_is_einval)
{
	struct perf_event_attr attr =
		task_clock_attr(PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN_DEFERRED);

	EXPECT_EQ(-1, perf_open_self(&attr));
	EXPECT_EQ(EINVAL, errno);
}

TEST(deferred_with_exclude_callchain_user_is_einval)
{
	struct perf_event_attr attr =
		task_clock_attr(PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_CALLCHAIN_DEFERRED);

	attr.exclude_callchain_user = 1;
	EXPECT_EQ(-1, perf_open_self(&attr));
	EXPECT_EQ(EINVAL, errno);
}

TEST(sample_type_above_max_is_einval)
{
	struct perf_event_attr attr =
		task_clock_attr(PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_CALLCHAIN_DEFERRED |
				PERF_SAMPLE_MAX);

	ASSERT_EQ(PERF_SAMPLE_MAX, PERF_SAMPLE_CALLCHAIN_DEFERRED << 1);
	EXPECT_EQ(-1, perf_open_self(&attr));
	EXPECT_EQ(EINVAL, errno);
}

TEST(deferred_with_exclude_callchain_kernel_opens)
{
	struct perf_event_attr attr =
		task_clock_attr(PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_CALLCHAIN_DEFERRED);
	int fd;

	attr.exclude_callchain_kernel = 1;
	fd = perf_open_self(&attr);
	ASSERT_LE(0, fd) TH_LOG("perf_event_open: %s", strerror(errno));
	close(fd);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Burn some user-mode CPU time; the barrier keeps the loop in. */
static void spin_in_user_mode(void)
{
	for (int i = 0; i < 1000000; i++)
		__asm__ __volatile__("" ::: "memory");
}

/* Copy len bytes at offset off of the data area, which may wrap. */
static void ring_copy(void *dst, const char *data, size_t size, __u64 off, size_t len)
{
	size_t pos = off % size, first = len < size - pos ? len : size - pos;

	memcpy(dst, data + pos, first);
	memcpy((char *)dst + first, data, len - first);
}

struct sample_stats {
	int samples;
	int user_mode;
	int inline_user;
	int deferred;
};

/*
 * Check one PERF_RECORD_SAMPLE of sample_ends_with_cookie: identifier, ip,
 * pid/tid, time, cpu, period, callchain, and then the cookie, last.
 */
static void check_sample(struct __test_metadata *_metadata, const __u64 *rec,
			 __u16 size, __u16 misc, __u64 id, struct sample_stats *stats)
{
	__u64 pos = 1, nr, cookie, i;
	const __u64 *chain;
	bool user = false;

	stats->samples++;
	EXPECT_EQ(id, rec[pos]);
	pos += 6;
	nr = rec[pos++];
	ASSERT_LE((pos + nr + 1) * 8, size)
		TH_LOG("a callchain of %llu entries overruns a %u byte sample",
		       nr, size);
	chain = &rec[pos];
	for (i = 0; i < nr; i++)
		user |= chain[i] == PERF_CONTEXT_USER;
	pos += nr;
	cookie = rec[pos++];
	EXPECT_EQ(pos * 8, size) TH_LOG("the cookie is not the last field");

	/* Cookie 0: the callchain is the plain one, its user part inline. */
	if (!cookie) {
		EXPECT_TRUE(user) TH_LOG("cookie 0 but no user callchain");
		stats->inline_user += user;
	} else {
		EXPECT_FALSE(user)
			TH_LOG("cookie %#llx and the user callchain inline", cookie);
		stats->deferred++;
	}

	/*
	 * A sample taken in user mode has no kernel stay to share a walk
	 * with: cookie 0, and the user part walked in place from its ip.
	 */
	if ((misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER)
		return;
	stats->user_mode++;
	EXPECT_EQ(0, cookie) TH_LOG("cookie %#llx on a sample taken in user mode", cookie);
	EXPECT_TRUE(nr >= 2 && chain[0] == PERF_CONTEXT_USER && chain[1] == rec[2])
		TH_LOG("user mode, ip %#llx: want PERF_CONTEXT_USER and the ip first, %llu entries",
		       rec[2], nr);
}

TEST(sample_ends_with_cookie)
{
	const __u64 sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |
				  PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
				  PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
				  PERF_SAMPLE_CALLCHAIN |
				  PERF_SAMPLE_CALLCHAIN_DEFERRED;
	struct perf_event_attr attr = task_clock_attr(sample_type);
	long page = sysconf(_SC_PAGESIZE);
	size_t data_size = DATA_PAGES * page;
	struct sample_stats stats = { 0 };
	struct perf_event_mmap_page *meta;
	__u64 id, head, off = 0;
	bool enabled = true;
	double deadline;
	char *data;
	int fd;

	fd = perf_open_self(&attr);
	ASSERT_LE(0, fd) TH_LOG("perf_event_open: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ID, &id));
	meta = mmap(NULL, (DATA_PAGES + 1) * page, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, 0);
	ASSERT_TRUE(meta != MAP_FAILED);
	data = (char *)meta + page;

	/*
	 * Spin in user mode, reading the ring as it fills, until enough
	 * samples are in (bounded in time); then read what is left.
	 */
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	deadline = now() + 30;
	for (;;) {
		head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
		while (off < head) {
			struct perf_event_header hdr;
			__u64 rec[1024];

			ring_copy(&hdr, data, data_size, off, sizeof(hdr));
			ASSERT_GE(hdr.size, sizeof(hdr));
			ASSERT_LE(hdr.size, sizeof(rec));
			ring_copy(rec, data, data_size, off, hdr.size);
			off += hdr.size;
			if (hdr.type == PERF_RECORD_SAMPLE)
				check_sample(_metadata, rec, hdr.size, hdr.misc,
					     id, &stats);
		}
		__atomic_store_n(&meta->data_tail, off, __ATOMIC_RELEASE);
		if (!enabled)
			break;
		if (stats.samples >= WANT_SAMPLES || now() > deadline) {
			ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
			enabled = false;
			continue;
		}
		spin_in_user_mode();
	}
	EXPECT_LE(WANT_SAMPLES, stats.samples)
		TH_LOG("only %d samples in 30 s", stats.samples);
	TH_LOG("%d samples: %d with the user callchain inline, %d deferred, %d in user mode",
	       stats.samples, stats.inline_user, stats.deferred, stats.user_mode);

	munmap(meta, (DATA_PAGES + 1) * page);
	close(fd);
}

TEST_HARNESS_MAIN
