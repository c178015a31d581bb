// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED: progress, and which ring buffers get the
 * PERF_RECORD_CALLCHAIN_DEFERRED records.
 *
 * - A sample taken on the task's very way out to user space (the
 *   preemptirq:irq_enable tracepoint fires there, after the exit work)
 *   must not start a new round of deferred work: the task finishes, such
 *   a sample has cookie 0 and an in-place user walk, or the cookie of the
 *   stay it belongs to when that stay was served already.
 * - A sample taken in a system call by an interrupt (not an NMI) costs no
 *   self-interrupt (the IWI line of /proc/interrupts): the system call's
 *   exit runs the deferred work. A sample taken in user mode defers
 *   nothing: its user stack is walked in place.
 * - Every ring buffer that observes the task gets exactly one record per
 *   cookie, with more than 16 buffers and with events sharing a buffer,
 *   and a shared buffer's record is cut by the largest sample_max_stack of
 *   its events, whichever event the kernel meets first.
 *
 * Build with frame pointers and no sibling calls (see Makefile). Built
 * 64-bit, and 32-bit as deferred_progress_32, a compat task. Pointers are
 * checked as truth values (ASSERT_FALSE(!p)): the harness would print them
 * as 64-bit integers.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_iwi.h"

#define MAX_KEEP_RECORDS	200000	/* stop copying out a runaway buffer */
#define ZERO_CHUNK		(1024 * 1024)	/* readv() of /dev/zero: iovec size */
#define ZERO_MAX		(256 * ZERO_CHUNK)	/* ... and the most per call */

/* irq_enable_tracepoint_makes_progress */
#define TP_SYSCALLS		1000
#define TP_DATA_PAGES		512
#define TP_ROUNDS		3
#define TP_MORE_ROUNDS_UNTIL	8.0	/* s into the test: start another round */
#define TP_LIVELOCK_SECONDS	20.0	/* one run; the harness gives a test 30 s */
#define TP_BUDGET_SECONDS	27.0	/* the whole test */
/*
 * Deferral runs task work on the way out of each system call: the exit
 * work enables interrupts once more, and task_work_run() once more (its
 * pi_lock), which the tracepoint samples too. That is twice the irq_enable
 * events of a plain recording (4.5 against 2.2 per system call measured),
 * and no more. Each costs about what a plain one costs: the samples only
 * take a cookie, one of them per system call pays the walk and the record
 * (0.8x to 1.8x measured under KASAN and TCG, whose noise the margin is
 * for; 2.6x once in 20 runs).
 */
#define TP_MAX_SLOWDOWN		2.5	/* deferred / plain time per sample */
#define TP_MAX_MORE_SAMPLES	2.5	/* deferred / plain samples, at most */
/*
 * After its system calls the child spins in user mode: the timer
 * interrupts it takes there return to user mode with no request before
 * the exit work, and their irq_enable samples come after it, too late to
 * defer. They must be walked in place.
 */
#define TP_SPIN_SECONDS		0.05

/* no_self_interrupt_per_deferred_sample */
#define IWI_PERIOD_NS		100000
#define IWI_CPU_SECONDS		1.0
#define IWI_WALL_SECONDS	5.0
#define IWI_DATA_PAGES		256
#define IWI_SPIN_SECONDS	0.00005
#define IWI_READ		(64 << 10)
#define IWI_MIN_DEFERRED	100
#define IWI_MIN_WALKS		50
/*
 * Extra IWIs per walk (a record: the first request of a stay queues it)
 * < 0.1; raising one for every queued walk made it 1.
 */
#define IWI_MAX_PER_10_WALKS	1

/* every_buffer_gets_one_record */
#define NR_BUFFERS		20	/* more than the 16 the old table held */
#define FANOUT_PERIOD_NS	2000000
#define FANOUT_DATA_PAGES	16
#define FANOUT_ITERATIONS	30
#define FANOUT_READ_SECONDS	0.004	/* each readv(): 2 samples per event */
#define FANOUT_SPIN_SECONDS	0.0005
#define FANOUT_WALL_SECONDS	10.0

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

static struct perf_event_attr clock_attr(__u64 config, bool deferred, __u64 period)
{
	return sw_sample_attr(config, period, deferred);
}

static double thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* readv() of /dev/zero sized to take about a given time: a long kernel stay. */
struct zero_reader {
	int fd;
	char *buf;
	struct iovec *iov;
	int iovcnt;
	size_t len;
};

static void zero_init(struct __test_metadata *_metadata, struct zero_reader *z,
		      double seconds)
{
	double t;
	int i;

	memset(z, 0, sizeof(*z));
	t = zero_open(_metadata, &z->fd, &z->buf, ZERO_CHUNK);

	z->iovcnt = t > 0 ? seconds / t + 1 : ZERO_MAX / ZERO_CHUNK;
	if (z->iovcnt > ZERO_MAX / ZERO_CHUNK)
		z->iovcnt = ZERO_MAX / ZERO_CHUNK;
	z->iov = calloc(z->iovcnt, sizeof(*z->iov));
	ASSERT_FALSE(!z->iov);
	for (i = 0; i < z->iovcnt; i++) {
		z->iov[i].iov_base = z->buf;
		z->iov[i].iov_len = ZERO_CHUNK;
	}
	z->len = (size_t)z->iovcnt * ZERO_CHUNK;
}

static void zero_fini(struct zero_reader *z)
{
	free(z->iov);
	free(z->buf);
	close(z->fd);
}

/* How the samples of one thread and the records of one buffer turned out. */
struct ring_stats {
	size_t samples;		/* of the thread */
	size_t user_mode;	/* taken in user mode: walked in place */
	size_t deferred;	/* cookie != 0 */
	size_t inline_user;	/* cookie 0, user part walked in place */
	size_t kernel_in_place;	/* of those, taken in the kernel */
	size_t backward;	/* sampled after its cookie's record */
	size_t records;		/* PERF_RECORD_CALLCHAIN_DEFERRED */
	size_t lost;		/* PERF_RECORD_LOST */
	size_t unfinished;	/* samples of the stay the event stopped in */
	/* problems; the first of each kind is described */
	size_t zero_no_user;	/* cookie 0 but no user part */
	size_t user_with_cookie; /* cookie and a user part */
	size_t user_mode_deferred; /* taken in user mode, with a cookie */
	size_t user_mode_walk;	/* taken in user mode, not walked from its ip */
	size_t bad_cookie;	/* not odd << 32 | cpu + 1 */
	size_t dup;		/* cookies with more than one record */
	size_t missing;		/* samples whose cookie has no record */
	char zero_msg[128];
	char user_msg[128];
	char user_mode_msg[128];
	char walk_msg[160];
	char cookie_msg[128];
	char dup_msg[128];
	char missing_msg[128];
};

struct cookie_ref {
	__u64 cookie;
	size_t idx;		/* in ring.rec[] */
};

static int cmp_ref(const void *a, const void *b)
{
	const struct cookie_ref *x = a, *y = b;

	if (x->cookie != y->cookie)
		return x->cookie < y->cookie ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cmp_u64(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

/* First of the sorted refs[0..n) with this cookie, n if none. */
static size_t find_ref(const struct cookie_ref *refs, size_t n, __u64 cookie)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (refs[mid].cookie < cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && refs[lo].cookie == cookie ? lo : n;
}

/* The records of r sorted by cookie, in *refs; returns how many. */
static size_t sorted_records(const struct ring *r, struct cookie_ref **refs)
{
	size_t i, n = 0;

	*refs = calloc(r->nr_rec + 1, sizeof(**refs));
	if (!*refs)
		return 0;
	for (i = 0; i < r->nr_rec; i++) {
		if (r->rec[i].type != PERF_RECORD_CALLCHAIN_DEFERRED)
			continue;
		(*refs)[n].cookie = r->rec[i].cookie;
		(*refs)[n++].idx = i;
	}
	qsort(*refs, n, sizeof(**refs), cmp_ref);
	return n;
}

/*
 * Count the samples of tid and the records in r, and what is wrong with
 * them: a cookie-0 sample must carry its user part, a deferred one must
 * not, a cookie must be well formed, and have exactly one record in the
 * buffer. The stays still under way when the event stopped may have none
 * (a disabled event gets nothing): those with no record after their first
 * sample, the child having blocked in one and reported from another. A
 * lost record may be the one missing. A sample taken in user mode must
 * have cookie 0 and its user part only (PERF_CONTEXT_USER first), walked
 * from its ip.
 */
static void analyze_ring(struct __test_metadata *_metadata,
			 const struct ring *r, pid_t tid, struct ring_stats *st)
{
	struct cookie_ref *refs;
	size_t last_record = 0;
	size_t nrefs, i, j, k;
	const __u64 *ips;
	const char *why;
	bool user;
	__u64 nr;

	memset(st, 0, sizeof(*st));
	nrefs = sorted_records(r, &refs);
	ASSERT_FALSE(!refs);
	st->records = nrefs;
	for (i = 0; i < r->nr_rec; i++) {
		st->lost += r->rec[i].type == PERF_RECORD_LOST;
		if (r->rec[i].type == PERF_RECORD_CALLCHAIN_DEFERRED)
			last_record = i;
	}

	for (i = 0; i < nrefs; i = j) {
		for (j = i + 1; j < nrefs && refs[j].cookie == refs[i].cookie; j++)
			;
		if (j - i > 1 && !st->dup++)
			snprintf(st->dup_msg, sizeof(st->dup_msg),
				 "cookie %#llx has %zu records",
				 (unsigned long long)refs[i].cookie, j - i);
	}

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *s = &r->rec[i];

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)tid)
			continue;
		st->samples++;
		user = has_user_context(s);
		if (taken_in_user_mode(s)) {
			st->user_mode++;
			if (s->cookie && !st->user_mode_deferred++)
				snprintf(st->user_mode_msg, sizeof(st->user_mode_msg),
					 "sample %zu at ip %#llx, cookie %#llx", i,
					 (unsigned long long)s->ip,
					 (unsigned long long)s->cookie);
			ips = user_mode_walk(s, &nr);
			if ((!nr || ips[0] != s->ip) && !st->user_mode_walk++)
				snprintf(st->walk_msg, sizeof(st->walk_msg),
					 "sample %zu at ip %#llx: %llu ips, ips[0] %#llx, user ips[0] %#llx",
					 i, (unsigned long long)s->ip,
					 (unsigned long long)s->nr,
					 s->nr ? (unsigned long long)s->ips[0] : 0ULL,
					 nr ? (unsigned long long)ips[0] : 0ULL);
		}
		if (!s->cookie) {
			if (user) {
				st->inline_user++;
				st->kernel_in_place += !taken_in_user_mode(s);
			} else if (!st->zero_no_user++) {
				snprintf(st->zero_msg, sizeof(st->zero_msg),
					 "sample %zu at ip %#llx, %llu ips", i,
					 (unsigned long long)s->ip,
					 (unsigned long long)s->nr);
			}
			continue;
		}
		st->deferred++;
		if (user && !st->user_with_cookie++)
			snprintf(st->user_msg, sizeof(st->user_msg),
				 "sample %zu, cookie %#llx", i,
				 (unsigned long long)s->cookie);
		why = cookie_problem(s->cookie);
		if (why && !st->bad_cookie++)
			snprintf(st->cookie_msg, sizeof(st->cookie_msg),
				 "cookie %#llx: %s", (unsigned long long)s->cookie, why);

		k = find_ref(refs, nrefs, s->cookie);
		if (k < nrefs) {
			st->backward += refs[k].idx < i;
			continue;
		}
		if (i > last_record)
			st->unfinished++;
		else if (!st->lost && !st->missing++)
			snprintf(st->missing_msg, sizeof(st->missing_msg),
				 "sample %zu, cookie %#llx", i,
				 (unsigned long long)s->cookie);
	}
	free(refs);
}

/* Add a count of problems to a total, keeping the first description. */
static void add_problem(size_t *total, char *total_msg, size_t n,
			const char *msg, size_t size)
{
	if (n && !*total)
		snprintf(total_msg, size, "%s", msg);
	*total += n;
}

static void add_stats(struct ring_stats *t, const struct ring_stats *st)
{
	t->samples += st->samples;
	t->user_mode += st->user_mode;
	t->deferred += st->deferred;
	t->inline_user += st->inline_user;
	t->kernel_in_place += st->kernel_in_place;
	t->backward += st->backward;
	t->records += st->records;
	t->lost += st->lost;
	t->unfinished += st->unfinished;
	add_problem(&t->zero_no_user, t->zero_msg, st->zero_no_user,
		    st->zero_msg, sizeof(t->zero_msg));
	add_problem(&t->user_with_cookie, t->user_msg, st->user_with_cookie,
		    st->user_msg, sizeof(t->user_msg));
	add_problem(&t->user_mode_deferred, t->user_mode_msg,
		    st->user_mode_deferred, st->user_mode_msg,
		    sizeof(t->user_mode_msg));
	add_problem(&t->user_mode_walk, t->walk_msg, st->user_mode_walk,
		    st->walk_msg, sizeof(t->walk_msg));
	add_problem(&t->bad_cookie, t->cookie_msg, st->bad_cookie,
		    st->cookie_msg, sizeof(t->cookie_msg));
	add_problem(&t->dup, t->dup_msg, st->dup, st->dup_msg, sizeof(t->dup_msg));
	add_problem(&t->missing, t->missing_msg, st->missing, st->missing_msg,
		    sizeof(t->missing_msg));
}

/*
 * irq_enable_tracepoint_makes_progress: a child makes TP_SYSCALLS system
 * calls, then spins in user mode, while an event samples every
 * preemptirq:irq_enable of it, one of which fires on each return to user
 * space after the exit work: in a system call's stay, which has its cookie
 * and its walk by then; in a timer interrupt's from user mode, which has
 * neither and must be walked in place.
 */

static const char * const tracefs_dirs[] = {
	"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
};

static long read_tracepoint_id(const char *dir, const char *event)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/events/%s/id", dir, event);
	return read_number(path);
}

/* The id of a tracepoint, mounting tracefs for a moment if need be. */
static long tracepoint_id(const char *event)
{
	long id = -1;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(tracefs_dirs) && id < 0; i++)
		id = read_tracepoint_id(tracefs_dirs[i], event);
	if (id >= 0)
		return id;
	if (mount("nodev", tracefs_dirs[0], "tracefs", 0, NULL))
		return -1;
	id = read_tracepoint_id(tracefs_dirs[0], event);
	umount2(tracefs_dirs[0], MNT_DETACH);
	return id;
}

/*
 * The child: wait for the go, make the system calls, report their time,
 * and wait for the parent (which disables the event meanwhile) to let it
 * exit.
 */
static void syscall_child(int go, int done)
{
	unsigned long loops;
	double t;
	char x;
	int i;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	loops = spin_loops(TP_SPIN_SECONDS);
	if (read(go, &x, 1) != 1)
		_exit(126);
	t = ring_now();
	for (i = 0; i < TP_SYSCALLS; i++)
		syscall(__NR_getppid);
	t = ring_now() - t;
	spin_user(loops);
	if (write(done, &t, sizeof(t)) != sizeof(t))
		_exit(125);
	/* EOF: the parent closed its end. */
	if (read(go, &x, 1) != 0)
		_exit(124);
	_exit(0);
}

/*
 * Wait for child until the time "deadline", then kill it; returns its wait
 * status, -1 if it could not be waited for.
 */
static int reap(pid_t child, double deadline, bool *killed)
{
	int pidfd, status = -1;
	struct pollfd p;
	double left;
	pid_t ret;

	*killed = false;
	pidfd = syscall(__NR_pidfd_open, child, 0);
	if (pidfd >= 0) {
		p.fd = pidfd;
		p.events = POLLIN;
		left = deadline - ring_now();
		if (left < 0)
			left = 0;
		if (poll(&p, 1, left * 1000) == 0) {
			kill(child, SIGKILL);
			*killed = true;
		}
		close(pidfd);
	} else {
		/* No pidfd: look every millisecond. */
		while (!(ret = waitpid(child, &status, WNOHANG))) {
			if (ring_now() > deadline) {
				kill(child, SIGKILL);
				*killed = true;
				break;
			}
			usleep(1000);
		}
		if (ret == child)
			return status;
	}
	if (waitpid(child, &status, 0) != child)
		return -1;
	return status;
}

struct tp_result {
	bool skipped;
	char why[128];		/* of the skip */
	double seconds;		/* the child's time for its system calls */
	struct ring r;
	pid_t child;
};

/*
 * Fork the child, sample it with the irq_enable tracepoint until it made
 * its system calls, or until "deadline" (a livelock: fail). The event is
 * disabled before the child exits, so that its exit is not sampled.
 */
static void tp_run(struct __test_metadata *_metadata, __u64 id, bool deferred,
		   double deadline, struct tp_result *res)
{
	struct perf_event_attr attr =
		sample_attr(PERF_TYPE_TRACEPOINT, id, 1, PERF_SAMPLE_CPU);
	int go[2], done[2], status, fd, ret;
	bool killed, finished;
	struct pollfd p;
	double start;
	ssize_t n;

	memset(res, 0, sizeof(*res));
	attr.disabled = 0;
	if (deferred)
		attr.sample_type |= PERF_SAMPLE_CALLCHAIN_DEFERRED;
	ASSERT_EQ(0, pipe(go)) TH_LOG("pipe: %s", strerror(errno));
	ASSERT_EQ(0, pipe(done)) TH_LOG("pipe: %s", strerror(errno));
	res->child = fork();
	ASSERT_LE(0, res->child) TH_LOG("fork: %s", strerror(errno));
	if (!res->child) {
		close(go[1]);
		close(done[0]);
		syscall_child(go[0], done[1]);
	}
	close(go[0]);
	close(done[1]);

	fd = perf_open(&attr, res->child, -1);
	if (fd < 0) {
		ret = errno;
		kill(res->child, SIGKILL);
		waitpid(res->child, &status, 0);
		close(go[1]);
		close(done[0]);
		if (ret == EACCES || ret == EPERM) {
			res->skipped = true;
			snprintf(res->why, sizeof(res->why),
				 "a tracepoint event with kernel callchains needs privileges (%s)",
				 strerror(ret));
			return;
		}
		ASSERT_LE(0, fd) TH_LOG("perf_event_open(irq_enable, pid %d): %s",
					res->child, strerror(ret));
	}
	ASSERT_EQ(0, ring_map(&res->r, fd, &attr, TP_DATA_PAGES))
		TH_LOG("mmap of %d data pages: %s", TP_DATA_PAGES, strerror(errno));

	ASSERT_EQ(1, write(go[1], "g", 1)) TH_LOG("write: %s", strerror(errno));
	start = ring_now();
	p.fd = done[0];
	p.events = POLLIN;
	/* Drain the buffer until the child reports, or the deadline. */
	do {
		ret = poll(&p, 1, 10);
		ASSERT_TRUE(ret >= 0 || errno == EINTR)
			TH_LOG("poll: %s", strerror(errno));
		if (res->r.nr_rec < MAX_KEEP_RECORDS)
			ring_drain(&res->r);
		finished = ret > 0;
	} while (!finished && ring_now() < deadline);
	if (!finished) {
		status = reap(res->child, 0, &killed);
		ASSERT_TRUE(finished)
			TH_LOG("livelock: %d getppid() not done in %.0f s (%s), %zu samples, %#x",
			       TP_SYSCALLS, ring_now() - start,
			       deferred ? "deferred" : "plain", res->r.nr_samples, status);
	}
	n = read(done[0], &res->seconds, sizeof(res->seconds));
	if (n != sizeof(res->seconds)) {
		status = reap(res->child, 0, &killed);
		ASSERT_EQ(sizeof(res->seconds), n)
			TH_LOG("the child ended before reporting its time, status %#x",
			       status);
	}
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0))
		TH_LOG("PERF_EVENT_IOC_DISABLE: %s", strerror(errno));
	ring_drain(&res->r);

	close(go[1]);		/* let the child exit */
	close(done[0]);
	status = reap(res->child, ring_now() + 10, &killed);
	ASSERT_FALSE(killed) TH_LOG("the child did not exit once let go");
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x", status);
	EXPECT_EQ(0, res->r.nr_malformed)
		TH_LOG("expected well-formed records, saw %s", res->r.why);
}

TEST(irq_enable_tracepoint_makes_progress)
{
	double best[2] = { 0, 0 }, start = ring_now(), deadline;
	double per_sample[2] = { 0, 0 };
	size_t samples[2] = { 0, 0 };
	struct ring_stats total = { 0 }, st;
	struct tp_result res;
	int round, i, mode;
	long id;

	id = tracepoint_id("preemptirq/irq_enable");
	if (id < 0)
		SKIP(return, "no preemptirq:irq_enable (CONFIG_PREEMPTIRQ_TRACEPOINTS)");

	for (round = 0; round < TP_ROUNDS; round++) {
		if (round && ring_now() - start > TP_MORE_ROUNDS_UNTIL)
			break;
		for (i = 0; i < 2; i++) {
			/* mode 0 plain, 1 deferred; the first one alternates */
			mode = i ^ (round & 1);
			deadline = ring_now() + TP_LIVELOCK_SECONDS;
			if (deadline > start + TP_BUDGET_SECONDS)
				deadline = start + TP_BUDGET_SECONDS;
			tp_run(_metadata, id, mode, deadline, &res);
			if (res.skipped)
				SKIP(return, "%s", res.why);
			if (!round || res.seconds < best[mode]) {
				best[mode] = res.seconds;
				samples[mode] = res.r.nr_samples;
			}
			if (res.r.nr_samples &&
			    (!round || res.seconds / res.r.nr_samples < per_sample[mode]))
				per_sample[mode] = res.seconds / res.r.nr_samples;
			if (mode) {
				analyze_ring(_metadata, &res.r, res.child, &st);
				add_stats(&total, &st);
			}
			TH_LOG("round %d, %s: %d getppid() in %.3f ms, %zu samples",
			       round, mode ? "deferred" : "plain", TP_SYSCALLS,
			       res.seconds * 1e3, res.r.nr_samples);
			close_ring(&res.r);
		}
	}

	TH_LOG("deferred: %zu samples, %zu with a cookie, %zu of them after its record",
	       total.samples, total.deferred, total.backward);
	TH_LOG("deferred: %zu walked in place (%zu in the kernel), %zu records, %zu lost",
	       total.inline_user, total.kernel_in_place, total.records, total.lost);
	TH_LOG("deferred: %zu samples of the stay the event stopped in", total.unfinished);
	TH_LOG("best times: plain %.3f ms, deferred %.3f ms (%.2fx); per sample %.1f us, %.1f us",
	       best[0] * 1e3, best[1] * 1e3, best[0] ? best[1] / best[0] : 0,
	       per_sample[0] * 1e6, per_sample[1] * 1e6);

	EXPECT_EQ(0, total.zero_no_user)
		TH_LOG("want a user part in place with cookie 0, %zu had none (first: %s)",
		       total.zero_no_user, total.zero_msg);
	EXPECT_EQ(0, total.user_with_cookie)
		TH_LOG("want no inline user part with a cookie, %zu had it (first: %s)",
		       total.user_with_cookie, total.user_msg);
	EXPECT_EQ(0, total.bad_cookie)
		TH_LOG("want cookie = odd << 32 | cpu+1, %zu were not (first: %s)",
		       total.bad_cookie, total.cookie_msg);
	EXPECT_EQ(0, total.dup)
		TH_LOG("want at most one record per cookie, %zu cookies had more (first: %s)",
		       total.dup, total.dup_msg);
	EXPECT_EQ(0, total.missing)
		TH_LOG("want a record for every cookie, %zu samples had none (first: %s)",
		       total.missing, total.missing_msg);
	ASSERT_LE(1, total.deferred)
		TH_LOG("expected samples with a cookie (a system call's entry), saw none of %zu",
		       total.samples);
	ASSERT_LE(1, total.records) TH_LOG("expected deferred records, saw none");
	ASSERT_LE(1, total.backward)
		TH_LOG("want samples after a served stay's walk with its cookie, none of %zu",
		       total.deferred);
	EXPECT_LE(1, total.kernel_in_place)
		TH_LOG("want samples past an interrupt's exit work walked in place, none of %zu",
		       total.samples);
	ASSERT_LE(1, samples[0]) TH_LOG("no sample in the plain runs");
	ASSERT_LE(samples[1], TP_MAX_MORE_SAMPLES * samples[0])
		TH_LOG("deferred: %zu samples for %d system calls, plain %zu",
		       samples[1], TP_SYSCALLS, samples[0]);
	ASSERT_LE((long long)(per_sample[1] * 1e9),
		  (long long)(TP_MAX_SLOWDOWN * per_sample[0] * 1e9))
		TH_LOG("deferred: %.1f us per sample, more than %.1f x plain's %.1f us",
		       per_sample[1] * 1e6, TP_MAX_SLOWDOWN, per_sample[0] * 1e6);
}

/*
 * no_self_interrupt_per_deferred_sample: a thread spins in user mode and
 * reads /dev/zero, sampled by task-clock; the IWIs of the whole machine
 * during a deferred run minus those of a plain run are the self-interrupts
 * that deferral cost. The samples in read() are deferred; those of the
 * spin, taken in user mode, are walked in place in both runs.
 */
struct iwi_result {
	long long iwi;
	double cpu;
	struct ring_stats st;
};

static void iwi_run(struct __test_metadata *_metadata, bool deferred,
		    unsigned long loops, struct iwi_result *res)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_TASK_CLOCK, deferred,
						 IWI_PERIOD_NS);
	long long before, after;
	double cpu0, wall;
	struct ring r;
	char *buf;
	int fd, i;

	buf = malloc(IWI_READ);
	ASSERT_FALSE(!buf);
	memset(buf, 1, IWI_READ);
	fd = open("/dev/zero", O_RDONLY);
	ASSERT_LE(0, fd) TH_LOG("/dev/zero: %s", strerror(errno));

	/* Perf's own wakeups use irq_work too: one per full buffer. */
	attr.watermark = 1;
	attr.wakeup_watermark = IWI_DATA_PAGES * sysconf(_SC_PAGESIZE);
	open_ring(_metadata, &r, &attr, 0, -1, IWI_DATA_PAGES);

	before = iwi_count();
	ASSERT_LE(0, before) TH_LOG("no IWI line in /proc/interrupts");
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0))
		TH_LOG("PERF_EVENT_IOC_ENABLE: %s", strerror(errno));
	cpu0 = thread_cpu_seconds();
	wall = ring_now() + IWI_WALL_SECONDS;
	for (i = 1;; i++) {
		spin_user(loops);
		ASSERT_EQ(IWI_READ, read(fd, buf, IWI_READ))
			TH_LOG("read of /dev/zero: %s", strerror(errno));
		if (i % 16)
			continue;
		ring_drain(&r);
		res->cpu = thread_cpu_seconds() - cpu0;
		if (res->cpu >= IWI_CPU_SECONDS || ring_now() > wall)
			break;
	}
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0))
		TH_LOG("PERF_EVENT_IOC_DISABLE: %s", strerror(errno));
	after = iwi_count();
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed)
		TH_LOG("expected well-formed records, saw %s", r.why);
	res->iwi = after - before;
	analyze_ring(_metadata, &r, gettid_(), &res->st);

	close_ring(&r);
	close(fd);
	free(buf);
}

TEST(no_self_interrupt_per_deferred_sample)
{
	struct iwi_result plain = { 0 }, deferred = { 0 };
	unsigned long loops;
	long long extra;

	if (iwi_count() < 0)
		SKIP(return, "no IWI line in /proc/interrupts");

	loops = spin_loops(IWI_SPIN_SECONDS);
	iwi_run(_metadata, false, loops, &plain);
	iwi_run(_metadata, true, loops, &deferred);
	extra = deferred.iwi - plain.iwi;

	TH_LOG("plain: %zu samples, %lld IWIs in %.2f s of CPU",
	       plain.st.samples, plain.iwi, plain.cpu);
	TH_LOG("deferred: %zu samples, %zu records, %lld IWIs in %.2f s of CPU",
	       deferred.st.samples, deferred.st.records, deferred.iwi, deferred.cpu);
	TH_LOG("deferred: %zu with a cookie, %zu in user mode walked in place",
	       deferred.st.deferred, deferred.st.user_mode);
	EXPECT_EQ(0, deferred.st.user_mode_deferred)
		TH_LOG("want user-mode samples walked in place, %zu of %zu had a cookie (%s)",
		       deferred.st.user_mode_deferred, deferred.st.user_mode,
		       deferred.st.user_mode_msg);
	EXPECT_EQ(0, deferred.st.user_mode_walk)
		TH_LOG("want user-mode samples walked from their ip, %zu of %zu not (first: %s)",
		       deferred.st.user_mode_walk, deferred.st.user_mode,
		       deferred.st.walk_msg);
	ASSERT_LE(IWI_MIN_DEFERRED, deferred.st.deferred)
		TH_LOG("expected at least %d samples with a cookie, saw %zu of %zu",
		       IWI_MIN_DEFERRED, deferred.st.deferred, deferred.st.samples);
	ASSERT_LE(IWI_MIN_WALKS, deferred.st.records)
		TH_LOG("expected at least %d walks (records), saw %zu",
		       IWI_MIN_WALKS, deferred.st.records);
	TH_LOG("%.3f extra IWIs per deferred sample, %.3f per walk",
	       (double)extra / deferred.st.deferred,
	       (double)extra / deferred.st.records);
	ASSERT_LT(extra * 10, IWI_MAX_PER_10_WALKS * (long long)deferred.st.records)
		TH_LOG("want < %.1f extra IWIs per walk, %lld for %zu (%.3f each)",
		       IWI_MAX_PER_10_WALKS / 10.0, extra, deferred.st.records,
		       (double)extra / deferred.st.records);
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
