// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED from the observer's side, for an event
 * that observes only part of a stay in the kernel:
 *
 * - An event disabled before the walk still gets the record of the
 *   samples it took in the stay.
 * - An event enabled after the walk of a stay that goes on (io_uring runs
 *   task work before its system call returns) walks that stay in place.
 *
 * Build with frame pointers and no sibling calls (see Makefile).
 */
#define _GNU_SOURCE
#include <linux/io_uring.h>
#include <pthread.h>
#include <sys/ioctl.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_uring.h"
#include "deferred_observe.h"

/*
 * An event that took samples in a stay and stopped observing the task
 * before the walk still gets the stay's record: it was allowed to see that
 * stack. PERF_EVENT_IOC_REFRESH lets the event take REFRESH_SAMPLES samples
 * and disables it, in the middle of a long readv(); the record of that
 * stay comes to its buffer all the same. (A disabled event got nothing,
 * and the samples stayed without record.)
 */
#define REFRESH_SAMPLES		3
#define REFRESH_ROUNDS		20

TEST(disabled_event_still_gets_the_record_of_its_samples)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_TASK_CLOCK);
	__u32 tid = gettid_();
	int round, deferred = 0, unresolved = 0;
	__u64 first_cookie = 0;
	struct burner b;
	struct ring r;
	size_t i, at;

	burner_init(_metadata, &b);
	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	for (round = 0; round < REFRESH_ROUNDS; round++) {
		ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_REFRESH, REFRESH_SAMPLES))
			TH_LOG("PERF_EVENT_IOC_REFRESH: %s", strerror(errno));
		ASSERT_TRUE(burn(&b));
		ring_drain(&r);
	}
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	ASSERT_EQ(0, r.nr_malformed) TH_LOG("malformed records: %s", r.why);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type != PERF_RECORD_SAMPLE || rr->tid != tid || !rr->cookie)
			continue;
		deferred++;
		if (records_of_cookie(&r, rr->cookie, &at) != 1 && !unresolved++)
			first_cookie = rr->cookie;
	}
	TH_LOG("%d rounds of %d samples: %d deferred samples, %d without their record",
	       REFRESH_ROUNDS, REFRESH_SAMPLES, deferred, unresolved);
	ASSERT_LE(REFRESH_ROUNDS, deferred)
		TH_LOG("expected a deferred sample in each round's readv(), saw %d", deferred);
	EXPECT_EQ(0, unresolved)
		TH_LOG("%d samples of the disabled event not joined (first: cookie %#llx)",
		       unresolved, (unsigned long long)first_cookie);

	close_ring(&r);
	burner_fini(&b);
}

/*
 * event_enabled_after_the_walk_walks_in_place: a thread waits in one
 * io_uring_enter() for three pipe reads. io_uring runs the task's task work
 * in its wait loop, the deferred walk included, before the system call
 * returns: the stay goes on after its walk. An event enabled then samples
 * the thread the next time it blocks; its buffer never gets that stay's
 * record, so the sample must carry its user stack itself.
 */
struct uring_waiter {
	struct uring u;
	int pipes[3][2];
	char buf[3];
	pid_t tid;
	int go;
	long ret;
	unsigned long site;	/* the user ip after the syscall instruction */
};

static __attribute__((noipa)) long uring_wait_three(struct uring_waiter *w)
{
	return raw_syscall(w->site, __NR_io_uring_enter, w->u.fd, 3, 3,
			   IORING_ENTER_GETEVENTS, 0, 0);
}

static void *uring_waiter_main(void *arg)
{
	struct uring_waiter *w = arg;

	__atomic_store_n(&w->tid, gettid_(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&w->go, __ATOMIC_ACQUIRE))
		asm volatile("pause" ::: "memory");
	w->ret = uring_wait_three(w);
	return NULL;
}

static void uring_queue_read(struct uring *u, int fd, char *buf, __u64 data)
{
	unsigned int tail = *u->sq_tail, idx = tail & *u->sq_mask;
	struct io_uring_sqe *sqe = &u->sqes[idx];

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_READ;
	sqe->fd = fd;
	sqe->addr = (unsigned long)buf;
	sqe->len = 1;
	sqe->user_data = data;
	u->sq_array[idx] = idx;
	__atomic_store_n(u->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* Wait until tid has blocked more than seen times, in io_uring_enter(). */
static bool blocked_in_uring(pid_t tid, long seen)
{
	double deadline = ring_now() + 5;
	char path[64], line[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	for (;;) {
		if (voluntary_switches(tid) > seen) {
			f = fopen(path, "r");
			if (f) {
				if (!fgets(line, sizeof(line), f))
					line[0] = 0;
				fclose(f);
			}
			if (atoi(line) == __NR_io_uring_enter)
				return true;
		}
		if (ring_now() > deadline)
			return false;
		usleep(1000);
	}
}

/* The index of tid's record whose walk starts at ip, -1 if none. */
static long record_at(const struct ring *r, pid_t tid, __u64 ip)
{
	size_t i;

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *rr = &r->rec[i];

		if (rr->type == PERF_RECORD_CALLCHAIN_DEFERRED &&
		    rr->tid == (__u32)tid && rr->nr && rr->ips[0] == ip)
			return i;
	}
	return -1;
}

/* Whether the user part of sample s starts at ip. */
static bool user_part_at(const struct ring_record *s, __u64 ip)
{
	__u64 i;

	for (i = 0; i + 1 < s->nr; i++)
		if (s->ips[i] == PERF_CONTEXT_USER)
			return s->ips[i + 1] == ip;
	return false;
}

TEST(event_enabled_after_the_walk_walks_in_place)
{
	struct perf_event_attr attr =
		sw_sample_attr(PERF_COUNT_SW_CONTEXT_SWITCHES, 1, true);
	int i, err, before = 0, in_place = 0, joined = 0, missing = 0;
	struct uring_waiter w = { 0 };
	struct ring early, late;
	__u64 cookie, missed = 0;
	double deadline;
	long v0, at;
	pthread_t th;
	size_t k, first;
	char x = 'x';

	err = uring_setup(&w.u, 4);
	if (err && access("/proc/sys/kernel/io_uring_disabled", F_OK))
		SKIP(return, "no io_uring in this kernel (%s)", strerror(-err));
	if (err == -EPERM)
		SKIP(return, "io_uring_setup: %s (kernel.io_uring_disabled)", strerror(-err));
	ASSERT_EQ(0, err) TH_LOG("io_uring setup: %s", strerror(-err));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, pipe(w.pipes[i]));
		uring_queue_read(&w.u, w.pipes[i][0], &w.buf[i], i);
	}
	ASSERT_EQ(0, pthread_create(&th, NULL, uring_waiter_main, &w));
	while (!__atomic_load_n(&w.tid, __ATOMIC_ACQUIRE))
		usleep(1000);

	/* early samples the thread from the start, late only after the walk. */
	open_ring(_metadata, &early, &attr, w.tid, -1, DATA_PAGES);
	open_ring(_metadata, &late, &attr, w.tid, -1, DATA_PAGES);
	ASSERT_EQ(0, ioctl(early.fd, PERF_EVENT_IOC_ENABLE, 0));
	v0 = voluntary_switches(w.tid);
	__atomic_store_n(&w.go, 1, __ATOMIC_RELEASE);

	/* Asleep; then the first read completes and the walk runs. */
	ASSERT_TRUE(blocked_in_uring(w.tid, v0))
		TH_LOG("the thread did not block in io_uring_enter()");
	ASSERT_EQ(1, write(w.pipes[0][1], &x, 1));
	deadline = ring_now() + 5;
	do {
		usleep(1000);
		ring_drain(&early);
		at = record_at(&early, w.tid, w.site);
	} while (at < 0 && ring_now() < deadline);
	ASSERT_LE(0, at) TH_LOG("no record of the walk inside io_uring_enter() at %#lx",
				w.site);
	cookie = early.rec[at].cookie;

	/* Asleep again in the same stay: late sees it block from now on. */
	ASSERT_TRUE(blocked_in_uring(w.tid, v0 + 1));
	ASSERT_EQ(0, ioctl(late.fd, PERF_EVENT_IOC_ENABLE, 0));
	v0 = voluntary_switches(w.tid);
	ASSERT_EQ(1, write(w.pipes[1][1], &x, 1));
	ASSERT_TRUE(blocked_in_uring(w.tid, v0));
	ASSERT_EQ(1, write(w.pipes[2][1], &x, 1));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ(3, w.ret) TH_LOG("io_uring_enter: %s", strerror(-w.ret));

	ASSERT_EQ(0, ioctl(early.fd, PERF_EVENT_IOC_DISABLE, 0));
	ASSERT_EQ(0, ioctl(late.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&early);
	ring_drain(&late);
	EXPECT_EQ(0, early.nr_malformed) TH_LOG("early: malformed: %s", early.why);
	EXPECT_EQ(0, late.nr_malformed) TH_LOG("late: malformed: %s", late.why);

	/* early: the samples after the walk join it backward. */
	for (k = 0; k < early.nr_rec; k++)
		before += early.rec[k].type == PERF_RECORD_SAMPLE &&
			  early.rec[k].cookie == cookie;
	EXPECT_LE(2, before)
		TH_LOG("early: want samples before and after the walk, cookie %#llx, saw %d",
		       (unsigned long long)cookie, before);

	/* late: never a cookie its buffer has no record of. */
	for (k = 0; k < late.nr_rec; k++) {
		const struct ring_record *s = &late.rec[k];

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)w.tid)
			continue;
		if (!s->cookie)
			in_place += taken_in_kernel_mode(s) && user_part_at(s, w.site);
		else if (records_of_cookie(&late, s->cookie, &first))
			joined++;
		else if (!missing++)
			missed = s->cookie;
	}
	EXPECT_EQ(0, missing)
		TH_LOG("late: %d samples with a cookie and no record, the first %#llx%s",
		       missing, (unsigned long long)missed,
		       missed == cookie ? ", the stay walked before late was enabled" : "");
	EXPECT_LE(1, in_place)
		TH_LOG("late: want a sample in io_uring_enter(), user stack in place from %#lx",
		       w.site);
	TH_LOG("early: %d samples of the walked stay; late: %d in place, %d joined",
	       before, in_place, joined);

	close_ring(&early);
	close_ring(&late);
	for (i = 0; i < 3; i++) {
		close(w.pipes[i][0]);
		close(w.pipes[i][1]);
	}
	uring_close(&w.u);
}

TEST_HARNESS_MAIN
