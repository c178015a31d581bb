// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED: progress. A sample taken on the task's
 * very way out to user space (the preemptirq:irq_enable tracepoint fires
 * there, after the exit work) must not start a new round of deferred work:
 * the task finishes, such a sample has cookie 0 and an in-place user walk,
 * or the cookie of the stay it belongs to when that stay was served
 * already.
 *
 * Build with frame pointers and no sibling calls (see Makefile). Built
 * 64-bit, and 32-bit as deferred_progress_32, a compat task.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_progress.h"

#define MAX_KEEP_RECORDS	200000	/* stop copying out a runaway buffer */

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

TEST_HARNESS_MAIN
