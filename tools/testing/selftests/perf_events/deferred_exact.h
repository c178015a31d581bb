/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The twin events of the deferred_exact_* selftests and the comparison of
 * their stacks. Those tests check exact stacks for
 * PERF_SAMPLE_CALLCHAIN_DEFERRED: where the kernel rewrites a task's user
 * registers or stack inside one kernel stay (signal delivery, rt_sigreturn,
 * ptrace register writes, uprobe call emulation, exec), the deferred walk
 * of the samples taken before the rewrite runs first, and the stay ends
 * there.
 *
 * Each test samples tracepoints with twin events: one defers the user part
 * of its callchains, the other walks the user stack in place, at the very
 * moment of the hit. Every tracepoint hit gives one sample in each, and the
 * deferred one, joined with its PERF_RECORD_CALLCHAIN_DEFERRED (same cookie,
 * same tid), must carry the user stack the in-place walk saw. Build with
 * frame pointers and no sibling calls (see Makefile).
 *
 * Each is built 64-bit, and 32-bit as <name>_32, a compat task: its frames
 * are 4-byte words (so are the fake frames that the ptrace test builds), and
 * x86 ftrace ignores compat system calls, so that the syscalls/ tracepoints
 * are replaced with filtered raw_syscalls/ ones (SYS_ENTER_TP()). Pointers
 * are checked as truth values (ASSERT_FALSE(!p)): the harness would print
 * them as 64-bit integers. Include after kselftest_harness.h, deferred_ring.h
 * and deferred_util.h.
 */
/*
 * The twin events of the deferred_exact_* selftests, and the comparison of
 * their stacks. Exact stacks for PERF_SAMPLE_CALLCHAIN_DEFERRED: where the
 * kernel rewrites
 * a task's user registers or stack inside one kernel stay (signal delivery,
 * rt_sigreturn, ptrace register writes, uprobe call emulation, exec), the
 * deferred walk of the samples taken before the rewrite runs first, and the
 * stay ends there.
 *
 * Each test samples tracepoints with twin events: one defers the user part
 * of its callchains, the other walks the user stack in place, at the very
 * moment of the hit. Every tracepoint hit gives one sample in each, and the
 * deferred one, joined with its PERF_RECORD_CALLCHAIN_DEFERRED (same cookie,
 * same tid), must carry the user stack the in-place walk saw. Build with
 * frame pointers and no sibling calls (see Makefile).
 *
 * The tests are built 64-bit, and 32-bit as <name>_32, compat tasks: their frames
 * are 4-byte words (so are the fake frames that the ptrace test builds), and
 * x86 ftrace ignores compat system calls, so that the syscalls/ tracepoints
 * are replaced with filtered raw_syscalls/ ones (SYS_ENTER_TP()). Pointers
 * are checked as truth values (ASSERT_FALSE(!p)): the harness would print
 * them as 64-bit integers.
 */
#ifndef DEFERRED_EXACT_H
#define DEFERRED_EXACT_H

#include <stdarg.h>
#include <sys/prctl.h>

#define DATA_PAGES	64
#define MAX_TP		6	/* tracepoints sampled by one test */
#define MIN_DEPTH	3	/* frames both walks must have, at least */
#define MIN_HITS	20	/* compared hits a test needs to mean something */
#define ROUNDS		25

#define TP_STR(x)	#x
#define TP_NR(x)	TP_STR(x)	/* a system call's number, as a string */

/*
 * The tracepoint at the entry or exit of system call "name": a tracepoint
 * spec of open_twins(), "system/name" with an optional " if FILTER". x86
 * ftrace ignores compat system calls (ARCH_TRACE_IGNORE_COMPAT_SYSCALLS):
 * the syscalls/ tracepoints never fire in a compat task, so the 32-bit
 * build samples raw_syscalls/, filtered on the system call's number.
 */
#ifdef __x86_64__
#define SYS_ENTER_TP(name)	"syscalls/sys_enter_" #name
#define SYS_EXIT_TP(name)	"syscalls/sys_exit_" #name
#else
#define SYS_ENTER_TP(name)	"raw_syscalls/sys_enter if id == " TP_NR(__NR_##name)
#define SYS_EXIT_TP(name)	"raw_syscalls/sys_exit if id == " TP_NR(__NR_##name)
#endif

/*
 * Enable or disable every event this thread opened, with a raw system call:
 * even its exit, sampled, has a frame-pointer chain to walk.
 */
static __attribute__((noipa, unused)) long sampling(bool on)
{
	unsigned long ip;

	return raw_syscall(ip, __NR_prctl, on ? PR_TASK_PERF_EVENTS_ENABLE :
			   PR_TASK_PERF_EVENTS_DISABLE, 0, 0, 0, 0, 0);
}

/*
 * The id of the tracepoint of spec "system/name[ if FILTER]", -1 if there
 * is no such tracepoint; *filter is FILTER, or NULL.
 */
static inline long long tracepoint_id(const char *root, const char *spec,
				      const char **filter)
{
	const char *sep = strstr(spec, " if ");
	int len = sep ? (int)(sep - spec) : (int)strlen(spec);
	char path[192];

	*filter = sep ? sep + strlen(" if ") : NULL;
	snprintf(path, sizeof(path), "%s/events/%.*s/id", root, len, spec);
	return read_number(path);
}

/*
 * Tracepoints sampled twice, on every hit: r[0] holds the samples of the
 * events with PERF_SAMPLE_CALLCHAIN_DEFERRED and their records, r[1] those
 * of their twins, which walk the user stack in place. The events of one
 * kind share one buffer (PERF_EVENT_IOC_SET_OUTPUT).
 */
struct twins {
	int nr;
	const char *name[MAX_TP];
	int fd[2][MAX_TP];
	__u64 id[2][MAX_TP];
	struct ring r[2];
	char why[256];		/* why they could not be opened */
};

static inline struct perf_event_attr twin_attr(__u64 id, bool deferred, bool inherit,
					       bool enabled)
{
	struct perf_event_attr attr = sample_attr(PERF_TYPE_TRACEPOINT, id, 1,
						  deferred ? PERF_SAMPLE_CALLCHAIN_DEFERRED : 0);

	attr.disabled = !enabled;
	attr.inherit = inherit;
	/* One clock for every CPU: the twins' times are compared. */
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	return attr;
}

static inline void close_twins(struct twins *tw)
{
	int d, t;

	for (d = 0; d < 2; d++) {
		if (tw->r[d].meta)
			ring_unmap(&tw->r[d]);
		for (t = 0; t < MAX_TP; t++) {
			if (tw->fd[d][t] >= 0)
				close(tw->fd[d][t]);
			tw->fd[d][t] = -1;
		}
	}
}

/*
 * Open the twins of each tracepoint names[] ("system/name", with an ftrace
 * filter after " if " if need be) for pid on cpu. Returns 0, or -1 with
 * tw->why set when the machine lacks tracefs or one of the tracepoints.
 */
static inline int open_twins(struct __test_metadata *_metadata, struct twins *tw,
			     const char * const *names, int nr, pid_t pid, int cpu,
			     bool inherit, bool enabled)
{
	const char *root = tracefs_root();
	int d, t;

	memset(tw, 0, sizeof(*tw));
	for (d = 0; d < 2; d++)
		for (t = 0; t < MAX_TP; t++)
			tw->fd[d][t] = -1;
	ASSERT_GE(MAX_TP, nr);
	if (!root) {
		snprintf(tw->why, sizeof(tw->why), "no tracefs, and mounting it failed: %s",
			 strerror(errno));
		return -1;
	}
	for (t = 0; t < nr; t++) {
		const char *filter;
		long long id = tracepoint_id(root, names[t], &filter);

		if (id < 0) {
			snprintf(tw->why, sizeof(tw->why), "no tracepoint %s in %s/events",
				 names[t], root);
			close_twins(tw);
			return -1;
		}
		tw->name[t] = names[t];
		for (d = 0; d < 2; d++) {
			struct perf_event_attr attr = twin_attr(id, !d, inherit, enabled);
			int fd = perf_open(&attr, pid, cpu);

			ASSERT_LE(0, fd)
				TH_LOG("perf_event_open(%s%s, pid %d, cpu %d): %s", names[t],
				       d ? "" : " deferred", pid, cpu, strerror(errno));
			tw->fd[d][t] = fd;
			if (filter)
				ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_SET_FILTER, filter))
					TH_LOG("filter \"%s\" of %s: %s", filter, names[t],
					       strerror(errno));
			ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ID, &tw->id[d][t]));
			if (!t) {
				ASSERT_EQ(0, ring_map(&tw->r[d], fd, &attr, DATA_PAGES))
					TH_LOG("mmap: %s", strerror(errno));
			} else {
				ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, tw->r[d].fd))
					TH_LOG("PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
			}
		}
		tw->nr++;
	}
	return 0;
}

static inline void drain_twins(struct twins *tw)
{
	ring_drain(&tw->r[0]);
	ring_drain(&tw->r[1]);
}

/* How the deferred samples of a set of hits compared with their twins. */
enum {
	BAD_UNPAIRED,
	BAD_USER,
	BAD_NO_RECORD,
	BAD_RECORDS,
	BAD_TID,
	BAD_NO_TRUTH,
	BAD_SHORT,
	BAD_STACK,
	BAD_MALFORMED,
	NR_BAD,
};

static const char * const bad_what[NR_BAD] = {
	[BAD_UNPAIRED]	= "want one sample in each twin, in step, for every hit",
	[BAD_USER]	= "want no inline user part in samples with a cookie",
	[BAD_NO_RECORD]	= "want a record for every cookie",
	[BAD_RECORDS]	= "want one record per cookie in a buffer",
	[BAD_TID]	= "want the record of a cookie to carry its sample's tid",
	[BAD_NO_TRUTH]	= "want no user stack where the in-place walk found none",
	[BAD_SHORT]	= "want both walks to have their first frames",
	[BAD_STACK]	= "want the joined user stack = the in-place walk of the hit",
	[BAD_MALFORMED]	= "want well-formed records",
};

/* One tracepoint hit: its deferred sample and its in-place twin. */
struct pair {
	int tp;				/* index in twins */
	const struct ring_record *def, *inl;
	const __u64 *want, *got;	/* in-place user part, joined one */
	__u64 want_nr, got_nr;
	bool agree;
};

struct agreement {
	int from;			/* the first frame compared */
	struct pair *pair;
	size_t nr_pair;
	int joined;			/* deferred samples joined with a record */
	int in_place;			/* deferred samples with cookie 0 */
	int agree;			/* hits whose two stacks are equal */
	int lost;			/* lost records, in either buffer */
	int bad[NR_BAD];
	char msg[NR_BAD][320];		/* the first of each kind */
};

static __printf(3, 4) void note(struct agreement *ag, int kind, const char *fmt, ...)
{
	va_list ap;

	if (ag->bad[kind]++)
		return;
	va_start(ap, fmt);
	vsnprintf(ag->msg[kind], sizeof(ag->msg[kind]), fmt, ap);
	va_end(ap);
}

static inline bool sample_of(const struct ring_record *rr, __u64 id, pid_t tid)
{
	return rr->type == PERF_RECORD_SAMPLE && rr->id == id &&
	       (!tid || rr->tid == (__u32)tid);
}

/* The n-th (from 0) sample of event id and tid in r, NULL if none. */
static const struct ring_record *nth_sample(const struct ring *r, __u64 id,
					    pid_t tid, size_t n)
{
	size_t i;

	for (i = 0; i < r->nr_rec; i++)
		if (sample_of(&r->rec[i], id, tid) && !n--)
			return &r->rec[i];
	return NULL;
}

static inline int count_samples(const struct ring *r, __u64 id, pid_t tid)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		n += sample_of(&r->rec[i], id, tid);
	return n;
}

static inline int lost_records(const struct ring *r)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		if (r->rec[i].type == PERF_RECORD_LOST ||
		    r->rec[i].type == PERF_RECORD_LOST_SAMPLES)
			n += r->rec[i].lost ? r->rec[i].lost : 1;
	return n;
}

static inline __u64 frame(const __u64 *ips, __u64 nr, __u64 k)
{
	return k < nr ? ips[k] : 0;
}

/*
 * Compare the deferred sample d of tracepoint t with its twin inl, the
 * sample of the same hit in the other buffer.
 */
static inline void compare_hit(struct agreement *ag, const struct twins *tw, int t,
			       const struct ring_record *d, const struct ring_record *inl,
			       __u64 min_depth)
{
	const struct ring_record *rec = NULL;
	const char *name = tw->name[t];
	struct pair *p;
	__u64 k, n;
	size_t i, at;
	int nrec;

	if (!inl) {
		note(ag, BAD_UNPAIRED, "%s: tid %u: deferred sample at %llu ns has no twin",
		     name, d->tid, (unsigned long long)d->time);
		return;
	}
	/* The previous hit of this tracepoint and thread came before both. */
	for (i = ag->nr_pair; i-- > 0;) {
		const struct pair *prev = &ag->pair[i];

		if (prev->tp != t || prev->def->tid != d->tid)
			continue;
		if (prev->def->time > inl->time || prev->inl->time > d->time)
			note(ag, BAD_UNPAIRED,
			     "%s: tid %u: twins out of step: %llu/%llu ns, then %llu/%llu ns",
			     name, d->tid, (unsigned long long)prev->def->time,
			     (unsigned long long)prev->inl->time,
			     (unsigned long long)d->time,
			     (unsigned long long)inl->time);
		break;
	}

	p = &ag->pair[ag->nr_pair++];
	p->tp = t;
	p->def = d;
	p->inl = inl;
	inline_user_part(inl, &p->want, &p->want_nr);
	if (d->cookie) {
		if (has_user_context(d))
			note(ag, BAD_USER, "%s: tid %u, cookie %#llx", name, d->tid,
			     (unsigned long long)d->cookie);
		nrec = records_of_cookie(&tw->r[0], d->cookie, &at);
		if (!nrec) {
			note(ag, BAD_NO_RECORD, "%s: tid %u, cookie %#llx",
			     name, d->tid, (unsigned long long)d->cookie);
			return;
		}
		rec = &tw->r[0].rec[at];
		if (nrec > 1)
			note(ag, BAD_RECORDS, "%s: cookie %#llx has %d records",
			     name, (unsigned long long)d->cookie, nrec);
		if (rec->tid != d->tid) {
			note(ag, BAD_TID, "%s: sample of tid %u, cookie %#llx: record of tid %u",
			     name, d->tid, (unsigned long long)d->cookie, rec->tid);
			return;
		}
		p->got = rec->ips;
		p->got_nr = rec->ips ? rec->nr : 0;
		ag->joined++;
	} else {
		ag->in_place++;
		inline_user_part(d, &p->got, &p->got_nr);
	}

	if (!p->want_nr) {
		if (p->got_nr)
			note(ag, BAD_NO_TRUTH,
			     "%s: tid %u, cookie %#llx: %llu frames from %#llx, none in place",
			     name, d->tid, (unsigned long long)d->cookie,
			     (unsigned long long)p->got_nr, (unsigned long long)p->got[0]);
		return;
	}
	n = p->want_nr < p->got_nr ? p->want_nr : p->got_nr;
	if (n < min_depth) {
		note(ag, BAD_SHORT,
		     "%s: tid %u, cookie %#llx: %llu frames joined, %llu in place from %#llx, want %llu",
		     name, d->tid, (unsigned long long)d->cookie,
		     (unsigned long long)p->got_nr, (unsigned long long)p->want_nr,
		     (unsigned long long)p->want[0], (unsigned long long)min_depth);
		return;
	}
	for (k = ag->from; k < n; k++)
		if (p->got[k] != p->want[k])
			break;
	if (k < n) {
		note(ag, BAD_STACK,
		     "%s: tid %u, cookie %#llx: frame %llu is %#llx, in place %#llx; joined %#llx %#llx %#llx (%llu), in place %#llx %#llx %#llx (%llu)",
		     name, d->tid, (unsigned long long)d->cookie,
		     (unsigned long long)k, (unsigned long long)p->got[k],
		     (unsigned long long)p->want[k],
		     (unsigned long long)frame(p->got, p->got_nr, 0),
		     (unsigned long long)frame(p->got, p->got_nr, 1),
		     (unsigned long long)frame(p->got, p->got_nr, 2),
		     (unsigned long long)p->got_nr,
		     (unsigned long long)frame(p->want, p->want_nr, 0),
		     (unsigned long long)frame(p->want, p->want_nr, 1),
		     (unsigned long long)frame(p->want, p->want_nr, 2),
		     (unsigned long long)p->want_nr);
		return;
	}
	p->agree = true;
	ag->agree++;
}

/*
 * Pair the samples of the twins hit by hit (tid 0: every thread), the n-th
 * sample of a tracepoint and thread in one buffer with the n-th in the
 * other, and compare each deferred sample, joined with its record, with
 * its twin: the first min(frames) frames must be equal from frame "from"
 * on, at least min_depth of them.
 */
static inline void compare_twins(struct __test_metadata *_metadata, const struct twins *tw,
				 pid_t tid, int from, __u64 min_depth, struct agreement *ag)
{
	const struct ring *rd = &tw->r[0], *ri = &tw->r[1];
	size_t i, j, n;
	int t, nd, ni;

	memset(ag, 0, sizeof(*ag));
	ag->from = from;
	ag->pair = calloc(rd->nr_samples + 1, sizeof(*ag->pair));
	ASSERT_FALSE(!ag->pair);
	ag->lost = lost_records(rd) + lost_records(ri);
	if (rd->nr_malformed || ri->nr_malformed)
		note(ag, BAD_MALFORMED, "%s", rd->nr_malformed ? rd->why : ri->why);

	for (t = 0; t < tw->nr; t++) {
		for (i = 0; i < rd->nr_rec; i++) {
			const struct ring_record *d = &rd->rec[i];

			if (!sample_of(d, tw->id[0][t], tid))
				continue;
			for (j = 0, n = 0; j < i; j++)
				n += sample_of(&rd->rec[j], tw->id[0][t], d->tid);
			compare_hit(ag, tw, t, d, nth_sample(ri, tw->id[1][t], d->tid, n),
				    min_depth);
		}
		nd = count_samples(rd, tw->id[0][t], tid);
		ni = count_samples(ri, tw->id[1][t], tid);
		if (ni > nd) {
			note(ag, BAD_UNPAIRED, "%s: %d samples walked in place, %d deferred",
			     tw->name[t], ni, nd);
			ag->bad[BAD_UNPAIRED] += ni - nd - 1;
		}
	}
}

/*
 * Every hit compared cleanly, and at least min_joined of them were
 * deferred and joined: a pass means the deferral was at work.
 */
static inline void expect_agreement(struct __test_metadata *_metadata,
				    const struct agreement *ag, int min_joined)
{
	int k;

	TH_LOG("%zu hits: %d joined, %d walked in place, %d agree, %d records lost",
	       ag->nr_pair, ag->joined, ag->in_place, ag->agree, ag->lost);
	EXPECT_LE(min_joined, ag->joined)
		TH_LOG("want %d deferred samples joined with their records, saw %d",
		       min_joined, ag->joined);
	for (k = 0; k < NR_BAD; k++) {
		int bad = ag->bad[k];

		EXPECT_EQ(0, bad)
			TH_LOG("%s; %d did not (first: %s)", bad_what[k], bad,
			       ag->msg[k]);
	}
}

/* Hits of tracepoint t whose in-place user stack starts with a, b, c. */
static inline int hits_from(const struct agreement *ag, int t, unsigned long a,
			    unsigned long b, unsigned long c)
{
	size_t i;
	int n = 0;

	for (i = 0; i < ag->nr_pair; i++) {
		const struct pair *p = &ag->pair[i];

		if (p->tp != t || frame(p->want, p->want_nr, 0) != a)
			continue;
		if (b && frame(p->want, p->want_nr, 1) != b)
			continue;
		if (c && frame(p->want, p->want_nr, 2) != c)
			continue;
		n++;
	}
	return n;
}

static inline int hits_of(const struct agreement *ag, int t)
{
	size_t i;
	int n = 0;

	for (i = 0; i < ag->nr_pair; i++)
		n += ag->pair[i].tp == t;
	return n;
}

#endif /* DEFERRED_EXACT_H */
