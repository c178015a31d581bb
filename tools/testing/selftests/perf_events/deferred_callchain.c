// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED at work: the cookies of samples and the
 * PERF_RECORD_CALLCHAIN_DEFERRED records that carry their user stacks,
 * checked against a call chain whose return addresses the test records
 * itself. Build with frame pointers and no sibling calls (see Makefile).
 *
 * Built 64-bit, and 32-bit as deferred_callchain_32, a compat task: its
 * frames are 4-byte words, and the records carry its 32-bit addresses
 * zero-extended. Pointers are checked as truth values (ASSERT_FALSE(!p)):
 * the harness would print them as 64-bit integers.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"

#define SAMPLE_PERIOD_NS	200000	/* cpu-clock / task-clock period */
#define DATA_PAGES		64
#define WANT_SAMPLES		200
#define RUN_SECONDS		4.0	/* one sampled run, at most */
#define READ_NS			10000000 /* each readv() of the chain: ~10 ms */
#define MIN_READ		(64 << 10)
#define MAX_READ		(1024 << 20)
#define MAX_BUF			(4 << 20)	/* readv() reuses it */
#define CAL_READ		(1024 * 1024)
#define CHAIN_DEPTH		5
#define PF_KTHREAD		0x00200000

enum chain_end {
	CHAIN_RETURN,
	CHAIN_EXIT,		/* exit_group() from inside the chain */
	CHAIN_EXEC,		/* execve() from inside the chain */
};

/*
 * The call chain under test: chain_run -> chain_f1 -> chain_f2 -> chain_f3,
 * and chain_f3 reads /dev/zero (a long system call, readv() of len bytes)
 * until done.
 */
struct chain {
	int zero_fd;
	char *buf;
	size_t len;			/* bytes per readv(), ~READ_NS each */
	struct iovec *iov;		/* len bytes, all into buf */
	int iovcnt;
	struct ring *rings[2];		/* drained between reads */
	int nr_rings;
	size_t *shared_samples;	/* counted by another process */
	size_t want_samples;
	double deadline;
	int lost_fd;			/* >= 0: stop once samples are lost */
	enum chain_end end;
	char *exec_path;
	char **exec_argv;
	char **exec_envp;
	/*
	 * Filled by the chain: expect[0] is the user IP after the readv()
	 * system call, expect[1..4] the return addresses of chain_f3,
	 * chain_f2, chain_f1 and chain_run, i.e. the stack a walk from
	 * inside readv() must see.
	 */
	unsigned long expect[CHAIN_DEPTH];
	unsigned long exec_ret;		/* user IP after execve() */
	unsigned long exit_ret;		/* user IP after exit_group() */
	unsigned long spin_start, spin_end; /* the user-mode spin loop */
	long reads;
	long min_reads;			/* before the deadline may end it */
};

static const char * const frame_name[CHAIN_DEPTH] = {
	"the readv() system call", "chain_f3", "chain_f2", "chain_f1", "chain_run",
};

static bool chain_done(struct chain *c)
{
	size_t samples = 0;
	int i;

	for (i = 0; i < c->nr_rings; i++) {
		ring_drain(c->rings[i]);
		samples += c->rings[i]->nr_samples;
	}
	if (c->shared_samples)
		samples = __atomic_load_n(c->shared_samples, __ATOMIC_RELAXED);
	if (c->lost_fd >= 0 && lost_count(c->lost_fd) >= 20)
		return true;
	return (samples >= c->want_samples || ring_now() > c->deadline) &&
	       c->reads >= c->min_reads;
}

static __attribute__((noipa)) void chain_f3(struct chain *c)
{
	c->expect[1] = (unsigned long)__builtin_return_address(0);
	do {
		raw_syscall(c->expect[0], __NR_readv, c->zero_fd, c->iov,
			    c->iovcnt, 0, 0, 0);
		c->reads++;
	} while (!chain_done(c));

	if (c->end == CHAIN_EXEC)
		raw_syscall(c->exec_ret, __NR_execve, c->exec_path, c->exec_argv,
			    c->exec_envp, 0, 0, 0);
	if (c->end != CHAIN_RETURN)
		raw_syscall(c->exit_ret, __NR_exit_group,
			    c->end == CHAIN_EXEC ? 127 : 0, 0, 0, 0, 0, 0);
}

static __attribute__((noipa)) void chain_f2(struct chain *c)
{
	c->expect[2] = (unsigned long)__builtin_return_address(0);
	chain_f3(c);
}

static __attribute__((noipa)) void chain_f1(struct chain *c)
{
	c->expect[3] = (unsigned long)__builtin_return_address(0);
	chain_f2(c);
}

static __attribute__((noipa)) void chain_run(struct chain *c)
{
	c->expect[4] = (unsigned long)__builtin_return_address(0);
	chain_f1(c);
}

/* Spin in user mode, in a loop whose code range the test knows. */
static __attribute__((noipa)) void spin_user(struct chain *c, unsigned long loops)
{
	c->expect[1] = (unsigned long)__builtin_return_address(0);
	do {
		unsigned long n = loops;

#ifdef __x86_64__
		asm volatile("lea 1f(%%rip), %%rcx\n\t"
			     "mov %%rcx, %1\n\t"
			     "lea 2f(%%rip), %%rcx\n\t"
			     "mov %%rcx, %2\n"
			     "1:\tdec %0\n\t"
			     "jnz 1b\n"
			     "2:"
			     : "+r" (n), "=m" (c->spin_start), "=m" (c->spin_end)
			     : : "rcx", "cc");
#else
		/* i386: no absolute label addresses in PIC, a call gives them. */
		asm volatile("call 3f\n"
			     "3:\tpop %%ecx\n\t"
			     "add $1f-3b, %%ecx\n\t"
			     "mov %%ecx, %1\n\t"
			     "add $2f-1f, %%ecx\n\t"
			     "mov %%ecx, %2\n"
			     "1:\tdec %0\n\t"
			     "jnz 1b\n"
			     "2:"
			     : "+r" (n), "=m" (c->spin_start), "=m" (c->spin_end)
			     : : "ecx", "cc");
#endif
	} while (!chain_done(c));
}

/*
 * Size the chain's readv() so that one call takes about READ_NS: several
 * samples per kernel stay, on a fast machine as under emulation.
 */
static void chain_init(struct __test_metadata *_metadata, struct chain *c,
		       size_t want_samples)
{
	size_t chunk;
	double t;
	char *cal;
	int i;

	memset(c, 0, sizeof(*c));
	c->lost_fd = -1;
	c->want_samples = want_samples;
	c->zero_fd = open("/dev/zero", O_RDONLY);
	ASSERT_LE(0, c->zero_fd) TH_LOG("/dev/zero: %s", strerror(errno));

	cal = malloc(CAL_READ);
	ASSERT_FALSE(!cal);
	memset(cal, 1, CAL_READ);
	ASSERT_EQ(CAL_READ, read(c->zero_fd, cal, CAL_READ));
	t = ring_now();
	ASSERT_EQ(CAL_READ, read(c->zero_fd, cal, CAL_READ));
	t = ring_now() - t;
	free(cal);

	c->len = t > 0 ? CAL_READ * (READ_NS / 1e9) / t : MAX_READ;
	if (c->len < MIN_READ)
		c->len = MIN_READ;
	if (c->len > MAX_READ)
		c->len = MAX_READ;
	chunk = c->len < MAX_BUF ? c->len : MAX_BUF;
	c->iovcnt = c->len / chunk;
	c->len = c->iovcnt * chunk;
	c->buf = malloc(chunk);
	c->iov = calloc(c->iovcnt, sizeof(*c->iov));
	ASSERT_FALSE(!c->buf);
	ASSERT_FALSE(!c->iov);
	memset(c->buf, 1, chunk);	/* no page faults while sampled */
	for (i = 0; i < c->iovcnt; i++) {
		c->iov[i].iov_base = c->buf;
		c->iov[i].iov_len = chunk;
	}
}

static void chain_fini(struct chain *c)
{
	free(c->iov);
	free(c->buf);
	close(c->zero_fd);
}

static struct perf_event_attr clock_attr(__u64 config, bool deferred)
{
	return sw_sample_attr(config, SAMPLE_PERIOD_NS, deferred);
}

/* Sample the chain in this thread with the events behind rings[]. */
static void sample_chain(struct __test_metadata *_metadata, struct chain *c,
			 struct ring **rings, int nr_rings)
{
	int i;

	c->nr_rings = nr_rings;
	for (i = 0; i < nr_rings; i++) {
		c->rings[i] = rings[i];
		ASSERT_EQ(0, ioctl(rings[i]->fd, PERF_EVENT_IOC_ENABLE, 0));
	}
	c->deadline = ring_now() + RUN_SECONDS;
	chain_run(c);
	for (i = 0; i < nr_rings; i++) {
		ASSERT_EQ(0, ioctl(rings[i]->fd, PERF_EVENT_IOC_DISABLE, 0));
		ring_drain(rings[i]);
		EXPECT_EQ(0, rings[i]->nr_malformed)
			TH_LOG("expected well-formed records, saw %s",
			       rings[i]->why);
	}
	c->nr_rings = 0;
}

/* How a set of samples of one thread and their records turned out. */
struct cookie_stats {
	int samples;
	int kernel;		/* taken in kernel mode */
	int user;		/* taken in user mode: walked in place */
	int deferred;		/* cookie != 0 */
	int cookies;		/* distinct cookies */
	int max_per_cookie;	/* most samples sharing one cookie */
	int inline_walk;	/* kernel mode, cookie 0, the stay's walk inline */
};

enum {
	ALL_DEFERRED	= 1,	/* every kernel-mode sample has a cookie, or its stay's walk */
	RECORD_AFTER	= 2,	/* a record follows the first sample of its cookie */
};

/* Whether record rec of tid carries nr user ips, or more, starting with ips. */
static bool record_has_stack(const struct ring_record *rec, pid_t tid,
			     const __u64 *ips, __u64 nr)
{
	/* The sample's own max stack may cut it shorter, to nothing. */
	return rec->type == PERF_RECORD_CALLCHAIN_DEFERRED &&
	       rec->tid == (__u32)tid && nr <= rec->nr &&
	       !memcmp(rec->ips, ips, nr * sizeof(__u64));
}

/* Whether record j is a PERF_RECORD_CALLCHAIN_DEFERRED of tid. */
static bool is_record_of(const struct ring *r, size_t j, pid_t tid)
{
	return r->rec[j].type == PERF_RECORD_CALLCHAIN_DEFERRED &&
	       r->rec[j].tid == (__u32)tid;
}

/*
 * Whether a PERF_RECORD_LOST lies between the record of tid before
 * sample i and the one after it: the stay of sample i may have lost its
 * record there (the kernel reports the loss at its next write, before or
 * after the sample).
 */
static bool loss_near(const struct ring *r, size_t i, pid_t tid)
{
	size_t j;

	for (j = i; j-- > 0 && !is_record_of(r, j, tid);)
		if (r->rec[j].type == PERF_RECORD_LOST)
			return true;
	for (j = i + 1; j < r->nr_rec && !is_record_of(r, j, tid); j++)
		if (r->rec[j].type == PERF_RECORD_LOST)
			return true;
	return false;
}

/*
 * Whether sample i of tid, taken in the kernel with cookie 0, carries the
 * walk of its stay inline: the user part of its callchain is the stack of
 * the next record of tid (or its start). So are the samples that came
 * after the stay's walk but before its record reached their buffer (an
 * interrupt of the deferred work itself, writing the records).
 *
 * When the stay's own record was lost (a loss near the sample), the
 * samples of the stay after its walk carry that walk: then the stack
 * must be one that a record of tid carries, before or after the sample.
 */
static bool carries_stays_walk(const struct ring *r, size_t i, pid_t tid)
{
	const struct ring_record *s = &r->rec[i];
	__u64 k, nr;
	size_t j;

	for (k = 0; k < s->nr && s->ips[k] != PERF_CONTEXT_USER; k++)
		;
	if (k == s->nr)
		return false;
	nr = s->nr - k - 1;
	for (j = i + 1; j < r->nr_rec; j++) {
		if (!is_record_of(r, j, tid))
			continue;
		if (record_has_stack(&r->rec[j], tid, &s->ips[k + 1], nr))
			return true;
		break;
	}
	if (!loss_near(r, i, tid))
		return false;
	for (j = 0; j < r->nr_rec; j++)
		if (record_has_stack(&r->rec[j], tid, &s->ips[k + 1], nr))
			return true;
	return false;
}

/*
 * The core promise: every cookie a sample of tid carries is well formed,
 * and the buffer holds exactly one record with it, for that tid, with
 * PERF_RECORD_MISC_USER. Samples with a cookie have no inline user part.
 * The one exception is the stay in which sampling stopped: the event was
 * disabled (or closed) before that stay's walk ran, and a disabled event
 * gets nothing (SPEC.md). A sample taken in the kernel after its stay's
 * walk, before the record reached its buffer, has cookie 0 and the walk
 * inline (carries_stays_walk()).
 *
 * A sample taken in user mode has no kernel stay to share a walk with: it
 * is never deferred, whatever the flags. Its cookie is 0 and its callchain
 * the user stack walked in place, from the sample's own ip.
 */
static struct cookie_stats check_cookies(struct __test_metadata *_metadata,
					 const struct ring *r, pid_t tid, int flags)
{
	struct cookie_stats st = { 0 };
	int bad_zero = 0, bad_format = 0, bad_user = 0, bad_count = 0;
	int bad_tid = 0, bad_misc = 0, bad_order = 0;
	int bad_user_cookie = 0, bad_user_walk = 0;
	char zero_msg[128] = "", format_msg[128] = "", user_msg[128] = "";
	char count_msg[128] = "", tid_msg[128] = "", misc_msg[128] = "";
	char order_msg[128] = "", user_cookie_msg[128] = "";
	char user_walk_msg[160] = "";
	__u64 stopped = last_cookie(r, tid);
	int lost = 0, missing = 0;
	size_t i, j;

	for (i = 0; i < r->nr_rec; i++)
		lost += r->rec[i].type == PERF_RECORD_LOST;

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *s = &r->rec[i];
		const __u64 *ips;
		size_t n, rec = 0;
		const char *why;
		int shared = 0;
		bool seen = false;
		__u64 nr;

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)tid)
			continue;
		st.samples++;
		if (taken_in_user_mode(s)) {
			st.user++;
			if (s->cookie && !bad_user_cookie++)
				snprintf(user_cookie_msg, sizeof(user_cookie_msg),
					 "sample %zu at ip %#llx, cookie %#llx", i,
					 (unsigned long long)s->ip,
					 (unsigned long long)s->cookie);
			ips = user_mode_walk(s, &nr);
			if ((!nr || ips[0] != s->ip) && !bad_user_walk++)
				snprintf(user_walk_msg, sizeof(user_walk_msg),
					 "sample %zu at ip %#llx: %llu ips, ips[0] %#llx, user ips[0] %#llx",
					 i, (unsigned long long)s->ip,
					 (unsigned long long)s->nr,
					 s->nr ? (unsigned long long)s->ips[0] : 0ULL,
					 nr ? (unsigned long long)ips[0] : 0ULL);
		} else if (taken_in_kernel_mode(s)) {
			st.kernel++;
			if (!s->cookie && (flags & ALL_DEFERRED) &&
			    carries_stays_walk(r, i, tid))
				st.inline_walk++;
			else if (!s->cookie && (flags & ALL_DEFERRED) && !bad_zero++)
				snprintf(zero_msg, sizeof(zero_msg),
					 "sample %zu at ip %#llx", i,
					 (unsigned long long)s->ip);
		}
		if (!s->cookie)
			continue;
		st.deferred++;
		if (has_user_context(s) && !bad_user++)
			snprintf(user_msg, sizeof(user_msg),
				 "cookie %#llx", (unsigned long long)s->cookie);

		/* Look at each cookie once, at its first sample. */
		for (j = 0; j < i && !seen; j++)
			seen = r->rec[j].type == PERF_RECORD_SAMPLE &&
			       r->rec[j].tid == (__u32)tid &&
			       r->rec[j].cookie == s->cookie;
		if (seen)
			continue;
		st.cookies++;
		for (j = i; j < r->nr_rec; j++)
			shared += r->rec[j].type == PERF_RECORD_SAMPLE &&
				  r->rec[j].tid == (__u32)tid &&
				  r->rec[j].cookie == s->cookie;
		if (shared > st.max_per_cookie)
			st.max_per_cookie = shared;

		why = cookie_problem(s->cookie);
		if (why && !bad_format++)
			snprintf(format_msg, sizeof(format_msg), "cookie %#llx: %s",
				 (unsigned long long)s->cookie, why);

		n = records_of_cookie(r, s->cookie, &rec);
		if (!n && s->cookie == stopped)
			continue;
		/* The buffer overflowed: a missing record may be a lost one. */
		if (!n && lost) {
			missing++;
			continue;
		}
		if (n != 1) {
			if (!bad_count++)
				snprintf(count_msg, sizeof(count_msg),
					 "cookie %#llx has %zu records",
					 (unsigned long long)s->cookie, n);
			if (!n)
				continue;
		}
		if (r->rec[rec].tid != (__u32)tid && !bad_tid++)
			snprintf(tid_msg, sizeof(tid_msg),
				 "cookie %#llx: record of tid %u",
				 (unsigned long long)s->cookie, r->rec[rec].tid);
		if ((r->rec[rec].misc & PERF_RECORD_MISC_CPUMODE_MASK) !=
		    PERF_RECORD_MISC_USER && !bad_misc++)
			snprintf(misc_msg, sizeof(misc_msg), "misc %#x",
				 r->rec[rec].misc);
		/* Unless its first sample was lost. */
		if ((flags & RECORD_AFTER) && rec < i && !lost && !bad_order++)
			snprintf(order_msg, sizeof(order_msg),
				 "cookie %#llx: record %zu, first sample %zu",
				 (unsigned long long)s->cookie, rec, i);
	}

	if (missing)
		TH_LOG("%d cookies without a record, with %d PERF_RECORD_LOST in the buffer",
		       missing, lost);
	EXPECT_EQ(0, bad_zero)
		TH_LOG("want a cookie on kernel-mode samples of tid %d, %d of %d had 0 (first: %s)",
		       tid, bad_zero, st.kernel, zero_msg);
	EXPECT_EQ(0, bad_user_cookie)
		TH_LOG("want cookie 0 on user-mode samples of tid %d, %d of %d had one (first: %s)",
		       tid, bad_user_cookie, st.user, user_cookie_msg);
	EXPECT_EQ(0, bad_user_walk)
		TH_LOG("want user-mode samples walked in place from their ip, %d of %d not (%s)",
		       bad_user_walk, st.user, user_walk_msg);
	EXPECT_EQ(0, bad_format)
		TH_LOG("want cookie = odd << 32 | cpu+1, %d were not (first: %s)",
		       bad_format, format_msg);
	EXPECT_EQ(0, bad_user)
		TH_LOG("want no inline user part with a cookie, %d had it (%s)",
		       bad_user, user_msg);
	EXPECT_EQ(0, bad_count)
		TH_LOG("want 1 record per cookie, %d of %d differ (first: %s)",
		       bad_count, st.cookies, count_msg);
	EXPECT_EQ(0, bad_tid)
		TH_LOG("expected records with the sample's tid %d, %d were not (first: %s)",
		       tid, bad_tid, tid_msg);
	EXPECT_EQ(0, bad_misc)
		TH_LOG("expected records with PERF_RECORD_MISC_USER, %d were not (first: %s)",
		       bad_misc, misc_msg);
	EXPECT_EQ(0, bad_order)
		TH_LOG("want records after their first sample, %d not (%s)",
		       bad_order, order_msg);
	return st;
}

/*
 * Records of tid whose walk started at the chain's readv(): ips[0..depth)
 * must be the chain's own frames. Returns how many there were.
 */
static int check_chain_records(struct __test_metadata *_metadata,
			       const struct ring *r, pid_t tid,
			       const struct chain *c, __u64 depth)
{
	int found = 0, bad = 0;
	char msg[200] = "";
	size_t i;
	__u64 k;

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *rr = &r->rec[i];

		if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED ||
		    rr->tid != (__u32)tid || !rr->nr || rr->ips[0] != c->expect[0])
			continue;
		found++;
		if (rr->nr < depth) {
			if (!bad++)
				snprintf(msg, sizeof(msg),
					 "cookie %#llx: %llu ips, expected at least %llu",
					 (unsigned long long)rr->cookie,
					 (unsigned long long)rr->nr,
					 (unsigned long long)depth);
			continue;
		}
		for (k = 1; k < depth; k++) {
			if (rr->ips[k] == c->expect[k])
				continue;
			if (!bad++)
				snprintf(msg, sizeof(msg),
					 "cookie %#llx: ips[%llu] expected %#lx (return address of %s), seen %#llx",
					 (unsigned long long)rr->cookie,
					 (unsigned long long)k, c->expect[k],
					 frame_name[k], (unsigned long long)rr->ips[k]);
			break;
		}
	}
	EXPECT_LE(1, found)
		TH_LOG("want records with ips[0] = readv()'s user IP %#lx, saw none (%ld readvs)",
		       c->expect[0], c->reads);
	/* What the records of tid started at instead. */
	for (i = 0, k = 0; !found && i < r->nr_rec && k < 3; i++) {
		const struct ring_record *rr = &r->rec[i];
		size_t j, samples = 0;

		if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED ||
		    rr->tid != (__u32)tid)
			continue;
		for (j = 0; j < r->nr_rec; j++)
			samples += r->rec[j].type == PERF_RECORD_SAMPLE &&
				   r->rec[j].cookie == rr->cookie;
		k++;
		TH_LOG("record %zu of tid %d: cookie %#llx, %zu samples, %llu ips, ips[0] %#llx",
		       i, tid, (unsigned long long)rr->cookie, samples,
		       (unsigned long long)rr->nr,
		       rr->nr ? (unsigned long long)rr->ips[0] : 0ULL);
	}
	EXPECT_EQ(0, bad)
		TH_LOG("%d of %d records of the chain differ from its own frames; first: %s",
		       bad, found, msg);
	return found;
}

TEST(known_chain_in_long_syscalls)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	struct cookie_stats st;
	struct ring r, *rp = &r;
	struct chain c;

	chain_init(_metadata, &c, WANT_SAMPLES);
	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	sample_chain(_metadata, &c, &rp, 1);

	st = check_cookies(_metadata, &r, gettid_(), ALL_DEFERRED | RECORD_AFTER);
	ASSERT_LE(10, st.samples)
		TH_LOG("expected at least 10 samples, saw %d in %ld reads of %zu bytes",
		       st.samples, c.reads, c.len);
	EXPECT_LE(2, st.max_per_cookie)
		TH_LOG("want several samples per readv() of %zu B, max %d in %d cookies",
		       c.len, st.max_per_cookie, st.cookies);
	check_chain_records(_metadata, &r, gettid_(), &c, CHAIN_DEPTH);
	TH_LOG("%d samples, %d cookies, up to %d samples per cookie, %ld reads of %zu bytes",
	       st.samples, st.cookies, st.max_per_cookie, c.reads, c.len);

	close_ring(&r);
	chain_fini(&c);
}

/* Does a kernel-mode sample of tid carry cookie? */
static bool kernel_sample_with(const struct ring *r, pid_t tid, __u64 cookie)
{
	size_t i;

	for (i = 0; i < r->nr_rec; i++)
		if (r->rec[i].type == PERF_RECORD_SAMPLE &&
		    r->rec[i].tid == (__u32)tid && r->rec[i].cookie == cookie &&
		    taken_in_kernel_mode(&r->rec[i]))
			return true;
	return false;
}

/*
 * A sample taken in user mode has no kernel stay whose walk it could share:
 * deferring it would cost the deferred work and a record on top of the
 * same walk. It is walked in place (cookie 0), from its own ip, and a task
 * spinning in user mode gets no records but those of its few kernel-mode
 * samples (interrupts, page faults).
 */
TEST(user_mode_samples_are_walked_in_place)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	int user = 0, in_loop = 0, bad_cookie = 0, bad_chain = 0, bad_ip = 0;
	int bad_caller = 0, records = 0, orphans = 0, lost = 0;
	char cookie_msg[128] = "", chain_msg[128] = "", ip_msg[160] = "";
	char caller_msg[160] = "", orphan_msg[128] = "";
	unsigned long loops = 1000000;
	pid_t tid = gettid_();
	struct cookie_stats st;
	struct chain c;
	struct ring r;
	double t;
	size_t i;

	chain_init(_metadata, &c, WANT_SAMPLES);
	c.deadline = ring_now() + 60;
	c.want_samples = 0;
	t = ring_now();
	spin_user(&c, loops);		/* one round, to size the loop: ~5 ms */
	t = ring_now() - t;
	if (t > 0)
		loops = loops * 0.005 / t + 1;

	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	c.rings[0] = &r;
	c.nr_rings = 1;
	c.want_samples = WANT_SAMPLES;
	c.deadline = ring_now() + RUN_SECONDS;
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
	spin_user(&c, loops);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);

	st = check_cookies(_metadata, &r, tid, ALL_DEFERRED | RECORD_AFTER);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *s = &r.rec[i];
		const __u64 *ips;
		__u64 nr;

		lost += s->type == PERF_RECORD_LOST ||
			s->type == PERF_RECORD_LOST_SAMPLES;
		/*
		 * Only a kernel-mode sample asks for a walk. The stay that
		 * sampling stopped in gets no record (a disabled event gets
		 * nothing), so it needs no excuse here.
		 */
		if (s->type == PERF_RECORD_CALLCHAIN_DEFERRED) {
			records++;
			if (!kernel_sample_with(&r, tid, s->cookie) && !orphans++)
				snprintf(orphan_msg, sizeof(orphan_msg),
					 "record %zu of tid %u, cookie %#llx",
					 i, s->tid, (unsigned long long)s->cookie);
			continue;
		}
		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)tid ||
		    !taken_in_user_mode(s))
			continue;
		user++;
		if (s->cookie && !bad_cookie++)
			snprintf(cookie_msg, sizeof(cookie_msg),
				 "ip %#llx, cookie %#llx",
				 (unsigned long long)s->ip,
				 (unsigned long long)s->cookie);
		/* PERF_CONTEXT_USER first: no kernel ips before the user part. */
		ips = user_mode_walk(s, &nr);
		if (!ips) {
			if (!bad_chain++)
				snprintf(chain_msg, sizeof(chain_msg),
					 "ip %#llx: ips[0] = %#llx of %llu",
					 (unsigned long long)s->ip,
					 s->nr ? (unsigned long long)s->ips[0] : 0ULL,
					 (unsigned long long)s->nr);
			continue;
		}
		/* The walk starts where this very interrupt came. */
		if ((!nr || ips[0] != s->ip) && !bad_ip++)
			snprintf(ip_msg, sizeof(ip_msg),
				 "sample ip %#llx, user ips[0] %#llx of %llu",
				 (unsigned long long)s->ip,
				 nr ? (unsigned long long)ips[0] : 0ULL,
				 (unsigned long long)nr);
		if (s->ip < c.spin_start || s->ip > c.spin_end)
			continue;
		in_loop++;
		if ((nr < 2 || ips[1] != c.expect[1]) && !bad_caller++)
			snprintf(caller_msg, sizeof(caller_msg),
				 "ip %#llx: ips[1] expected %#lx, seen %#llx of %llu",
				 (unsigned long long)s->ip, c.expect[1],
				 nr > 1 ? (unsigned long long)ips[1] : 0ULL,
				 (unsigned long long)nr);
	}
	ASSERT_LE(10, user)
		TH_LOG("expected at least 10 user-mode samples while spinning, saw %d",
		       user);
	EXPECT_EQ(0, bad_cookie)
		TH_LOG("want cookie 0 on user-mode samples, %d of %d had one (first: %s)",
		       bad_cookie, user, cookie_msg);
	EXPECT_EQ(0, bad_chain)
		TH_LOG("want PERF_CONTEXT_USER first in user-mode samples, %d of %d not (%s)",
		       bad_chain, user, chain_msg);
	EXPECT_EQ(0, bad_ip)
		TH_LOG("want user ips[0] == the user-mode sample's ip, %d of %d differ (first: %s)",
		       bad_ip, user, ip_msg);
	EXPECT_LE(1, in_loop)
		TH_LOG("want samples in the spin loop [%#lx, %#lx], none of %d",
		       c.spin_start, c.spin_end, user);
	EXPECT_EQ(0, bad_caller)
		TH_LOG("expected ips[1] == spin_user's return address, %d of %d differ (first: %s)",
		       bad_caller, in_loop, caller_msg);
	/* A lost sample may be the one that asked for a record. */
	if (!lost)
		EXPECT_EQ(0, orphans)
			TH_LOG("want records for kernel-mode samples only, %d of %d not (%s)",
			       orphans, records, orphan_msg);
	TH_LOG("%d samples: %d in user mode, %d in the kernel (%d cookies); %d records",
	       st.samples, st.user, st.kernel, st.cookies, records);

	close_ring(&r);
	chain_fini(&c);
}

TEST(inline_and_deferred_agree)
{
	unsigned long expect[2][CHAIN_DEPTH];
	const __u64 *walk[2] = { NULL, NULL };
	__u64 walk_nr[2] = { 0, 0 }, k;
	int found[2] = { 0, 0 }, bad[2] = { 0, 0 };
	char msg[2][200] = { "", "" };
	pid_t tid = gettid_();
	struct ring r[2];
	struct chain c;
	int mode;
	size_t i;

	chain_init(_metadata, &c, WANT_SAMPLES);
	/* mode 0 deferred, mode 1 inline: the same call site, the same stack */
	for (mode = 0; mode < 2; mode++) {
		struct perf_event_attr attr =
			clock_attr(PERF_COUNT_SW_CPU_CLOCK, mode == 0);
		struct ring *rp = &r[mode];

		open_ring(_metadata, &r[mode], &attr, 0, -1, DATA_PAGES);
		sample_chain(_metadata, &c, &rp, 1);
		memcpy(expect[mode], c.expect, sizeof(c.expect));
	}
	ASSERT_EQ(0, memcmp(expect[0], expect[1], sizeof(expect[0])))
		TH_LOG("the two runs of the chain did not have the same frames");

	for (mode = 0; mode < 2; mode++) {
		for (i = 0; i < r[mode].nr_rec; i++) {
			const struct ring_record *rr = &r[mode].rec[i];
			const __u64 *ips;
			__u64 nr;

			if (rr->tid != (__u32)tid)
				continue;
			if (mode == 0 && rr->type == PERF_RECORD_CALLCHAIN_DEFERRED) {
				ips = rr->ips;
				nr = rr->nr;
			} else if (mode == 1 && rr->type == PERF_RECORD_SAMPLE &&
				   inline_user_part(rr, &ips, &nr)) {
				/* nothing */
			} else {
				continue;
			}
			if (!nr || ips[0] != c.expect[0])
				continue;
			if (!found[mode]++) {
				walk[mode] = ips;
				walk_nr[mode] = nr;
			}
			for (k = 0; k < CHAIN_DEPTH; k++) {
				if (k < nr && ips[k] == c.expect[k])
					continue;
				if (!bad[mode]++)
					snprintf(msg[mode], sizeof(msg[mode]),
						 "ips[%llu] expected %#lx (%s), seen %#llx of %llu",
						 (unsigned long long)k, c.expect[k],
						 frame_name[k],
						 k < nr ? (unsigned long long)ips[k] : 0ULL,
						 (unsigned long long)nr);
				break;
			}
		}
	}
	EXPECT_LE(1, found[0])
		TH_LOG("expected deferred records starting at the readv() IP %#lx, saw none",
		       c.expect[0]);
	EXPECT_LE(1, found[1])
		TH_LOG("expected inline user callchains starting at the readv() IP %#lx, saw none",
		       c.expect[0]);
	EXPECT_EQ(0, bad[0])
		TH_LOG("deferred walk: %d of %d records differ from the chain; first: %s",
		       bad[0], found[0], msg[0]);
	EXPECT_EQ(0, bad[1])
		TH_LOG("inline walk: %d of %d samples differ from the chain; first: %s",
		       bad[1], found[1], msg[1]);

	/* Beyond the chain, the two walks see the same stack, too. */
	if (walk[0] && walk[1]) {
		__u64 n = walk_nr[0] < walk_nr[1] ? walk_nr[0] : walk_nr[1];

		for (k = 0; k < n; k++)
			if (walk[0][k] != walk[1][k])
				break;
		EXPECT_EQ(n, k)
			TH_LOG("frame %llu: deferred walk %#llx, inline walk %#llx",
			       (unsigned long long)k,
			       (unsigned long long)walk[0][k],
			       (unsigned long long)walk[1][k]);
		TH_LOG("deferred walk %llu frames, inline walk %llu frames",
		       (unsigned long long)walk_nr[0],
		       (unsigned long long)walk_nr[1]);
	}

	close_ring(&r[0]);
	close_ring(&r[1]);
	chain_fini(&c);
}

/* A thread that blocks twice in one recvfrom(MSG_WAITALL) of 2 bytes. */
struct blocker {
	int sock;
	int cpu;		/* where it starts */
	pid_t tid;
	int go;
	long ret;
	unsigned long recv_ret;	/* user IP after its recvfrom() */
};

static void *blocker_main(void *arg)
{
	struct blocker *b = arg;
	char buf[2];
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(b->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		b->ret = -errno;
		__atomic_store_n(&b->tid, -1, __ATOMIC_RELEASE);
		return NULL;
	}
	__atomic_store_n(&b->tid, gettid_(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
		asm volatile("pause" ::: "memory");
	/* No address: the kernel ignores addrlen, not passed on i386. */
	b->ret = raw_syscall(b->recv_ret, __NR_recvfrom, b->sock, buf, 2,
			     MSG_WAITALL, 0, 0);
	return NULL;
}

/*
 * Start a blocker pinned to the first of two CPUs this task may run on,
 * cpus[]; false (the test skipped) without two.
 */
static bool blocker_start(struct __test_metadata *_metadata, struct blocker *b,
			  int cpus[2], int sv[2], pthread_t *th)
{
	cpu_set_t set;
	int i, n = 0;

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
	for (i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	if (n < 2)
		SKIP(return false, "needs 2 CPUs to migrate a task, has %d", n);

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	b->sock = sv[0];
	b->cpu = cpus[0];
	ASSERT_EQ(0, pthread_create(th, NULL, blocker_main, b));
	while (!__atomic_load_n(&b->tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	ASSERT_LT(0, b->tid) TH_LOG("pinning to CPU %d: %s", b->cpu, strerror(-b->ret));
	return true;
}

/*
 * One stay on two CPUs: let the blocker block in its recvfrom() on
 * cpus[0], move it to cpus[1], wake it, let it block again there for its
 * second byte, then let it return and end.
 */
static void blocker_migrate(struct __test_metadata *_metadata, struct blocker *b,
			    const int cpus[2], const int sv[2], pthread_t th)
{
	long v = voluntary_switches(b->tid);
	cpu_set_t set;

	ASSERT_LE(0, v);
	__atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
	ASSERT_TRUE(wait_blocked(b->tid, v)) TH_LOG("the thread never blocked");
	v = voluntary_switches(b->tid);
	CPU_ZERO(&set);
	CPU_SET(cpus[1], &set);
	ASSERT_EQ(0, sched_setaffinity(b->tid, sizeof(set), &set));
	ASSERT_EQ(1, write(sv[1], "x", 1));
	ASSERT_TRUE(wait_blocked(b->tid, v))
		TH_LOG("the thread did not block again for its second byte");
	ASSERT_EQ(1, write(sv[1], "y", 1));
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(2, b->ret) TH_LOG("recvfrom: %ld", b->ret);
}

/* A context switch sample of each block, in the kernel, with its cookie. */
static struct perf_event_attr switch_attr(void)
{
	struct perf_event_attr attr =
		sw_sample_attr(PERF_COUNT_SW_CONTEXT_SWITCHES, 1, true);

	attr.disabled = 0;
	return attr;
}

TEST(migrated_while_blocked)
{
	struct perf_event_attr attr = switch_attr();
	int cpus[2], sv[2], on_a = 0, on_b = 0, other = 0;
	struct blocker b = { 0 };
	size_t i, nrec, rec = 0, first = SIZE_MAX;
	int found = 0;
	pthread_t th;
	struct ring r;
	__u64 cookie = 0;

	if (!blocker_start(_metadata, &b, cpus, sv, &th))
		return;
	open_ring(_metadata, &r, &attr, b.tid, -1, DATA_PAGES);
	blocker_migrate(_metadata, &b, cpus, sv, th);

	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);
	check_cookies(_metadata, &r, b.tid, RECORD_AFTER);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type == PERF_RECORD_CALLCHAIN_DEFERRED &&
		    rr->tid == (__u32)b.tid && rr->nr && rr->ips[0] == b.recv_ret) {
			if (!found++) {
				rec = i;
				cookie = rr->cookie;
			}
		}
	}
	ASSERT_EQ(1, found)
		TH_LOG("expected one record of the recvfrom() stay (ips[0] %#lx), saw %d",
		       b.recv_ret, found);
	EXPECT_EQ(cpus[0] + 1, (__u32)cookie)
		TH_LOG("cookie %#llx: expected cpu+1 = %d of the CPU where it was taken",
		       (unsigned long long)cookie, cpus[0] + 1);
	EXPECT_EQ(cpus[1], r.rec[rec].cpu)
		TH_LOG("expected the record written on CPU %d after migration, seen CPU %llu",
		       cpus[1], (unsigned long long)r.rec[rec].cpu);
	nrec = records_of_cookie(&r, cookie, &i);
	EXPECT_EQ(1, nrec) TH_LOG("cookie %#llx: expected 1 record, saw %zu",
				  (unsigned long long)cookie, nrec);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *s = &r.rec[i];

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)b.tid)
			continue;
		if (s->cookie == cookie) {
			if (first == SIZE_MAX)
				first = i;
			on_a += s->cpu == (__u64)cpus[0];
			on_b += s->cpu == (__u64)cpus[1];
		} else if (first != SIZE_MAX && i < rec) {
			other++;
		}
	}
	EXPECT_LE(1, on_a)
		TH_LOG("expected a sample of the first block on CPU %d with cookie %#llx, saw none",
		       cpus[0], (unsigned long long)cookie);
	EXPECT_LE(1, on_b)
		TH_LOG("want a sample of block 2 on CPU %d with cookie %#llx, none",
		       cpus[1], (unsigned long long)cookie);
	EXPECT_EQ(0, other)
		TH_LOG("expected every sample of the stay to carry cookie %#llx, %d did not",
		       (unsigned long long)cookie, other);

	close_ring(&r);
	close(sv[0]);
	close(sv[1]);
}

/*
 * The task's events bound to one CPU each, as perf record opens them for
 * a command: a stay sampled on CPU A that returns to user space on CPU B
 * gets its record in B's buffer, where its sample in A's buffer joins it
 * (by tid and cookie, as perf joins across buffers). Never in A's: a
 * CPU's buffer is written on that CPU only, and a record written there
 * from B could overlap A's own samples.
 */
TEST(cpu_bound_buffers_get_records_written_on_their_cpu)
{
	struct perf_event_attr attr = switch_attr();
	int cpus[2], sv[2], k, in[2] = { 0, 0 }, foreign = 0, joined = 0;
	struct blocker b = { 0 };
	struct ring r[2];
	__u64 cookie = 0;
	pthread_t th;
	size_t i;

	if (!blocker_start(_metadata, &b, cpus, sv, &th))
		return;
	for (k = 0; k < 2; k++)
		open_ring(_metadata, &r[k], &attr, b.tid, cpus[k], DATA_PAGES);
	blocker_migrate(_metadata, &b, cpus, sv, th);

	for (k = 0; k < 2; k++) {
		ASSERT_EQ(0, ioctl(r[k].fd, PERF_EVENT_IOC_DISABLE, 0));
		ring_drain(&r[k]);
		EXPECT_EQ(0, r[k].nr_malformed) TH_LOG("malformed: %s", r[k].why);
		for (i = 0; i < r[k].nr_rec; i++) {
			const struct ring_record *rr = &r[k].rec[i];

			if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED)
				continue;
			if (rr->cpu != (__u64)cpus[k] && !foreign++)
				TH_LOG("CPU %d's buffer: record %zu (%#llx) written on CPU %llu",
				       cpus[k], i, (unsigned long long)rr->cookie,
				       (unsigned long long)rr->cpu);
			if (rr->tid == (__u32)b.tid && rr->nr &&
			    rr->ips[0] == b.recv_ret) {
				in[k]++;
				cookie = rr->cookie;
			}
		}
	}
	EXPECT_EQ(0, foreign)
		TH_LOG("expected every record written on its buffer's CPU, %d were not",
		       foreign);
	EXPECT_EQ(0, in[0])
		TH_LOG("expected no record of the recvfrom() stay in CPU %d's buffer, saw %d",
		       cpus[0], in[0]);
	ASSERT_EQ(1, in[1])
		TH_LOG("expected one record of the recvfrom() stay in CPU %d's buffer, saw %d",
		       cpus[1], in[1]);
	for (i = 0; i < r[0].nr_rec; i++)
		joined += r[0].rec[i].type == PERF_RECORD_SAMPLE &&
			  r[0].rec[i].tid == (__u32)b.tid &&
			  r[0].rec[i].cookie == cookie;
	EXPECT_LE(1, joined)
		TH_LOG("want a sample of block 1 in CPU %d's buffer with cookie %#llx, none",
		       cpus[0], (unsigned long long)cookie);

	close_ring(&r[0]);
	close_ring(&r[1]);
	close(sv[0]);
	close(sv[1]);
}

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

/* A chain in shared memory, so that the parent sees what a child recorded. */
static struct chain *shared_chain(struct __test_metadata *_metadata, size_t want)
{
	struct chain *c = mmap(NULL, sizeof(*c) + sizeof(size_t),
			       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			       -1, 0);

	ASSERT_TRUE(c != MAP_FAILED);
	chain_init(_metadata, c, want);
	c->shared_samples = (size_t *)(c + 1);
	return c;
}

static void free_shared_chain(struct chain *c)
{
	chain_fini(c);
	munmap(c, sizeof(*c) + sizeof(size_t));
}

/*
 * Read r while child runs, telling it how many of its samples arrived,
 * until it exits; returns its wait status.
 */
static int follow_child(struct ring *r, struct chain *c, pid_t child)
{
	double deadline = ring_now() + 4 * RUN_SECONDS;
	size_t i, n = 0, seen = 0;
	int status = -1;

	for (;;) {
		ring_drain(r);
		for (i = seen; i < r->nr_rec; i++)
			n += r->rec[i].type == PERF_RECORD_SAMPLE &&
			     r->rec[i].tid == (__u32)child;
		seen = r->nr_rec;
		__atomic_store_n(c->shared_samples, n, __ATOMIC_RELAXED);
		if (child_done(child, deadline, &status))
			break;
		usleep(1000);
	}
	ring_drain(r);
	return status;
}

TEST(inherited_child_records_carry_child_tid)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	struct cookie_stats st;
	struct chain *c;
	cpu_set_t set;
	struct ring r;
	pid_t child;
	int status, cpu;

	/*
	 * An inherited per-task event cannot be mapped unless it is also
	 * bound to a CPU: pin this process, and so its child, to one.
	 */
	cpu = sched_getcpu();
	ASSERT_LE(0, cpu);
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));

	c = shared_chain(_metadata, WANT_SAMPLES);
	attr.inherit = 1;
	/*
	 * The parent reads the buffer only when the child, on the same CPU,
	 * lets it run: room for the samples of a long first readv(), whose
	 * record comes last.
	 */
	open_ring(_metadata, &r, &attr, 0, cpu, 16 * DATA_PAGES);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		/*
		 * Samples, counted by the parent as it reads them, and one
		 * readv() at least: its first samples may all be of its
		 * copy-on-write faults, and its first readv(), which makes
		 * the buffer its own, one fault per page under sampling, may
		 * take seconds under emulation (the parent stops waiting at
		 * 4 * RUN_SECONDS).
		 */
		c->min_reads = 1;
		c->deadline = ring_now() + RUN_SECONDS;
		chain_run(c);
		_exit(0);
	}
	status = follow_child(&r, c, child);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x", status);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);

	/* Not ALL_DEFERRED: samples of the exiting child have cookie 0. */
	st = check_cookies(_metadata, &r, child, RECORD_AFTER);
	TH_LOG("child: %ld readv calls, %d samples: %d in user mode, %d in the kernel, %d deferred",
	       c->reads, st.samples, st.user, st.kernel, st.deferred);
	ASSERT_LE(10, st.samples)
		TH_LOG("expected at least 10 samples of the child in the parent's buffer, saw %d",
		       st.samples);
	/* Those taken in user mode are walked in place: not counted here. */
	EXPECT_LE(st.kernel / 2, st.deferred)
		TH_LOG("want most kernel-mode samples of the child deferred, %d of %d were",
		       st.deferred, st.kernel);
	check_chain_records(_metadata, &r, child, c, CHAIN_DEPTH);

	close_ring(&r);
	free_shared_chain(c);
}

static bool is_kernel_thread(__u32 pid)
{
	char path[64], buf[512], *p;
	unsigned long flags;
	FILE *f;
	size_t n;

	if (!pid)
		return true;	/* idle */
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	/* after "comm)": state ppid pgrp session tty_nr tpgid flags */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
		return false;
	return flags & PF_KTHREAD;
}

TEST(per_cpu_event)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	int kthread = 0, bad = 0, cpu, fd;
	pid_t tid = gettid_();
	struct cookie_stats st;
	struct ring r;
	char msg[128] = "";
	struct chain c;
	cpu_set_t set;
	size_t i;

	cpu = sched_getcpu();
	ASSERT_LE(0, cpu);
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));

	fd = perf_open(&attr, -1, cpu);
	if (fd < 0 && (errno == EACCES || errno == EPERM))
		SKIP(return, "a per-CPU event needs privileges (%s)", strerror(errno));
	ASSERT_LE(0, fd) TH_LOG("perf_event_open(cpu %d): %s", cpu, strerror(errno));
	ASSERT_EQ(0, ring_map(&r, fd, &attr, DATA_PAGES))
		TH_LOG("mmap: %s", strerror(errno));

	chain_init(_metadata, &c, WANT_SAMPLES);
	c.rings[0] = &r;
	c.nr_rings = 1;
	c.deadline = ring_now() + RUN_SECONDS;
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	chain_run(&c);
	for (i = 0; i < 20; i++) {	/* let the CPU idle: kernel-thread samples */
		usleep(2000);
		ring_drain(&r);
	}
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);

	st = check_cookies(_metadata, &r, tid, ALL_DEFERRED | RECORD_AFTER);
	ASSERT_LE(10, st.samples)
		TH_LOG("expected at least 10 samples of this thread on CPU %d, saw %d",
		       cpu, st.samples);
	check_chain_records(_metadata, &r, tid, &c, CHAIN_DEPTH);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *s = &r.rec[i];

		if (s->type != PERF_RECORD_SAMPLE || !is_kernel_thread(s->pid))
			continue;
		kthread++;
		if (s->cookie && !bad++)
			snprintf(msg, sizeof(msg), "pid %u tid %u cookie %#llx",
				 s->pid, s->tid, (unsigned long long)s->cookie);
	}
	EXPECT_LE(1, kthread)
		TH_LOG("expected samples of the idle task or kernel threads on CPU %d, saw none",
		       cpu);
	EXPECT_EQ(0, bad)
		TH_LOG("expected cookie 0 on kernel-thread samples, %d of %d had one (first: %s)",
		       bad, kthread, msg);

	close_ring(&r);
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

/*
 * Fork a child that waits on a pipe, open attr on it, and let it run the
 * chain (which ends as c->end says). Returns the child's wait status.
 */
static int sample_child(struct __test_metadata *_metadata, struct ring *r,
			struct perf_event_attr *attr, struct chain *c,
			pid_t *child_out)
{
	int go[2], status;
	pid_t child;
	char x;

	ASSERT_EQ(0, pipe(go));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		close(go[1]);
		if (read(go[0], &x, 1) != 1)
			_exit(126);
		c->deadline = ring_now() + RUN_SECONDS;
		chain_run(c);
		_exit(0);
	}
	close(go[0]);
	*child_out = child;
	attr->disabled = 0;
	open_ring(_metadata, r, attr, child, -1, DATA_PAGES);
	ASSERT_EQ(1, write(go[1], "g", 1));
	close(go[1]);
	status = follow_child(r, c, child);
	EXPECT_EQ(0, r->nr_malformed) TH_LOG("malformed: %s", r->why);
	return status;
}

TEST(exit_with_pending_samples)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	size_t i, exit_at = SIZE_MAX, rec = 0;
	int late = 0, in_exit = 0, exits = 0;
	char msg[128] = "";
	struct cookie_stats st;
	struct chain *c;
	struct ring r;
	pid_t child;
	int status;

	c = shared_chain(_metadata, WANT_SAMPLES);
	c->end = CHAIN_EXIT;
	attr.task = 1;
	status = sample_child(_metadata, &r, &attr, c, &child);
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x", status);

	for (i = 0; i < r.nr_rec; i++)
		if (r.rec[i].type == PERF_RECORD_EXIT &&
		    r.rec[i].tid == (__u32)child && !exits++)
			exit_at = i;
	ASSERT_EQ(1, exits)
		TH_LOG("expected one PERF_RECORD_EXIT of the child, saw %d", exits);

	/* Not ALL_DEFERRED: samples in do_exit() have cookie 0. */
	st = check_cookies(_metadata, &r, child, RECORD_AFTER);
	ASSERT_LE(10, st.samples)
		TH_LOG("expected at least 10 samples of the child, saw %d", st.samples);
	/* Those taken in user mode are walked in place: not counted here. */
	EXPECT_LE(st.kernel / 2, st.deferred)
		TH_LOG("want most kernel-mode samples of the child deferred, %d of %d were",
		       st.deferred, st.kernel);
	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *s = &r.rec[i];

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)child ||
		    !s->cookie || !records_of_cookie(&r, s->cookie, &rec))
			continue;
		if (r.rec[rec].nr && r.rec[rec].ips[0] == c->exit_ret)
			in_exit++;
		if (rec > exit_at && !late++)
			snprintf(msg, sizeof(msg),
				 "cookie %#llx: record %zu, PERF_RECORD_EXIT %zu",
				 (unsigned long long)s->cookie, rec, exit_at);
	}
	EXPECT_EQ(0, late)
		TH_LOG("want records before PERF_RECORD_EXIT, %d after (%s)",
		       late, msg);
	TH_LOG("%d samples of the child, %d of them in its exit_group() stay",
	       st.samples, in_exit);

	close_ring(&r);
	free_shared_chain(c);
}

struct range {
	unsigned long start, end;
};

/* The executable mappings of pid. */
static int exec_ranges(pid_t pid, struct range *rg, int max)
{
	char path[64], line[512], perms[8];
	unsigned long s, e;
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (n < max && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) == 3 && perms[2] == 'x') {
			rg[n].start = s;
			rg[n++].end = e;
		}
	fclose(f);
	return n;
}

static bool in_ranges(__u64 ip, const struct range *rg, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (ip >= rg[i].start && ip < rg[i].end)
			return true;
	return false;
}

static bool aslr_on(void)
{
	FILE *f = fopen("/proc/sys/kernel/randomize_va_space", "r");
	int v = 1;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 1;
		fclose(f);
	}
	return v != 0;
}

/* Wait for "go" with a raw system call: no libc code while sampled. */
static __attribute__((noipa)) long wait_go(int fd)
{
	unsigned long ip;
	char x;

	return raw_syscall(ip, __NR_read, fd, &x, 1, 0, 0, 0);
}

#define ENV_STRINGS	512
#define ENV_LEN		2048

/*
 * One child that runs the chain and then execs /bin/true with 1 MiB of
 * environment (a long stay before the point of no return). Returns the
 * number of records of the exec stay under an old-image cookie.
 */
static int exec_once(struct __test_metadata *_metadata, bool aslr)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	int bad_before = 0, bad_reuse = 0, bad_orphan = 0, exec_stay = 0;
	char msg[3][160] = { "", "", "" };
	int go[2], ready[2], nr_old, status;
	size_t i, j, comm_at = SIZE_MAX;
	struct range old[64];
	struct chain *c;
	struct ring r;
	pid_t child;
	char x;

	c = shared_chain(_metadata, 50);
	c->end = CHAIN_EXEC;
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		char *argv[2];
		char **envp = calloc(ENV_STRINGS + 1, sizeof(*envp));

		/* A parent that fails before "go" closes the pipe: exit. */
		close(go[1]);
		close(ready[0]);
		for (i = 0; envp && i < ENV_STRINGS; i++) {
			envp[i] = malloc(ENV_LEN);
			if (!envp[i])
				_exit(126);
			snprintf(envp[i], ENV_LEN, "V%zu=", i);
			memset(envp[i] + strlen(envp[i]), 'x',
			       ENV_LEN - strlen(envp[i]) - 1);
			envp[i][ENV_LEN - 1] = 0;
		}
		if (!envp || write(ready[1], "r", 1) != 1)
			_exit(126);
		c->exec_path = "/bin/true";
		argv[0] = "true";
		argv[1] = NULL;
		c->exec_argv = argv;
		c->exec_envp = envp;
		if (wait_go(go[0]) != 1)
			_exit(126);
		c->deadline = ring_now() + RUN_SECONDS / 2;
		chain_run(c);
		_exit(125);
	}
	close(go[0]);
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &x, 1));
	nr_old = exec_ranges(child, old, 64);
	ASSERT_LT(0, nr_old);

	attr.disabled = 0;
	attr.comm = 1;
	attr.comm_exec = 1;
	attr.task = 1;
	open_ring(_metadata, &r, &attr, child, -1, DATA_PAGES);
	ASSERT_EQ(1, write(go[1], "g", 1));
	status = follow_child(&r, c, child);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x: expected /bin/true to exit 0", status);

	for (i = 0; i < r.nr_rec && comm_at == SIZE_MAX; i++)
		if (r.rec[i].type == PERF_RECORD_COMM &&
		    (r.rec[i].misc & PERF_RECORD_MISC_COMM_EXEC) &&
		    r.rec[i].tid == (__u32)child)
			comm_at = i;
	ASSERT_NE(SIZE_MAX, comm_at) TH_LOG("no PERF_RECORD_COMM of the exec");

	check_cookies(_metadata, &r, child, RECORD_AFTER);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];
		bool old_image, sampled_before = false;

		if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED ||
		    rr->tid != (__u32)child || !rr->nr)
			continue;
		if (rr->ips[0] == c->exec_ret)
			exec_stay++;
		/* Written before the new image exists: it is the old one. */
		if (i < comm_at && !in_ranges(rr->ips[0], old, nr_old) &&
		    !bad_before++)
			snprintf(msg[0], sizeof(msg[0]),
				 "record %zu, cookie %#llx: ips[0] %#llx",
				 i, (unsigned long long)rr->cookie,
				 (unsigned long long)rr->ips[0]);
		old_image = aslr ? in_ranges(rr->ips[0], old, nr_old) :
			    rr->ips[0] == c->exec_ret || rr->ips[0] == c->expect[0];
		if (!old_image)
			continue;
		for (j = 0; j < r.nr_rec; j++) {
			const struct ring_record *s = &r.rec[j];

			if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)child ||
			    s->cookie != rr->cookie)
				continue;
			if (j < comm_at)
				sampled_before = true;
			else if (!bad_reuse++)
				snprintf(msg[1], sizeof(msg[1]),
					 "cookie %#llx: old-image ips[0] %#llx, sample %zu after the exec at %zu",
					 (unsigned long long)rr->cookie,
					 (unsigned long long)rr->ips[0], j, comm_at);
		}
		if (i > comm_at && !sampled_before && !bad_orphan++)
			snprintf(msg[2], sizeof(msg[2]),
				 "record %zu, cookie %#llx: ips[0] %#llx",
				 i, (unsigned long long)rr->cookie,
				 (unsigned long long)rr->ips[0]);
	}
	EXPECT_EQ(0, bad_before)
		TH_LOG("want old image in records before exec, %d not (%s)",
		       bad_before, msg[0]);
	EXPECT_EQ(0, bad_reuse)
		TH_LOG("want no sample after exec with an old cookie, %d (%s)",
		       bad_reuse, msg[1]);
	EXPECT_EQ(0, bad_orphan)
		TH_LOG("want old-image records only for pre-exec cookies, %d not (%s)",
		       bad_orphan, msg[2]);

	close_ring(&r);
	close(go[1]);
	close(ready[0]);
	free_shared_chain(c);
	return exec_stay;
}

TEST(exec_keeps_images_apart)
{
	bool aslr = aslr_on();
	int attempt, exec_stay = 0;

	if (access("/bin/true", X_OK))
		SKIP(return, "no /bin/true to exec");
	for (attempt = 0; attempt < 3 && !exec_stay; attempt++)
		exec_stay += exec_once(_metadata, aslr);
	EXPECT_LE(1, exec_stay)
		TH_LOG("want an execve() stay record (old image) in %d tries, none",
		       attempt);
}

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

#define PROBE_CALLS	5

/* What the probed function and its caller know of their own frames. */
struct probe_calls {
	unsigned long ret;		/* probed_fn's return address */
	unsigned long caller_ret;	/* probe_caller's return address */
	int calls;
};

/* Probed on its first instruction: push %rbp/%ebp (or endbr64). */
/*
 * The return addresses are taken on the first call, made before the probe
 * exists: under a uretprobe, probed_fn's return address is the trampoline.
 */
static __attribute__((noipa)) void probed_fn(struct probe_calls *p)
{
	if (!p->ret)
		p->ret = (unsigned long)__builtin_return_address(0);
	p->calls++;
}

static __attribute__((noipa)) void probe_caller(struct probe_calls *p)
{
	if (!p->caller_ret)
		p->caller_ret = (unsigned long)__builtin_return_address(0);
	probed_fn(p);
}

/* One call site for the first call and the probed ones. */
static __attribute__((noipa)) void call_probed(struct probe_calls *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		probe_caller(p);
}

/* A uprobe or uretprobe on probed_fn, removed in the teardown. */
FIXTURE(uprobe) {
	char tracefs[64];
	char name[64];		/* group/event */
	char target[PATH_MAX + 32];	/* exe:offset of probed_fn */
	bool created;
	int fd;			/* the event on it */
	struct ring r;
};

/* Append cmd to tracefs's uprobe_events; 0 or an errno. */
static int uprobe_command(const char *tracefs, const char *cmd)
{
	char path[128];
	ssize_t ret;
	int fd, err;

	snprintf(path, sizeof(path), "%s/uprobe_events", tracefs);
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0)
		return errno;
	ret = write(fd, cmd, strlen(cmd));
	err = ret == (ssize_t)strlen(cmd) ? 0 : ret < 0 ? errno : EIO;
	close(fd);
	return err;
}

FIXTURE_SETUP(uprobe)
{
	static const char * const tracefs[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
	};
	unsigned long fn = (unsigned long)probed_fn, start, end, off = 0;
	const unsigned char *insn = (const unsigned char *)probed_fn;
	char exe[PATH_MAX], line[PATH_MAX + 128], perms[8], *path;
	char cmd[PATH_MAX + 128];
	bool found = false;
	ssize_t len;
	size_t i;
	FILE *f;
	int pos;

	self->fd = -1;
	for (i = 0; i < ARRAY_SIZE(tracefs); i++) {
		snprintf(cmd, sizeof(cmd), "%s/uprobe_events", tracefs[i]);
		if (!access(cmd, W_OK))
			break;
	}
	if (i == ARRAY_SIZE(tracefs))
		SKIP(return, "no writable uprobe_events in tracefs");
	snprintf(self->tracefs, sizeof(self->tracefs), "%s", tracefs[i]);

	/*
	 * perf's caller heuristic needs a function-entry instruction; for a
	 * compat task only push %ebp is one (endbr32 is not).
	 */
#ifdef __x86_64__
	ASSERT_TRUE(insn[0] == 0x55 || !memcmp(insn, "\xf3\x0f\x1e\xfa", 4))
		TH_LOG("probed_fn starts with %02x %02x, not push %%rbp or endbr64",
		       insn[0], insn[1]);
#else
	ASSERT_EQ(0x55, insn[0])
		TH_LOG("probed_fn starts with %02x %02x, not push %%ebp",
		       insn[0], insn[1]);
#endif

	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ASSERT_LT(0, len) TH_LOG("/proc/self/exe: %s", strerror(errno));
	exe[len] = 0;
	f = fopen("/proc/self/maps", "r");
	ASSERT_FALSE(!f);
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &start, &end,
			   perms, &off, &pos) != 4 || fn < start || fn >= end)
			continue;
		path = line + pos;
		path[strcspn(path, "\n")] = 0;
		found = perms[2] == 'x' && !strcmp(path, exe);
		off += fn - start;
	}
	fclose(f);
	ASSERT_TRUE(found)
		TH_LOG("no executable mapping of %s holds probed_fn at %#lx", exe, fn);

	snprintf(self->name, sizeof(self->name), "deferred_test/probe_%d",
		 getpid());
	snprintf(self->target, sizeof(self->target), "%s:%#lx", exe, off);
}

FIXTURE_TEARDOWN(uprobe)
{
	char cmd[80];
	int err;

	/* The mapping holds the event, and the event holds the probe. */
	if (self->r.meta)
		ring_unmap(&self->r);
	if (self->fd >= 0)
		close(self->fd);
	if (!self->created)
		return;
	snprintf(cmd, sizeof(cmd), "-:%s", self->name);
	err = uprobe_command(self->tracefs, cmd);
	EXPECT_EQ(0, err) TH_LOG("removing the uprobe, \"%s\": %s", cmd, strerror(err));
}

/*
 * Create the probe of the given kind ('p' entry, 'r' return) on probed_fn,
 * open attr on it, and sample PROBE_CALLS calls of probe_caller() into
 * self->r.
 */
static void uprobe_sample(struct __test_metadata *_metadata,
			  struct _test_data_uprobe *self, char kind,
			  struct perf_event_attr *attr, struct probe_calls *p)
{
	char cmd[PATH_MAX + 128], path[192];
	unsigned long long id;
	FILE *f;
	int err;

	call_probed(p, 1);
	p->calls = 0;

	snprintf(cmd, sizeof(cmd), "%c:%s %s", kind, self->name, self->target);
	err = uprobe_command(self->tracefs, cmd);
	ASSERT_EQ(0, err) TH_LOG("\"%s\": %s", cmd, strerror(err));
	self->created = true;

	snprintf(path, sizeof(path), "%s/events/%s/id", self->tracefs, self->name);
	f = fopen(path, "r");
	ASSERT_FALSE(!f) TH_LOG("%s: %s", path, strerror(errno));
	ASSERT_EQ(1, fscanf(f, "%llu", &id));
	fclose(f);
	attr->config = id;

	self->fd = perf_open(attr, 0, -1);
	ASSERT_LE(0, self->fd)
		TH_LOG("perf_event_open(%s %s): %s",
		       kind == 'r' ? "uretprobe" : "uprobe", self->name,
		       strerror(errno));
	ASSERT_EQ(0, ring_map(&self->r, self->fd, attr, DATA_PAGES))
		TH_LOG("mmap: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(self->fd, PERF_EVENT_IOC_ENABLE, 0));
	call_probed(p, PROBE_CALLS);
	ASSERT_EQ(0, ioctl(self->fd, PERF_EVENT_IOC_DISABLE, 0));
	ASSERT_EQ(PROBE_CALLS, p->calls);
	ring_drain(&self->r);
	EXPECT_EQ(0, self->r.nr_malformed) TH_LOG("malformed: %s", self->r.why);
}

/*
 * A sample taken in a uprobe handler is not deferred: the handler's stay
 * returns to the probed instruction's copy, and the walk from there would
 * miss the caller at a function-entry probe. perf walks the stack in
 * place instead (cookie 0), its function-entry heuristic adding the
 * caller. Deferral works as ever afterwards.
 */
TEST_F(uprobe, samples_are_not_deferred)
{
	struct perf_event_attr attr = sample_attr(PERF_TYPE_TRACEPOINT, 0, 1,
						  PERF_SAMPLE_CALLCHAIN_DEFERRED);
	struct perf_event_attr clock = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	int samples = 0, bad_cookie = 0, bad_user = 0, bad_chain = 0, bad_ip = 0;
	int records = 0, mine = 0;
	char chain_msg[200] = "", ip_msg[80] = "";
	unsigned long fn = (unsigned long)probed_fn;
	struct probe_calls p = { 0 };
	pid_t tid = gettid_();
	struct cookie_stats st;
	struct ring r, *rp = &r;
	struct chain c;
	size_t i;

	uprobe_sample(_metadata, self, 'p', &attr, &p);

	for (i = 0; i < self->r.nr_rec; i++) {
		const struct ring_record *s = &self->r.rec[i];
		const __u64 *ips;
		__u64 nr;

		if (s->type == PERF_RECORD_CALLCHAIN_DEFERRED) {
			records++;
			mine += s->tid == (__u32)tid;
		}
		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)tid)
			continue;
		samples++;
		bad_cookie += s->cookie != 0;
		if (s->ip != fn && !bad_ip++)
			snprintf(ip_msg, sizeof(ip_msg), "ip %#llx",
				 (unsigned long long)s->ip);
		if (!inline_user_part(s, &ips, &nr)) {
			bad_user++;
			continue;
		}
		if (nr >= 3 && ips[0] == fn && ips[1] == p.ret &&
		    ips[2] == p.caller_ret)
			continue;
		if (!bad_chain++)
			snprintf(chain_msg, sizeof(chain_msg),
				 "%llu user ips: %#llx %#llx %#llx",
				 (unsigned long long)nr,
				 nr > 0 ? (unsigned long long)ips[0] : 0ULL,
				 nr > 1 ? (unsigned long long)ips[1] : 0ULL,
				 nr > 2 ? (unsigned long long)ips[2] : 0ULL);
	}
	EXPECT_EQ(PROBE_CALLS, samples)
		TH_LOG("expected one sample per call of the probed function, saw %d of %d",
		       samples, PROBE_CALLS);
	EXPECT_EQ(0, bad_cookie)
		TH_LOG("expected cookie 0 on uprobe samples, %d of %d had one",
		       bad_cookie, samples);
	EXPECT_EQ(0, bad_ip)
		TH_LOG("expected sample ip = probed_fn %#lx, %d differ (first: %s)",
		       fn, bad_ip, ip_msg);
	EXPECT_EQ(0, bad_user)
		TH_LOG("want PERF_CONTEXT_USER in uprobe samples, %d of %d lack it",
		       bad_user, samples);
	EXPECT_EQ(0, bad_chain)
		TH_LOG("want user ips probed_fn %#lx, return addresses %#lx, %#lx; %d differ (%s)",
		       fn, p.ret, p.caller_ret, bad_chain, chain_msg);
	EXPECT_EQ(0, mine)
		TH_LOG("expected no deferred records of this thread, saw %d", mine);
	EXPECT_EQ(0, records)
		TH_LOG("expected no deferred records at all, saw %d", records);

	/* Nothing of the refused requests is left over: deferral works. */
	chain_init(_metadata, &c, WANT_SAMPLES / 4);
	open_ring(_metadata, &r, &clock, 0, -1, DATA_PAGES);
	sample_chain(_metadata, &c, &rp, 1);
	st = check_cookies(_metadata, &r, tid, ALL_DEFERRED | RECORD_AFTER);
	EXPECT_LE(10, st.samples)
		TH_LOG("expected at least 10 samples after the uprobe, saw %d",
		       st.samples);
	check_chain_records(_metadata, &r, tid, &c, CHAIN_DEPTH);
	close_ring(&r);
	chain_fini(&c);
}

/* The [uprobes] mapping, which holds the uretprobe trampoline; 0-0 if none. */
static void uprobes_area(unsigned long *start, unsigned long *end)
{
	char line[PATH_MAX + 128];
	FILE *f;

	*start = *end = 0;
	f = fopen("/proc/self/maps", "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "[uprobes]"))
			continue;
		if (sscanf(line, "%lx-%lx", start, end) != 2)
			*start = *end = 0;
		break;
	}
	fclose(f);
}

/*
 * Nor is a sample taken in a uretprobe handler deferred: the kernel moves
 * the user registers to the return address before the handler runs, and
 * the deferred walk would start from wherever the task is at its return to
 * user space. perf walks in place (cookie 0), the sample's ip being the
 * return address in probe_caller, and no trampoline address is left in
 * the user callchain.
 */
TEST_F(uprobe, uretprobe_samples_are_not_deferred)
{
	struct perf_event_attr attr = sample_attr(PERF_TYPE_TRACEPOINT, 0, 1,
						  PERF_SAMPLE_CALLCHAIN_DEFERRED);
	int samples = 0, bad_cookie = 0, bad_user = 0, bad_chain = 0, bad_ip = 0;
	int tramp = 0, records = 0, mine = 0;
	char chain_msg[200] = "", ip_msg[80] = "";
	unsigned long tramp_start, tramp_end;
	struct probe_calls p = { 0 };
	pid_t tid = gettid_();
	bool seen, in_tramp;
	size_t i;
	__u64 k;

	uprobe_sample(_metadata, self, 'r', &attr, &p);
	uprobes_area(&tramp_start, &tramp_end);

	for (i = 0; i < self->r.nr_rec; i++) {
		const struct ring_record *s = &self->r.rec[i];
		const __u64 *ips;
		__u64 nr;

		if (s->type == PERF_RECORD_CALLCHAIN_DEFERRED) {
			records++;
			mine += s->tid == (__u32)tid;
		}
		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)tid)
			continue;
		samples++;
		bad_cookie += s->cookie != 0;
		if (s->ip != p.ret && !bad_ip++)
			snprintf(ip_msg, sizeof(ip_msg), "ip %#llx",
				 (unsigned long long)s->ip);
		if (!inline_user_part(s, &ips, &nr)) {
			bad_user++;
			continue;
		}
		seen = false;
		in_tramp = false;
		for (k = 0; k < nr; k++) {
			seen |= ips[k] == p.ret;
			in_tramp |= ips[k] >= tramp_start && ips[k] < tramp_end;
		}
		tramp += in_tramp;
		if (seen && !in_tramp)
			continue;
		if (!bad_chain++)
			snprintf(chain_msg, sizeof(chain_msg),
				 "%llu user ips: %#llx %#llx %#llx",
				 (unsigned long long)nr,
				 nr > 0 ? (unsigned long long)ips[0] : 0ULL,
				 nr > 1 ? (unsigned long long)ips[1] : 0ULL,
				 nr > 2 ? (unsigned long long)ips[2] : 0ULL);
	}
	EXPECT_EQ(PROBE_CALLS, samples)
		TH_LOG("expected one sample per return of the probed function, saw %d of %d",
		       samples, PROBE_CALLS);
	EXPECT_EQ(0, bad_cookie)
		TH_LOG("expected cookie 0 on uretprobe samples, %d of %d had one",
		       bad_cookie, samples);
	EXPECT_EQ(0, bad_ip)
		TH_LOG("expected sample ip = return address %#lx, %d differ (first: %s)",
		       p.ret, bad_ip, ip_msg);
	EXPECT_EQ(0, bad_user)
		TH_LOG("want PERF_CONTEXT_USER in uretprobe samples, %d of %d lack it",
		       bad_user, samples);
	EXPECT_EQ(0, bad_chain)
		TH_LOG("want ret %#lx, no [uprobes] %#lx-%#lx ip: %d differ, %d in it (%s)",
		       p.ret, tramp_start, tramp_end, bad_chain, tramp, chain_msg);
	EXPECT_EQ(0, mine)
		TH_LOG("expected no deferred records of this thread, saw %d", mine);
	EXPECT_EQ(0, records)
		TH_LOG("expected no deferred records at all, saw %d", records);
}

TEST_HARNESS_MAIN
