// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED from the observer's side: io_uring's io-wq
 * workers never defer, neither for a per-CPU event nor for a per-task
 * event they inherit; the thread that submits their work defers as ever.
 *
 * Build with frame pointers and no sibling calls (see Makefile).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <linux/io_uring.h>
#include <sched.h>
#include <sys/ioctl.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_uring.h"
#include "deferred_observe.h"

#define URING_QUEUE		4	/* async reads in flight per round */
#define MAX_WORKERS		64

/* Queue a readv() of b's iovec, forced to an io-wq worker. */
static void uring_queue_readv(struct uring *u, const struct burner *b, __u64 data)
{
	unsigned int tail = *u->sq_tail, idx = tail & *u->sq_mask;
	struct io_uring_sqe *sqe = &u->sqes[idx];

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_READV;
	sqe->flags = IOSQE_ASYNC;
	sqe->fd = b->zero_fd;
	sqe->addr = (unsigned long)b->iov;
	sqe->len = b->iovcnt;
	sqe->user_data = data;
	u->sq_array[idx] = idx;
	__atomic_store_n(u->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

static long uring_enter(struct uring *u, unsigned int submit, unsigned int wait)
{
	return syscall(__NR_io_uring_enter, u->fd, submit, wait,
		       wait ? IORING_ENTER_GETEVENTS : 0, NULL, 0);
}

/* Reap the completions; returns how many, *bad: how many failed. */
static int uring_reap(struct uring *u, const struct burner *b, int *bad)
{
	unsigned int head = *u->cq_head;
	unsigned int tail = __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE);
	int n = 0;

	for (; head != tail; head++, n++)
		if (u->cqes[head & *u->cq_mask].res != (__s32)b->len)
			(*bad)++;
	__atomic_store_n(u->cq_head, head, __ATOMIC_RELEASE);
	return n;
}

static bool has_tid(const pid_t *tids, int n, __u32 tid)
{
	int i;

	for (i = 0; i < n; i++)
		if ((__u32)tids[i] == tid)
			return true;
	return false;
}

/* Add the tids of this process's io-wq workers (iou-wrk-*) to tids[]. */
static void find_workers(pid_t *tids, int *n, int max)
{
	char path[300], comm[32];
	struct dirent *e;
	DIR *d;
	FILE *f;
	pid_t t;

	d = opendir("/proc/self/task");
	if (!d)
		return;
	while ((e = readdir(d)) && *n < max) {
		t = atoi(e->d_name);
		if (t <= 0 || has_tid(tids, *n, t))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "iou-wrk-", 8))
			tids[(*n)++] = t;
		fclose(f);
	}
	closedir(d);
}

/* Samples of this process by another thread than tid: io-wq workers. */
static int worker_samples(const struct ring *r, __u32 pid, __u32 tid)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		n += r->rec[i].type == PERF_RECORD_SAMPLE && r->rec[i].pid == pid &&
		     r->rec[i].tid != tid;
	return n;
}

TEST(io_uring_workers_are_not_deferred)
{
	static const char * const name[2] = {
		"the per-CPU event", "the inherited per-task event",
	};
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK);
	int cpu, fd, i, nw = 0, bad_cqe = 0, reaped = 0, rounds = 0, err;
	__u32 me = gettid_(), pid = getpid();
	pid_t workers[MAX_WORKERS];
	struct burner b;
	double deadline;
	struct ring r[2];
	struct uring u;
	cpu_set_t set;
	long ret;
	size_t k;

	/* This thread, its workers and the two events: all on one CPU. */
	ASSERT_EQ(1, allowed_cpus(&cpu, 1));
	ASSERT_EQ(0, pin_to(0, cpu));
	burner_init(_metadata, &b);
	fd = perf_open(&attr, -1, cpu);
	if (fd < 0 && (errno == EACCES || errno == EPERM))
		SKIP(return, "a per-CPU event needs privileges (%s)", strerror(errno));
	ASSERT_LE(0, fd) TH_LOG("perf_event_open(cpu %d): %s", cpu, strerror(errno));
	ASSERT_EQ(0, ring_map(&r[0], fd, &attr, DATA_PAGES))
		TH_LOG("mmap: %s", strerror(errno));
	/* Inherited by the workers this thread creates: opened before them. */
	attr.inherit = 1;
	open_ring(_metadata, &r[1], &attr, 0, cpu, DATA_PAGES);

	err = uring_setup(&u, 16);
	if (err && access("/proc/sys/kernel/io_uring_disabled", F_OK))
		SKIP(return, "no io_uring in this kernel (%s)", strerror(-err));
	if (err == -EPERM)
		SKIP(return, "io_uring_setup: %s (kernel.io_uring_disabled)", strerror(-err));
	ASSERT_EQ(0, err) TH_LOG("io_uring setup: %s", strerror(-err));
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	ret = syscall(__NR_io_uring_register, u.fd, IORING_REGISTER_IOWQ_AFF, &set,
		      sizeof(set));
	ASSERT_EQ(0, ret) TH_LOG("IORING_REGISTER_IOWQ_AFF to CPU %d: %s", cpu,
				 strerror(errno));

	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_ENABLE, 0));
	deadline = ring_now() + RUN_SECONDS;
	do {
		for (i = 0; i < URING_QUEUE; i++)
			uring_queue_readv(&u, &b, i);
		ret = uring_enter(&u, URING_QUEUE, 0);
		ASSERT_EQ(URING_QUEUE, ret) TH_LOG("io_uring_enter: %s", strerror(errno));
		burn(&b);		/* this thread's own samples */
		ret = uring_enter(&u, 0, URING_QUEUE);
		ASSERT_LE(0, ret) TH_LOG("io_uring_enter(GETEVENTS): %s", strerror(errno));
		reaped += uring_reap(&u, &b, &bad_cqe);
		find_workers(workers, &nw, MAX_WORKERS);
		ring_drain(&r[0]);
		ring_drain(&r[1]);
		rounds++;
	} while (ring_now() < deadline &&
		 (count_of(&r[0], PERF_RECORD_SAMPLE, me) < WANT_SAMPLES ||
		  worker_samples(&r[0], pid, me) < WANT_SAMPLES));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_DISABLE, 0));
		ring_drain(&r[i]);
	}
	find_workers(workers, &nw, MAX_WORKERS);
	uring_close(&u);

	EXPECT_EQ(0, bad_cqe)
		TH_LOG("%d of %d io_uring reads of %zu bytes of /dev/zero failed",
		       bad_cqe, reaped, b.len);
	EXPECT_LE(1, nw)
		TH_LOG("expected io-wq workers (iou-wrk-*) for IOSQE_ASYNC reads, found none");

	for (i = 0; i < 2; i++) {
		__u64 excuse = last_cookie(&r[i], me);
		struct join j = join_tid(&r[i], me, &excuse, 1, true);
		int samples = 0, cookies = 0, records = 0;
		char msg[128] = "";

		for (k = 0; k < r[i].nr_rec; k++) {
			const struct ring_record *rr = &r[i].rec[k];
			bool worker = (rr->pid == pid && rr->tid != me) ||
				      has_tid(workers, nw, rr->tid);

			if (!worker)
				continue;
			if (rr->type == PERF_RECORD_SAMPLE) {
				samples++;
				if (rr->cookie && !cookies++)
					snprintf(msg, sizeof(msg), "tid %u, cookie %#llx",
						 rr->tid, (unsigned long long)rr->cookie);
			} else if (rr->type == PERF_RECORD_CALLCHAIN_DEFERRED) {
				if (!records++)
					snprintf(msg, sizeof(msg), "record of tid %u, cookie %#llx",
						 rr->tid, (unsigned long long)rr->cookie);
			}
		}
		EXPECT_EQ(0, r[i].nr_malformed)
			TH_LOG("%s: malformed: %s", name[i], r[i].why);
		ASSERT_LE(MIN_SAMPLES, j.samples)
			TH_LOG("%s: expected samples of the submitting thread %u, saw %d",
			       name[i], me, j.samples);
		/* Its spins in user mode are walked in place: not counted. */
		EXPECT_LE(j.kernel / 2, j.deferred)
			TH_LOG("%s: want the submitter's kernel samples deferred, %d of %d were",
			       name[i], j.deferred, j.kernel);
		expect_joined(_metadata, name[i], me, &j);
		EXPECT_EQ(0, cookies)
			TH_LOG("%s: want cookie 0 on worker samples, %d of %d had one (first: %s)",
			       name[i], cookies, samples, msg);
		EXPECT_EQ(0, records)
			TH_LOG("%s: want no record of an io-wq worker, saw %d (first: %s)",
			       name[i], records, msg);
		if (!samples)
			TH_LOG("%s: the %d workers got no samples: their records alone checked",
			       name[i], nw);
		TH_LOG("%s: %d rounds, %d workers, %d worker samples; %d samples, %d joined",
		       name[i], rounds, nw, samples, j.samples, j.joined);
	}

	for (i = 0; i < 2; i++)
		close_ring(&r[i]);
	burner_fini(&b);
}

TEST_HARNESS_MAIN
