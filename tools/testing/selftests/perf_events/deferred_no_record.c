// SPDX-License-Identifier: GPL-2.0
/*
 * Events that must get no record of a task: those that cannot observe it
 * (a per-CPU event on another CPU, an event on another task), and an event
 * closed while the walk its samples asked for is pending.
 *
 * Built 64-bit, and 32-bit as deferred_no_record_32, a compat task (see
 * deferred_chain.h).
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_chain.h"

/* Records of the given type that tid wrote into r. */
static int count_of(const struct ring *r, __u32 type, pid_t tid)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		n += r->rec[i].type == type && r->rec[i].tid == (__u32)tid;
	return n;
}

/* The state letter of a process (R, S, D, ...), 0 when unknown. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * Fork a child that does nothing: it blocks in read() of a pipe until
 * *go is closed, and this returns once it is blocked there.
 */
static pid_t idle_child(struct __test_metadata *_metadata, int *go)
{
	int pipe_go[2], ready[2];
	double deadline;
	pid_t child;
	char x;

	ASSERT_EQ(0, pipe(pipe_go));
	ASSERT_EQ(0, pipe(ready));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		close(pipe_go[1]);
		close(ready[0]);
		if (write(ready[1], "r", 1) != 1)
			_exit(126);
		_exit(read(pipe_go[0], &x, 1) ? 125 : 0);
	}
	close(pipe_go[0]);
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &x, 1));
	close(ready[0]);
	deadline = ring_now() + 5;
	while (proc_state(child) != 'S') {
		ASSERT_TRUE(ring_now() < deadline)
			TH_LOG("child %d never blocked on its pipe", child);
		usleep(1000);
	}
	*go = pipe_go[1];
	return child;
}

/* A thread of this process that runs its own chain, pinned to a CPU. */
struct buddy {
	struct chain c;
	int cpu;
	pid_t tid;
	int err;
	size_t stop;		/* c.shared_samples: 1 ends the chain */
};

static void *buddy_main(void *arg)
{
	struct buddy *b = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(b->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		b->err = errno;
		__atomic_store_n(&b->tid, -1, __ATOMIC_RELEASE);
		return NULL;
	}
	__atomic_store_n(&b->tid, gettid_(), __ATOMIC_RELEASE);
	chain_run(&b->c);
	return NULL;
}

/*
 * While this thread runs the chain pinned to CPU A, and a buddy thread runs
 * one pinned to CPU B, events that cannot observe this thread get none of
 * its user stacks: a per-CPU event on CPU B, and a per-task event on an
 * idle child. A per-CPU event on CPU A is the control.
 */
TEST(events_that_cannot_observe_get_nothing)
{
	static const char * const what[3] = {
		"the per-CPU event on this CPU", "the per-CPU event on the other CPU",
		"the idle child's event",
	};
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	int cpus[2], n = 0, i, fd, go, status;
	int mine[3][2], buddy[3][2];
	pid_t tid = gettid_(), child;
	struct cookie_stats st;
	struct buddy *b;
	struct ring r[3];
	struct chain c;
	cpu_set_t set;
	pthread_t th;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "needs 2 online CPUs, has %ld",
		     sysconf(_SC_NPROCESSORS_ONLN));
	ASSERT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
	for (i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	if (n < 2)
		SKIP(return, "needs 2 CPUs to run on, may use %d", n);
	CPU_ZERO(&set);
	CPU_SET(cpus[0], &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));

	for (i = 0; i < 2; i++) {
		fd = perf_open(&attr, -1, cpus[i]);
		if (fd < 0 && (errno == EACCES || errno == EPERM))
			SKIP(return, "a per-CPU event needs privileges (%s)",
			     strerror(errno));
		ASSERT_LE(0, fd)
			TH_LOG("perf_event_open(cpu %d): %s", cpus[i], strerror(errno));
		ASSERT_EQ(0, ring_map(&r[i], fd, &attr, DATA_PAGES))
			TH_LOG("mmap: %s", strerror(errno));
	}
	child = idle_child(_metadata, &go);
	open_ring(_metadata, &r[2], &attr, child, -1, DATA_PAGES);

	/* Both chains count the samples of r[0] and r[1]: half are ours. */
	chain_init(_metadata, &c, 2 * WANT_SAMPLES);
	b = calloc(1, sizeof(*b));
	ASSERT_FALSE(!b);
	chain_init(_metadata, &b->c, 1);
	b->c.shared_samples = &b->stop;
	b->c.deadline = ring_now() + 4 * RUN_SECONDS;
	b->cpu = cpus[1];
	ASSERT_EQ(0, pthread_create(&th, NULL, buddy_main, b));
	while (!__atomic_load_n(&b->tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	ASSERT_LT(0, b->tid)
		TH_LOG("pinning the buddy to CPU %d: %s", b->cpu, strerror(b->err));

	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_ENABLE, 0));
	c.rings[0] = &r[0];
	c.rings[1] = &r[1];
	c.nr_rings = 2;
	c.deadline = ring_now() + RUN_SECONDS;
	chain_run(&c);
	__atomic_store_n(&b->stop, 1, __ATOMIC_RELAXED);
	ASSERT_EQ(0, pthread_join(th, NULL));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_DISABLE, 0));
		ring_drain(&r[i]);
		EXPECT_EQ(0, r[i].nr_malformed)
			TH_LOG("%s: malformed: %s", what[i], r[i].why);
		mine[i][0] = count_of(&r[i], PERF_RECORD_SAMPLE, tid);
		mine[i][1] = count_of(&r[i], PERF_RECORD_CALLCHAIN_DEFERRED, tid);
		buddy[i][0] = count_of(&r[i], PERF_RECORD_SAMPLE, b->tid);
		buddy[i][1] = count_of(&r[i], PERF_RECORD_CALLCHAIN_DEFERRED,
				       b->tid);
	}
	close(go);
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("idle child status %#x", status);

	/* The control: CPU A's event sees this thread's stacks, not B's. */
	st = check_cookies(_metadata, &r[0], tid, ALL_DEFERRED | RECORD_AFTER);
	ASSERT_LE(10, st.samples)
		TH_LOG("expected at least 10 samples of this thread on CPU %d, saw %d",
		       cpus[0], st.samples);
	check_chain_records(_metadata, &r[0], tid, &c, CHAIN_DEPTH);
	EXPECT_EQ(0, buddy[0][0] + buddy[0][1])
		TH_LOG("%s: want nothing of the buddy on CPU %d, saw %d samples, %d records",
		       what[0], cpus[1], buddy[0][0], buddy[0][1]);

	/* CPU B's event is live: it has the buddy's stacks, and none of ours. */
	check_cookies(_metadata, &r[1], b->tid, RECORD_AFTER);
	EXPECT_LE(1, buddy[1][1])
		TH_LOG("%s: expected records of the buddy running there, saw none (%d samples)",
		       what[1], buddy[1][0]);
	EXPECT_EQ(0, mine[1][0])
		TH_LOG("%s: expected no samples of this thread pinned to CPU %d, saw %d",
		       what[1], cpus[0], mine[1][0]);
	EXPECT_EQ(0, mine[1][1])
		TH_LOG("%s: want no records of this thread on CPU %d, saw %d",
		       what[1], cpus[0], mine[1][1]);

	/* The idle child never ran while its event was enabled. */
	EXPECT_EQ(0, mine[2][1] + buddy[2][1])
		TH_LOG("%s: want no records of other tasks, saw %d of this thread, %d of the buddy",
		       what[2], mine[2][1], buddy[2][1]);
	EXPECT_EQ(0, r[2].nr_rec)
		TH_LOG("%s: want an empty buffer, saw %zu records, the first of type %u, tid %u",
		       what[2], r[2].nr_rec, r[2].nr_rec ? r[2].rec[0].type : 0,
		       r[2].nr_rec ? r[2].rec[0].tid : 0);
	TH_LOG("CPU %d: %d samples of this thread; CPU %d: %d samples, %d records of the buddy",
	       cpus[0], mine[0][0], cpus[1], buddy[1][0], buddy[1][1]);

	for (i = 0; i < 3; i++)
		close_ring(&r[i]);
	chain_fini(&b->c);
	free(b);
	chain_fini(&c);
}

#define LONG_READ_NS	200000000	/* one read() of the reader: ~200 ms */
#define READ_CHUNK	(4 << 20)
#define MAX_CHUNKS	256		/* 1 GiB per read() at most */
#define READER_WAIT	(2 * RUN_SECONDS) /* a few of its calls, at most */

/* A thread that reads /dev/zero in long readv() calls until stopped. */
struct reader {
	int zero_fd;
	char *buf;
	struct iovec iov[MAX_CHUNKS];
	int iovcnt;		/* chunks per readv(), raised by the test */
	pid_t tid;
	long calls;		/* completed readv() calls */
	long bad;		/* what a short readv() returned */
	int stop;
};

static void *reader_main(void *arg)
{
	struct reader *a = arg;

	__atomic_store_n(&a->tid, gettid_(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
		int n = __atomic_load_n(&a->iovcnt, __ATOMIC_RELAXED);
		ssize_t ret = readv(a->zero_fd, a->iov, n);

		if (ret != (ssize_t)n * READ_CHUNK)
			__atomic_store_n(&a->bad, ret, __ATOMIC_RELAXED);
		__atomic_add_fetch(&a->calls, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/*
 * Wait for a kernel-mode sample of the reader, with a cookie, taken in the
 * readv() it is in now: the walk of that cookie is pending until the call
 * returns. Returns the cookie, 0 on timeout, and in *calls the reader's
 * count of completed calls, unchanged since before the sample was taken.
 */
static __u64 wait_pending_walk(struct ring *r, struct reader *a, long *calls)
{
	double deadline = ring_now() + READER_WAIT;
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	size_t i, mark;
	long n;

	/* Samples of calls up to n are in the ring before calls reads n. */
	n = __atomic_load_n(&a->calls, __ATOMIC_ACQUIRE);
	ring_drain(r);
	mark = r->nr_rec;
	while (ring_now() < deadline) {
		poll(&pfd, 1, 100);
		ring_drain(r);
		if (__atomic_load_n(&a->calls, __ATOMIC_ACQUIRE) != n) {
			/* That call ended: wait for one in the next call. */
			n = __atomic_load_n(&a->calls, __ATOMIC_ACQUIRE);
			ring_drain(r);
			mark = r->nr_rec;
			continue;
		}
		for (i = mark; i < r->nr_rec; i++) {
			const struct ring_record *s = &r->rec[i];

			if (s->type == PERF_RECORD_SAMPLE &&
			    s->tid == (__u32)a->tid && s->cookie &&
			    (s->misc & PERF_RECORD_MISC_CPUMODE_MASK) ==
			    PERF_RECORD_MISC_KERNEL) {
				*calls = n;
				return s->cookie;
			}
		}
		mark = r->nr_rec;
	}
	return 0;
}

/* Wait until the reader completed more than n calls; false on timeout. */
static bool wait_calls(struct reader *a, long n)
{
	double deadline = ring_now() + READER_WAIT;

	while (__atomic_load_n(&a->calls, __ATOMIC_ACQUIRE) <= n) {
		if (ring_now() > deadline)
			return false;
		usleep(1000);
	}
	return true;
}

/*
 * Close an event, and unmap its buffer, while the walk its samples asked
 * for is pending: when the reader's readv() returns, the walk runs and
 * must find neither the event nor its buffer (KASAN would tell). A new
 * event on the reader then works as ever.
 */
TEST(close_with_walk_pending)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	int attempt, i, joined = 0, chunks;
	__u64 cookie = 0, stale;
	bool closed_inside = false;
	long n0 = 0, n1 = 0;
	struct cookie_stats st;
	struct reader *a;
	pthread_t th;
	struct ring r;
	size_t j, k, rec;
	double t;

	attr.wakeup_events = 1;		/* poll() wakes up for each sample */
	a = calloc(1, sizeof(*a));
	ASSERT_FALSE(!a);
	a->zero_fd = open("/dev/zero", O_RDONLY);
	ASSERT_LE(0, a->zero_fd) TH_LOG("/dev/zero: %s", strerror(errno));
	a->buf = malloc(READ_CHUNK);
	ASSERT_FALSE(!a->buf);
	memset(a->buf, 1, READ_CHUNK);	/* no page faults while sampled */
	for (i = 0; i < MAX_CHUNKS; i++) {
		a->iov[i].iov_base = a->buf;
		a->iov[i].iov_len = READ_CHUNK;
	}
	ASSERT_EQ(READ_CHUNK, read(a->zero_fd, a->buf, READ_CHUNK));
	t = ring_now();
	ASSERT_EQ(READ_CHUNK, read(a->zero_fd, a->buf, READ_CHUNK));
	t = ring_now() - t;
	chunks = t > 0 ? LONG_READ_NS / 1e9 / t : MAX_CHUNKS;
	a->iovcnt = chunks < 1 ? 1 : chunks > MAX_CHUNKS ? MAX_CHUNKS : chunks;

	ASSERT_EQ(0, pthread_create(&th, NULL, reader_main, a));
	while (!__atomic_load_n(&a->tid, __ATOMIC_ACQUIRE))
		usleep(1000);

	for (attempt = 0; attempt < 4; attempt++) {
		open_ring(_metadata, &r, &attr, a->tid, -1, DATA_PAGES);
		ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
		cookie = wait_pending_walk(&r, a, &n0);
		ASSERT_NE(0, cookie)
			TH_LOG("no kernel-mode sample with a cookie in a readv() of %d MiB",
			       a->iovcnt * (READ_CHUNK >> 20));
		/* The file goes with the last reference: the mapping's. */
		ASSERT_EQ(0, close(r.fd));
		ring_unmap(&r);
		n1 = __atomic_load_n(&a->calls, __ATOMIC_ACQUIRE);
		closed_inside = n1 == n0;
		if (closed_inside)
			break;
		/* The call ended before the event was gone: make it longer. */
		TH_LOG("attempt %d: the readv() of %d MiB returned before the close",
		       attempt, a->iovcnt * (READ_CHUNK >> 20));
		chunks = 2 * a->iovcnt;
		__atomic_store_n(&a->iovcnt, chunks > MAX_CHUNKS ? MAX_CHUNKS : chunks,
				 __ATOMIC_RELAXED);
	}
	ASSERT_TRUE(closed_inside)
		TH_LOG("could not close the event inside a readv() in %d attempts",
		       attempt);

	/* That readv() returns, its walk runs, the reader goes on. */
	ASSERT_TRUE(wait_calls(a, n0 + 1))
		TH_LOG("the reader did not complete 2 calls after the close (%ld, %ld)",
		       n0, __atomic_load_n(&a->calls, __ATOMIC_RELAXED));

	/* A new event on the reader gets its records. */
	stale = cookie;
	open_ring(_metadata, &r, &attr, a->tid, -1, DATA_PAGES);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
	t = ring_now() + READER_WAIT;
	while (!joined && ring_now() < t) {
		struct pollfd pfd = { .fd = r.fd, .events = POLLIN };

		poll(&pfd, 1, 100);
		ring_drain(&r);
		for (k = 0; k < r.nr_rec && !joined; k++) {
			if (r.rec[k].type != PERF_RECORD_CALLCHAIN_DEFERRED ||
			    r.rec[k].tid != (__u32)a->tid)
				continue;
			for (j = 0; j < k && !joined; j++)
				joined = r.rec[j].type == PERF_RECORD_SAMPLE &&
					 r.rec[j].tid == (__u32)a->tid &&
					 r.rec[j].cookie == r.rec[k].cookie;
		}
	}
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	__atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_join(th, NULL));

	EXPECT_EQ(0, a->bad) TH_LOG("a readv() of the reader returned %ld", a->bad);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);
	st = check_cookies(_metadata, &r, a->tid, ALL_DEFERRED | RECORD_AFTER);
	EXPECT_LE(1, joined)
		TH_LOG("want a cookie with its record in the new buffer, %d samples, %d cookies",
		       st.samples, st.cookies);
	EXPECT_EQ(0, records_of_cookie(&r, stale, &rec))
		TH_LOG("the closed event's cookie %#llx has a record in the new buffer",
		       (unsigned long long)stale);
	TH_LOG("closed in attempt %d, readv() of %d MiB; then %d samples, %d cookies",
	       attempt, a->iovcnt * (READ_CHUNK >> 20), st.samples, st.cookies);

	close_ring(&r);
	close(a->zero_fd);
	free(a->buf);
	free(a);
}

TEST_HARNESS_MAIN
