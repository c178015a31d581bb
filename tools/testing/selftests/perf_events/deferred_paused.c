// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED from the observer's side: a
 * PERF_RECORD_CALLCHAIN_DEFERRED record that comes while the buffer's
 * output is paused is not in the buffer, and is counted lost like any
 * other record.
 *
 * Build with frame pointers and no sibling calls (see Makefile).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_observe.h"

#define PHASE_SECONDS		0.3	/* each phase of the paused buffer */

static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Every time tid was switched out, voluntarily or not. */
static long all_switches(pid_t tid)
{
	return voluntary_switches(tid) +
	       task_status(tid, "nonvoluntary_ctxt_switches");
}

/* Burn for "seconds", draining r (if any) after each round. */
static void burn_for(const struct burner *b, struct ring *r, double seconds)
{
	double end = ring_now() + seconds;

	do {
		burn(b);
		if (r)
			ring_drain(r);
	} while (ring_now() < end);
}

/* paused_buffer_counts_the_record_lost: a thread that blocks when told. */
struct blocker {
	int sock;
	int cpu;
	pid_t tid;
	int err;
	int step;		/* 1, 2: block in recv() now; 3: return */
	int done;		/* recv() calls that returned */
};

static void *blocker_main(void *arg)
{
	struct blocker *b = arg;
	char x;
	int k;

	b->err = pin_to(0, b->cpu);
	__atomic_store_n(&b->tid, b->err ? -1 : gettid_(), __ATOMIC_RELEASE);
	if (b->err)
		return NULL;
	for (k = 1; k <= 3; k++) {
		while (__atomic_load_n(&b->step, __ATOMIC_ACQUIRE) < k)
			asm volatile("pause" ::: "memory");
		if (k == 3 || recv(b->sock, &x, 1, 0) != 1)
			break;
		__atomic_store_n(&b->done, k, __ATOMIC_RELEASE);
	}
	return NULL;
}

static bool wait_done(const struct blocker *b, int done)
{
	double deadline = ring_now() + 5;

	while (__atomic_load_n(&b->done, __ATOMIC_ACQUIRE) < done) {
		if (ring_now() > deadline)
			return false;
		usleep(1000);
	}
	return true;
}

/*
 * Wait until tid blocks voluntarily (more than "seen" times) and its
 * buffer settles; return the index of its last sample after record
 * "from", -1 if there is none.
 */
static long blocked_sample(struct ring *r, pid_t tid, long seen, size_t from)
{
	double deadline = ring_now() + 5;
	size_t i, n;

	if (!wait_blocked(tid, seen))
		return -1;
	do {
		n = r->nr_rec;
		usleep(20000);
		ring_drain(r);
	} while (r->nr_rec != n && ring_now() < deadline);
	for (i = r->nr_rec; i-- > from;)
		if (r->rec[i].type == PERF_RECORD_SAMPLE && r->rec[i].tid == (__u32)tid)
			return i;
	return -1;
}

/*
 * A context-switch event samples the thread as it blocks in recv(); the
 * buffer is paused, the thread woken: its record comes while paused and is
 * the one thing lost (unless the thread is switched out meanwhile).
 */
static void pause_one_record(struct __test_metadata *_metadata)
{
	struct perf_event_attr attr =
		sw_sample_attr(PERF_COUNT_SW_CONTEXT_SWITCHES, 1, true);
	__u64 id, c1, c2, t0, t1, lost_paused, lost_total, lost_sum = 0;
	long i1, i2, v, sw_p, sw_b;
	int cpus[2], n, sv[2], nr_lost = 0, in_pause = 0, nrec;
	struct blocker b = { 0 };
	size_t i, lost_at = 0, rec = 0;
	pthread_t th;
	struct ring r;

	attr.read_format = PERF_FORMAT_LOST;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	n = allowed_cpus(cpus, 2);
	ASSERT_LE(1, n);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	b.sock = sv[0];
	b.cpu = cpus[0];
	if (n > 1)
		ASSERT_EQ(0, pin_to(0, cpus[1]));
	ASSERT_EQ(0, pthread_create(&th, NULL, blocker_main, &b));
	while (!__atomic_load_n(&b.tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	ASSERT_LT(0, b.tid) TH_LOG("pinning to CPU %d: %s", b.cpu, strerror(-b.err));

	open_ring(_metadata, &r, &attr, b.tid, -1, DATA_PAGES);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ID, &id));
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));

	/* The thread blocks: the sample of its switch is in the buffer. */
	v = voluntary_switches(b.tid);
	__atomic_store_n(&b.step, 1, __ATOMIC_RELEASE);
	i1 = blocked_sample(&r, b.tid, v, 0);
	ASSERT_LE(0, i1) TH_LOG("expected a sample of the thread blocking in recv()");
	c1 = r.rec[i1].cookie;
	ASSERT_NE(0, c1) TH_LOG("expected a cookie on the sample of the blocking thread");

	/* Paused, the thread wakes up: its record comes now. */
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1));
	t0 = mono_ns();
	sw_p = all_switches(b.tid);
	ASSERT_EQ(1, write(sv[1], "x", 1));
	ASSERT_TRUE(wait_done(&b, 1)) TH_LOG("the thread did not return from recv()");
	lost_paused = lost_count(r.fd);
	sw_b = all_switches(b.tid);
	t1 = mono_ns();
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0));

	/* Resumed: once more, recorded this time. */
	ring_drain(&r);
	v = voluntary_switches(b.tid);
	__atomic_store_n(&b.step, 2, __ATOMIC_RELEASE);
	i2 = blocked_sample(&r, b.tid, v, r.nr_rec);
	ASSERT_LE(0, i2) TH_LOG("expected a sample of the second block, after the pause");
	c2 = r.rec[i2].cookie;
	ASSERT_EQ(1, write(sv[1], "y", 1));
	ASSERT_TRUE(wait_done(&b, 2)) TH_LOG("the thread did not return from recv()");
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	__atomic_store_n(&b.step, 3, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_join(th, NULL));
	ring_drain(&r);
	lost_total = lost_count(r.fd);

	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);
	nrec = records_of_cookie(&r, c1, &rec);
	EXPECT_EQ(0, nrec)
		TH_LOG("want cookie %#llx's record, written while paused, lost; saw it at %zu",
		       (unsigned long long)c1, rec);
	if (sw_b == sw_p) {
		EXPECT_EQ(1, lost_paused)
			TH_LOG("expected the one lost record counted, read() says %llu lost",
			       (unsigned long long)lost_paused);
	} else {
		/* Each switch of the thread while paused lost a sample, too. */
		EXPECT_LE(1, lost_paused)
			TH_LOG("expected the lost record counted, read() says none");
		EXPECT_GE((__u64)(1 + sw_b - sw_p), lost_paused)
			TH_LOG("%llu lost while paused, for 1 record and %ld switches",
			       (unsigned long long)lost_paused, sw_b - sw_p);
	}

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type == PERF_RECORD_LOST) {
			nr_lost++;
			lost_sum += rr->lost;
			lost_at = i;
			EXPECT_EQ(id, rr->id)
				TH_LOG("PERF_RECORD_LOST of id %llu, expected %llu",
				       (unsigned long long)rr->id, (unsigned long long)id);
		} else if (rr->time >= t0 && rr->time <= t1) {
			in_pause++;
		}
	}
	EXPECT_EQ(1, nr_lost)
		TH_LOG("expected one PERF_RECORD_LOST after the pause, saw %d", nr_lost);
	/*
	 * Records lost after the pause (a reader too slow on a loaded
	 * machine) are told by the next record written, which may never
	 * come once the event is disabled: read() can count more.
	 */
	EXPECT_LE(lost_sum, lost_total)
		TH_LOG("PERF_RECORD_LOST counts %llu lost, read() only %llu",
		       (unsigned long long)lost_sum, (unsigned long long)lost_total);
	EXPECT_LE(lost_paused, lost_sum)
		TH_LOG("PERF_RECORD_LOST counts %llu lost, %llu were lost while paused",
		       (unsigned long long)lost_sum, (unsigned long long)lost_paused);
	EXPECT_TRUE(nr_lost && lost_at > (size_t)i1 && lost_at < (size_t)i2)
		TH_LOG("want PERF_RECORD_LOST between samples %ld and %ld, at %zu",
		       i1, i2, lost_at);
	EXPECT_EQ(0, in_pause)
		TH_LOG("want nothing written while paused, saw %d records", in_pause);

	EXPECT_NE(0, c2) TH_LOG("expected a cookie on the sample of the second block");
	EXPECT_NE(c1, c2) TH_LOG("two blocks, one cookie %#llx", (unsigned long long)c1);
	nrec = records_of_cookie(&r, c2, &rec);
	EXPECT_EQ(1, nrec)
		TH_LOG("expected the record of cookie %#llx after resuming, saw %d",
		       (unsigned long long)c2, nrec);
	if (nrec == 1) {
		EXPECT_EQ((__u32)b.tid, r.rec[rec].tid);
		EXPECT_LT((size_t)i2, rec)
			TH_LOG("want the record after its sample %ld, at %zu", i2, rec);
	}
	TH_LOG("one blocked stay: %llu lost while paused, %ld switches meanwhile",
	       (unsigned long long)lost_paused, sw_b - sw_p);

	close_ring(&r);
	close(sv[0]);
	close(sv[1]);
}

/* The thread pauses its own buffer for a while, sampled all along. */
static void pause_while_sampled(struct __test_metadata *_metadata)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK);
	__u64 id, t0, t1, lost_paused, lost_total, lost_sum = 0, excuse[2] = { 0, 0 };
	int nr_lost = 0, in_pause = 0, joined_after = 0;
	size_t i, first_after = SIZE_MAX, rec;
	__u32 tid = gettid_();
	struct burner b;
	struct join j;
	struct ring r;

	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	burner_init(_metadata, &b);
	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ID, &id));
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));

	burn_for(&b, &r, PHASE_SECONDS);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1));
	t0 = mono_ns();
	burn_for(&b, NULL, PHASE_SECONDS);
	t1 = mono_ns();
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0));
	lost_paused = lost_count(r.fd);
	burn_for(&b, &r, PHASE_SECONDS);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	lost_total = lost_count(r.fd);

	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);
	EXPECT_LT(0, lost_paused)
		TH_LOG("expected the samples taken while paused counted lost, read() says none");
	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type == PERF_RECORD_LOST) {
			nr_lost++;
			lost_sum += rr->lost;
			EXPECT_EQ(id, rr->id);
		} else if (rr->time >= t0 && rr->time <= t1) {
			in_pause++;
		}
		if (rr->time >= t0 && first_after == SIZE_MAX)
			first_after = i;
		/* The stay that ended while paused: its record is lost. */
		if (rr->type == PERF_RECORD_SAMPLE && rr->tid == tid && rr->time < t0)
			excuse[0] = rr->cookie;
	}
	excuse[1] = last_cookie(&r, tid);
	EXPECT_EQ(0, in_pause)
		TH_LOG("want nothing written while paused, saw %d records", in_pause);
	/*
	 * One for the pause; more when the reader fell behind after it, on
	 * a loaded machine (the buffer is full of what the pause left): the
	 * records those report are excused below, and only then.
	 */
	EXPECT_LE(1, nr_lost)
		TH_LOG("expected a PERF_RECORD_LOST after the pause, saw %d", nr_lost);
	if (nr_lost > 1)
		TH_LOG("%d PERF_RECORD_LOST: the reader fell behind after the pause",
		       nr_lost);
	ASSERT_NE(SIZE_MAX, first_after) TH_LOG("expected records after the pause");
	EXPECT_EQ(PERF_RECORD_LOST, r.rec[first_after].type)
		TH_LOG("want the first record after the pause to be PERF_RECORD_LOST, saw type %u",
		       r.rec[first_after].type);
	/*
	 * Records lost after the pause (a reader too slow on a loaded
	 * machine) are told by the next record written, which may never
	 * come once the event is disabled: read() can count more.
	 */
	EXPECT_LE(lost_sum, lost_total)
		TH_LOG("PERF_RECORD_LOST counts %llu lost, read() only %llu",
		       (unsigned long long)lost_sum, (unsigned long long)lost_total);
	EXPECT_LE(lost_paused, lost_sum)
		TH_LOG("PERF_RECORD_LOST counts %llu lost, %llu were lost while paused",
		       (unsigned long long)lost_sum, (unsigned long long)lost_paused);

	j = join_tid(&r, tid, excuse, 2, nr_lost > 1);
	ASSERT_LE(MIN_SAMPLES, j.samples) TH_LOG("expected samples, saw %d", j.samples);
	expect_joined(_metadata, "the paused buffer", tid, &j);
	for (i = first_after; i < r.nr_rec; i++)
		joined_after += r.rec[i].type == PERF_RECORD_SAMPLE &&
				r.rec[i].cookie && r.rec[i].tid == tid &&
				records_of_cookie(&r, r.rec[i].cookie, &rec) == 1;
	EXPECT_LE(1, joined_after)
		TH_LOG("expected samples after the pause joined with their records, saw none");
	TH_LOG("sampled syscalls: %llu lost while paused, %d samples, %d joined (%d after)",
	       (unsigned long long)lost_paused, j.samples, j.joined, joined_after);

	close_ring(&r);
	burner_fini(&b);
}

TEST(paused_buffer_counts_the_record_lost)
{
	pause_one_record(_metadata);
	pause_while_sampled(_metadata);
}

TEST_HARNESS_MAIN
