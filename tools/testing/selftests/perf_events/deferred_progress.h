/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the selftests split out of deferred_progress (deferred_progress,
 * deferred_lost_record, deferred_self_interrupt, deferred_fanout and
 * deferred_max_stack_cap): the clock attr they sample with, a readv() of
 * /dev/zero sized to take about a given time, the check of a thread's
 * samples and of a buffer's records (analyze_ring()), and the id of a
 * tracepoint. Include after kselftest_harness.h, deferred_ring.h and
 * deferred_util.h.
 *
 * Built 32-bit too (the _32 programs), a compat task. Pointers are checked
 * as truth values (ASSERT_FALSE(!p)): the harness would print them as
 * 64-bit integers.
 */
#ifndef DEFERRED_PROGRESS_H
#define DEFERRED_PROGRESS_H

#include <sys/mount.h>
#include <sys/uio.h>

#define ZERO_CHUNK		(1024 * 1024)	/* readv() of /dev/zero: iovec size */
#define ZERO_MAX		(256 * ZERO_CHUNK)	/* ... and the most per call */

static inline struct perf_event_attr clock_attr(__u64 config, bool deferred, __u64 period)
{
	return sw_sample_attr(config, period, deferred);
}

/* readv() of /dev/zero sized to take about a given time: a long kernel stay. */
struct zero_reader {
	int fd;
	char *buf;
	struct iovec *iov;
	int iovcnt;
	size_t len;
};

static inline void zero_init(struct __test_metadata *_metadata, struct zero_reader *z,
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

static inline void zero_fini(struct zero_reader *z)
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

static inline int cmp_ref(const void *a, const void *b)
{
	const struct cookie_ref *x = a, *y = b;

	if (x->cookie != y->cookie)
		return x->cookie < y->cookie ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* First of the sorted refs[0..n) with this cookie, n if none. */
static inline size_t find_ref(const struct cookie_ref *refs, size_t n, __u64 cookie)
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
static inline size_t sorted_records(const struct ring *r, struct cookie_ref **refs)
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
static inline void analyze_ring(struct __test_metadata *_metadata,
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

static const char * const tracefs_dirs[] = {
	"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
};

static inline long read_tracepoint_id(const char *dir, const char *event)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/events/%s/id", dir, event);
	return read_number(path);
}

/* The id of a tracepoint, mounting tracefs for a moment if need be. */
static inline long tracepoint_id(const char *event)
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

#endif /* DEFERRED_PROGRESS_H */
