/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The call chain that deferred_callchain.c and the tests beside it sample,
 * and the checks of the samples and records it leaves in a buffer: a
 * chain of functions that records its own return addresses, then reads
 * /dev/zero in long system calls (or spins in user mode). Include after
 * kselftest_harness.h, deferred_ring.h and deferred_util.h; build with
 * frame pointers and no sibling calls (see Makefile).
 *
 * Built 32-bit too (the _32 programs), a compat task: its frames are
 * 4-byte words, and the records carry its 32-bit addresses zero-extended.
 * Pointers are checked as truth values (ASSERT_FALSE(!p)): the harness
 * would print them as 64-bit integers.
 */
#ifndef DEFERRED_CHAIN_H
#define DEFERRED_CHAIN_H

#include <fcntl.h>
#include <sys/uio.h>

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

static inline bool chain_done(struct chain *c)
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

static __attribute__((noipa, unused)) void chain_f3(struct chain *c)
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

static __attribute__((noipa, unused)) void chain_f2(struct chain *c)
{
	c->expect[2] = (unsigned long)__builtin_return_address(0);
	chain_f3(c);
}

static __attribute__((noipa, unused)) void chain_f1(struct chain *c)
{
	c->expect[3] = (unsigned long)__builtin_return_address(0);
	chain_f2(c);
}

static __attribute__((noipa, unused)) void chain_run(struct chain *c)
{
	c->expect[4] = (unsigned long)__builtin_return_address(0);
	chain_f1(c);
}

/* Spin in user mode, in a loop whose code range the test knows. */
static __attribute__((noipa, unused)) void spin_user(struct chain *c, unsigned long loops)
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
static inline void chain_init(struct __test_metadata *_metadata, struct chain *c,
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

static inline void chain_fini(struct chain *c)
{
	free(c->iov);
	free(c->buf);
	close(c->zero_fd);
}

static inline struct perf_event_attr clock_attr(__u64 config, bool deferred)
{
	return sw_sample_attr(config, SAMPLE_PERIOD_NS, deferred);
}

/* Sample the chain in this thread with the events behind rings[]. */
static inline void sample_chain(struct __test_metadata *_metadata, struct chain *c,
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
static inline bool record_has_stack(const struct ring_record *rec, pid_t tid,
				    const __u64 *ips, __u64 nr)
{
	/* The sample's own max stack may cut it shorter, to nothing. */
	return rec->type == PERF_RECORD_CALLCHAIN_DEFERRED &&
	       rec->tid == (__u32)tid && nr <= rec->nr &&
	       !memcmp(rec->ips, ips, nr * sizeof(__u64));
}

/* Whether record j is a PERF_RECORD_CALLCHAIN_DEFERRED of tid. */
static inline bool is_record_of(const struct ring *r, size_t j, pid_t tid)
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
static inline bool loss_near(const struct ring *r, size_t i, pid_t tid)
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
static inline bool carries_stays_walk(const struct ring *r, size_t i, pid_t tid)
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
static inline struct cookie_stats check_cookies(struct __test_metadata *_metadata,
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
static inline int check_chain_records(struct __test_metadata *_metadata,
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

#endif /* DEFERRED_CHAIN_H */
