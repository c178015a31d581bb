/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the selftests of PERF_SAMPLE_CALLCHAIN_DEFERRED from the
 * observer's side (deferred_observe, deferred_cgroup, deferred_pidns,
 * deferred_paused, deferred_backward, deferred_iowq, deferred_enable): the
 * sampled task's work (struct burner), the attr of its cpu-clock events,
 * CPU pinning, and the join of a tid's samples with the records of their
 * cookies. Include after kselftest_harness.h, deferred_ring.h,
 * deferred_util.h and deferred_spin.h.
 */
#ifndef DEFERRED_OBSERVE_H
#define DEFERRED_OBSERVE_H

#include <sched.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define PERIOD_NS		200000	/* cpu-clock period */
#define DATA_PAGES		64
#define RUN_SECONDS		3.0	/* one sampled run, at most */
#define WANT_SAMPLES		150
#define MIN_SAMPLES		10
#define ZERO_CHUNK		(1024 * 1024)	/* readv() of /dev/zero: iovec size */
#define ZERO_MAX_CHUNKS		64
#define READ_SECONDS		0.003	/* one readv() of /dev/zero */
#define SPIN_SECONDS		0.001	/* one spin in user mode */

/*
 * With the lost count in read(): records dropped at the end of a run, once
 * nothing written after them could carry a PERF_RECORD_LOST, show there.
 */
static inline struct perf_event_attr clock_attr(__u64 config)
{
	struct perf_event_attr attr = sw_sample_attr(config, PERIOD_NS, true);

	attr.read_format = PERF_FORMAT_LOST;
	return attr;
}

/* The first CPUs this task may run on, at most max; returns how many. */
static inline int allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int i, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 0;
	for (i = 0; i < CPU_SETSIZE && n < max; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	return n;
}

static inline int pin_to(pid_t tid, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(tid, sizeof(set), &set) ? -errno : 0;
}

/*
 * The work of a sampled task: a readv() of /dev/zero (a kernel stay of a
 * few ms, several samples each) and a spin in user mode.
 */
struct burner {
	int zero_fd;
	char *buf;
	struct iovec iov[ZERO_MAX_CHUNKS];
	int iovcnt;
	size_t len;		/* bytes per readv() */
	unsigned long loops;	/* spin_user() loops per round */
};

static inline void burner_init(struct __test_metadata *_metadata, struct burner *b)
{
	double t;
	int i;

	memset(b, 0, sizeof(*b));
	t = zero_open(_metadata, &b->zero_fd, &b->buf, ZERO_CHUNK);
	b->iovcnt = t > 0 ? READ_SECONDS / t : ZERO_MAX_CHUNKS;
	if (b->iovcnt < 1)
		b->iovcnt = 1;
	if (b->iovcnt > ZERO_MAX_CHUNKS)
		b->iovcnt = ZERO_MAX_CHUNKS;
	for (i = 0; i < b->iovcnt; i++) {
		b->iov[i].iov_base = b->buf;
		b->iov[i].iov_len = ZERO_CHUNK;
	}
	b->len = (size_t)b->iovcnt * ZERO_CHUNK;
	b->loops = spin_loops(SPIN_SECONDS);
}

static inline void burner_fini(struct burner *b)
{
	free(b->buf);
	close(b->zero_fd);
}

static inline bool burn(const struct burner *b)
{
	bool ok = readv(b->zero_fd, b->iov, b->iovcnt) == (ssize_t)b->len;

	spin_user(b->loops);
	return ok;
}

/* Records of the given type and tid. */
static inline int count_of(const struct ring *r, __u32 type, __u32 tid)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		n += r->rec[i].type == type && r->rec[i].tid == tid;
	return n;
}

/* Records of the given type and another tid, or pid; *first: the first tid. */
static inline int count_other(const struct ring *r, __u32 type, __u32 tid, __u32 pid,
			      __u32 *first)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *rr = &r->rec[i];

		if (rr->type != type || (rr->tid == tid && rr->pid == pid))
			continue;
		if (!n++)
			*first = rr->tid;
	}
	return n;
}

static inline int count_type(const struct ring *r, __u32 type)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		n += r->rec[i].type == type;
	return n;
}

static inline bool in_list(__u64 v, const __u64 *list, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (list[i] == v)
			return true;
	return false;
}

/* How the samples of one tid joined with the records of their cookies. */
struct join {
	int samples;	/* of the tid */
	int kernel;	/* ... taken in kernel mode */
	int user;	/* ... taken in user mode: walked in place */
	int bad_user;	/* ... of those, with a cookie or no user part in place */
	int deferred;	/* ... with a cookie */
	int joined;	/* ... whose cookie has one record, of the same tid */
	int excused;	/* ... whose cookie has none, allowed */
	int bad;	/* ... whose cookie has none, several, or another tid's */
	char msg[160];
	char user_msg[160];
};

/*
 * Whether r's buffer dropped records: a PERF_RECORD_LOST tells, and so does
 * the kernel's count (PERF_FORMAT_LOST) of those dropped when the buffer
 * was full until the event was disabled, with no record after them.
 */
static inline bool ring_lost_records(const struct ring *r)
{
	return count_type(r, PERF_RECORD_LOST) ||
	       (r->read_format == PERF_FORMAT_LOST && lost_count(r->fd));
}

/*
 * Join the samples of tid with the records of their cookies: one record per
 * cookie and buffer, with the sample's tid. A cookie may have no record if
 * it is in excuse[] (the stay sampling stopped in, ...), or if lost_ok and
 * the buffer lost records. A sample taken in user mode joins nothing: it
 * has cookie 0 and its user stack walked in place (PERF_CONTEXT_USER
 * first, then at least its ip).
 */
static inline struct join join_tid(const struct ring *r, __u32 tid, const __u64 *excuse,
				   int nr_excuse, bool lost_ok)
{
	bool lost = lost_ok && ring_lost_records(r);
	struct join j = { 0 };
	size_t i, k;

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *s = &r->rec[i];
		__u32 other_tid = 0;
		int n = 0, other = 0;
		__u64 nr;

		if (s->type != PERF_RECORD_SAMPLE || s->tid != tid)
			continue;
		j.samples++;
		j.kernel += taken_in_kernel_mode(s);
		if (taken_in_user_mode(s)) {
			j.user++;
			if ((s->cookie || !user_mode_walk(s, &nr) || !nr) &&
			    !j.bad_user++)
				snprintf(j.user_msg, sizeof(j.user_msg),
					 "sample %zu at ip %#llx: cookie %#llx, %llu ips, ips[0] %#llx",
					 i, (unsigned long long)s->ip,
					 (unsigned long long)s->cookie,
					 (unsigned long long)s->nr,
					 s->nr ? (unsigned long long)s->ips[0] : 0ULL);
		}
		if (!s->cookie)
			continue;
		j.deferred++;
		for (k = 0; k < r->nr_rec; k++) {
			const struct ring_record *c = &r->rec[k];

			if (c->type != PERF_RECORD_CALLCHAIN_DEFERRED ||
			    c->cookie != s->cookie)
				continue;
			n++;
			if (c->tid != tid) {
				other++;
				other_tid = c->tid;
			}
		}
		if (n == 1 && !other) {
			j.joined++;
			continue;
		}
		if (!n && (lost || in_list(s->cookie, excuse, nr_excuse))) {
			j.excused++;
			continue;
		}
		if (!j.bad++)
			snprintf(j.msg, sizeof(j.msg),
				 "sample %zu, cookie %#llx: %d records, %d of another tid (%u)",
				 i, (unsigned long long)s->cookie, n, other, other_tid);
	}
	return j;
}

static inline void expect_joined(struct __test_metadata *_metadata, const char *what,
				 __u32 tid, const struct join *j)
{
	EXPECT_EQ(0, j->bad_user)
		TH_LOG("%s: want tid %u's user-mode samples walked in place, %d of %d not (%s)",
		       what, tid, j->bad_user, j->user, j->user_msg);
	EXPECT_EQ(0, j->bad)
		TH_LOG("%s: want 1 record of tid %u per cookie, %d of %d had not (first: %s)",
		       what, tid, j->bad, j->deferred, j->msg);
	EXPECT_LE(1, j->joined)
		TH_LOG("%s: expected samples of tid %u joined with their records, none of %d",
		       what, tid, j->deferred);
}

/* Drains the nr rings r[] until each holds WANT_SAMPLES, for RUN_SECONDS at most. */
static inline void drain_until_sampled(struct ring *r, int nr)
{
	double deadline = ring_now() + RUN_SECONDS;

	while (ring_now() < deadline) {
		bool enough = true;
		int i;

		usleep(2000);
		for (i = 0; i < nr; i++) {
			ring_drain(&r[i]);
			enough = enough && r[i].nr_samples >= WANT_SAMPLES;
		}
		if (enough)
			break;
	}
}

/*
 * Wait until the child has exited, without reaping it: a task's pid is
 * released when its parent reaps it, and samples it takes after that (it
 * still runs a little) carry tid -1. Tests disable their events in between.
 * The nr rings r[] are drained meanwhile: an exit under KASAN is sampled
 * hundreds of times, and a full buffer would drop the last records.
 */
static inline void wait_exited(pid_t child, struct ring *r, int nr)
{
	double deadline = ring_now() + 10;
	siginfo_t info;
	int i;

	do {
		memset(&info, 0, sizeof(info));
		if (!waitid(P_PID, child, &info, WEXITED | WNOWAIT | WNOHANG) &&
		    info.si_pid == child)
			return;
		usleep(1000);
		for (i = 0; i < nr; i++)
			ring_drain(&r[i]);
	} while (ring_now() < deadline);
}

/* Reap child within a few seconds, or kill it; returns its wait status. */

static inline int reap(pid_t child)
{
	double deadline = ring_now() + 10;
	int status = -1;

	while (waitpid(child, &status, WNOHANG) != child) {
		if (ring_now() > deadline) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			return -1;
		}
		usleep(1000);
	}
	return status;
}

#endif /* DEFERRED_OBSERVE_H */
