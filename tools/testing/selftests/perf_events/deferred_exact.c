// SPDX-License-Identifier: GPL-2.0
/*
 * Exact stacks for PERF_SAMPLE_CALLCHAIN_DEFERRED: where the kernel rewrites
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
 * Built 64-bit, and 32-bit as deferred_exact_32, a compat task: its frames
 * are 4-byte words (so are the fake frames that the ptrace test builds), and
 * x86 ftrace ignores compat system calls, so that the syscalls/ tracepoints
 * are replaced with filtered raw_syscalls/ ones (SYS_ENTER_TP()). Pointers
 * are checked as truth values (ASSERT_FALSE(!p)): the harness would print
 * them as 64-bit integers.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <ucontext.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_exact_call.h"

#define DATA_PAGES	64
#define MAX_TP		4	/* tracepoints sampled by one test */
#define MIN_DEPTH	3	/* frames both walks must have, at least */
#define MIN_HITS	20	/* compared hits a test needs to mean something */
#define ROUNDS		25
#define MAX_STOPS	2000	/* ptrace stops of the tracee, at most */
#define EXIT_ARG	"--deferred-exact-exit"

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

/* Wait for "go" with a raw system call: no libc code while sampled. */
static __attribute__((noipa)) long wait_go(int fd)
{
	unsigned long ip;
	char x;

	return raw_syscall(ip, __NR_read, fd, &x, 1, 0, 0, 0);
}

/*
 * Enable or disable every event this thread opened, with a raw system call:
 * even its exit, sampled, has a frame-pointer chain to walk.
 */
static __attribute__((noipa)) long sampling(bool on)
{
	unsigned long ip;

	return raw_syscall(ip, __NR_prctl, on ? PR_TASK_PERF_EVENTS_ENABLE :
			   PR_TASK_PERF_EVENTS_DISABLE, 0, 0, 0, 0, 0);
}

/*
 * The id of the tracepoint of spec "system/name[ if FILTER]", -1 if there
 * is no such tracepoint; *filter is FILTER, or NULL.
 */
static long long tracepoint_id(const char *root, const char *spec,
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

static struct perf_event_attr twin_attr(__u64 id, bool deferred, bool inherit,
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

static void close_twins(struct twins *tw)
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
static int open_twins(struct __test_metadata *_metadata, struct twins *tw,
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

static void drain_twins(struct twins *tw)
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

static bool sample_of(const struct ring_record *rr, __u64 id, pid_t tid)
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

static int count_samples(const struct ring *r, __u64 id, pid_t tid)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		n += sample_of(&r->rec[i], id, tid);
	return n;
}

static int lost_records(const struct ring *r)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		if (r->rec[i].type == PERF_RECORD_LOST ||
		    r->rec[i].type == PERF_RECORD_LOST_SAMPLES)
			n += r->rec[i].lost ? r->rec[i].lost : 1;
	return n;
}

static __u64 frame(const __u64 *ips, __u64 nr, __u64 k)
{
	return k < nr ? ips[k] : 0;
}

/*
 * Compare the deferred sample d of tracepoint t with its twin inl, the
 * sample of the same hit in the other buffer.
 */
static void compare_hit(struct agreement *ag, const struct twins *tw, int t,
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
static void compare_twins(struct __test_metadata *_metadata, const struct twins *tw,
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
static void expect_agreement(struct __test_metadata *_metadata,
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
static int hits_from(const struct agreement *ag, int t, unsigned long a,
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

static int hits_of(const struct agreement *ag, int t)
{
	size_t i;
	int n = 0;

	for (i = 0; i < ag->nr_pair; i++)
		n += ag->pair[i].tp == t;
	return n;
}

/* Signals this thread sends itself, from known call sites. */
struct sig_sites {
	pid_t pid, tid;
	unsigned long kill_ip;		/* after tgkill() of an unblocked signal */
	unsigned long block_ip, usr1_ip, usr2_ip;
	unsigned long unblock_ip;	/* after rt_sigprocmask(SIG_UNBLOCK) */
};

static int handled;

static void count_signal(int sig)
{
	__atomic_fetch_add(&handled, 1, __ATOMIC_RELAXED);
}

/* tgkill() of an unblocked signal: delivered on the way out of it. */
static __attribute__((noipa)) void kill_self(struct sig_sites *s)
{
	raw_syscall(s->kill_ip, __NR_tgkill, s->pid, s->tid, SIGUSR1, 0, 0, 0);
}

/*
 * Two signals made pending while blocked, then unblocked by one
 * rt_sigprocmask(): both are delivered on its way out, the second one on
 * top of the first one's frame, in one kernel stay.
 */
static __attribute__((noipa)) void unblock_two(struct sig_sites *s)
{
	/* The kernel's sigset_t: 64 bits, also for a compat task. */
	__u64 mask = 1ULL << (SIGUSR1 - 1) | 1ULL << (SIGUSR2 - 1);

	raw_syscall(s->block_ip, __NR_rt_sigprocmask, SIG_BLOCK, &mask, 0,
		    sizeof(mask), 0, 0);
	raw_syscall(s->usr1_ip, __NR_tgkill, s->pid, s->tid, SIGUSR1, 0, 0, 0);
	raw_syscall(s->usr2_ip, __NR_tgkill, s->pid, s->tid, SIGUSR2, 0, 0, 0);
	raw_syscall(s->unblock_ip, __NR_rt_sigprocmask, SIG_UNBLOCK, &mask, 0,
		    sizeof(mask), 0, 0);
}

/*
 * Signal delivery rewrites the user registers (and writes a frame): the
 * walk of the samples taken before it, in the system call that made the
 * signal pending (signal_generate) or in get_signal() (signal_deliver),
 * runs first and sees the system call's stack; a signal delivered on top
 * of another one's frame in the same stay sees the first handler's entry.
 */
TEST(signal_delivery_walks_before_the_frame)
{
	static const char * const tps[] = {
		"signal/signal_generate", "signal/signal_deliver",
	};
	struct sigaction sa = { .sa_handler = count_signal };
	struct sig_sites s = { .pid = getpid(), .tid = gettid_() };
	int i, generate, deliver, first, nested;
	struct agreement ag;
	struct twins tw;

	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	ASSERT_EQ(0, sigaction(SIGUSR2, &sa, NULL));
	if (open_twins(_metadata, &tw, tps, ARRAY_SIZE(tps), 0, -1, false, false))
		SKIP(return, "%s", tw.why);

	ASSERT_EQ(0, sampling(true));
	for (i = 0; i < ROUNDS; i++) {
		kill_self(&s);
		unblock_two(&s);
		drain_twins(&tw);
	}
	ASSERT_EQ(0, sampling(false));
	drain_twins(&tw);
	ASSERT_EQ(3 * ROUNDS, __atomic_load_n(&handled, __ATOMIC_RELAXED));

	compare_twins(_metadata, &tw, s.tid, 0, MIN_DEPTH, &ag);
	expect_agreement(_metadata, &ag, MIN_HITS);
	generate = hits_of(&ag, 0);
	deliver = hits_of(&ag, 1);
	first = hits_from(&ag, 1, s.unblock_ip, 0, 0);
	nested = hits_from(&ag, 1, (unsigned long)count_signal, 0, 0);
	EXPECT_LE(MIN_HITS, generate)
		TH_LOG("want %d signal_generate hits, saw %d", MIN_HITS, generate);
	EXPECT_LE(MIN_HITS, deliver)
		TH_LOG("want %d signal_deliver hits, saw %d", MIN_HITS, deliver);
	EXPECT_LE(MIN_HITS, first)
		TH_LOG("want %d deliveries walked in place from rt_sigprocmask() at %#lx, saw %d",
		       MIN_HITS, s.unblock_ip, first);
	EXPECT_LE(MIN_HITS, nested)
		TH_LOG("want %d deliveries walked in place from the handler %#lx, saw %d",
		       MIN_HITS, (unsigned long)count_signal, nested);
	TH_LOG("%d signal_generate, %d signal_deliver hits (%d on a handler's frame)",
	       generate, deliver, nested);

	free(ag.pair);
	close_twins(&tw);
}

/*
 * rt_sigreturn restores the registers saved in the signal frame: a sample
 * taken at its entry is walked first, on the handler's stack (ips[0] in
 * the restorer), and the stay ends, so that a sample at its exit sees the
 * restored context. The same holds for the compat sigreturn, with which
 * i386 glibc returns from an sa_handler: the 32-bit build samples both.
 */
TEST(sigreturn_walks_before_restoring)
{
	static const char * const tps[] = {
#ifdef __x86_64__
		SYS_ENTER_TP(rt_sigreturn),
#else
		"raw_syscalls/sys_enter if id == " TP_NR(__NR_sigreturn)
		" || id == " TP_NR(__NR_rt_sigreturn),
#endif
		"raw_syscalls/sys_exit",
	};
	struct sigaction sa = { .sa_handler = count_signal }, old;
	struct sig_sites s = { .pid = getpid(), .tid = gettid_() };
	int i, entries, restorer = 0, exits, restored;
	unsigned long start;
	struct agreement ag;
	struct twins tw;
	size_t k;

	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	ASSERT_EQ(0, sigaction(SIGUSR1, NULL, &old));
	start = (unsigned long)old.sa_restorer;
	if (open_twins(_metadata, &tw, tps, ARRAY_SIZE(tps), 0, -1, false, false))
		SKIP(return, "%s", tw.why);

	/*
	 * Every system call exit is sampled: no drain in the loop, whose
	 * allocations may make some from libc (no frame pointers there).
	 */
	ASSERT_EQ(0, sampling(true));
	for (i = 0; i < ROUNDS; i++)
		kill_self(&s);
	ASSERT_EQ(0, sampling(false));
	drain_twins(&tw);
	ASSERT_EQ(ROUNDS, __atomic_load_n(&handled, __ATOMIC_RELAXED));

	compare_twins(_metadata, &tw, s.tid, 0, MIN_DEPTH, &ag);
	expect_agreement(_metadata, &ag, MIN_HITS);
	entries = hits_of(&ag, 0);
	exits = hits_of(&ag, 1);
	/* sys_exit after tgkill() and after rt_sigreturn: both at kill_ip. */
	restored = hits_from(&ag, 1, s.kill_ip, 0, 0);
	for (k = 0; k < ag.nr_pair; k++) {
		__u64 ip = frame(ag.pair[k].want, ag.pair[k].want_nr, 0);

		if (ag.pair[k].tp == 0 && ip != s.kill_ip &&
		    (!start || (ip > start && ip < start + 64)))
			restorer++;
	}
	EXPECT_LE(MIN_HITS, entries)
		TH_LOG("want %d rt_sigreturn entries, saw %d", MIN_HITS, entries);
	EXPECT_LE(MIN_HITS, restorer)
		TH_LOG("want %d rt_sigreturn entries walked from the restorer %#lx, saw %d",
		       MIN_HITS, start, restorer);
	EXPECT_LE(2 * MIN_HITS, restored)
		TH_LOG("want %d system call exits walked in place from tgkill() at %#lx, saw %d",
		       2 * MIN_HITS, s.kill_ip, restored);
	TH_LOG("%d rt_sigreturn entries (%d from the restorer), %d exits (%d at tgkill())",
	       entries, restorer, exits, restored);

	free(ag.pair);
	close_twins(&tw);
}

/* The probed call (deferred_exact_call.h) and its caller. */
static __attribute__((noipa)) void emulated_call(void)
{
	asm volatile(".globl exact_call_site\n"
		     ".hidden exact_call_site\n"
		     "exact_call_site:\n\t"
		     "call exact_call_target"
		     : : : "memory");
}

/* The offset in this program's file of an address of its code. */
static long file_offset(unsigned long addr)
{
	unsigned long start, end, off;
	char line[512], perm[8];
	long ret = -1;
	FILE *f;

	f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (ret < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %lx", &start, &end, perm, &off) == 4 &&
		    addr >= start && addr < end)
			ret = addr - start + off;
	fclose(f);
	return ret;
}

/* Write one line to a tracefs file: 0, or -errno. */
static int tracefs_write(const char *root, const char *file, const char *line)
{
	char path[128];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", root, file);
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -errno;
	if (write(fd, line, strlen(line)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* A counting uprobe event on this program's address addr: installs the probe. */
static int open_uprobe(unsigned long addr)
{
	struct perf_event_attr attr = {
		.size		= sizeof(attr),
		.disabled	= 1,
	};
	long offset = file_offset(addr);
	char buf[32] = "";
	FILE *f;

	f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	if (!buf[0] || offset < 0)
		return -1;
	attr.type = atoi(buf);
	attr.config1 = (__u64)(unsigned long)"/proc/self/exe";
	attr.config2 = offset;
	return perf_open(&attr, 0, -1);
}

#define UPROBE_RESUME	"deferred_exact/uprobe_resume"

/*
 * A uprobe on a call instruction: the kernel emulates the call inside the
 * stay of the breakpoint's trap, after the probe's handlers. A sample
 * taken in that stay before (here of a kprobe on uprobe_notify_resume(),
 * which runs the handlers and the emulation) is joined with the stack at
 * the trap, not in the call's target: the walk runs as the handling
 * begins, before the handlers' RCU read section and the emulation, with
 * the registers of the trap (the breakpoint's address plus one), the same
 * stack its twin walked at the trap found.
 */
TEST(uprobe_call_emulation_walks_before_the_call)
{
	static const char * const tps[] = { UPROBE_RESUME };
	unsigned long site = (unsigned long)exact_call_site;
	const char *root = tracefs_root();
	int i, uprobe, at_call = 0, in_target = 0;
	struct agreement ag;
	struct twins tw;
	size_t k;

	if (!root)
		SKIP(return, "no tracefs");
	if (tracefs_write(root, "kprobe_events",
			  "p:" UPROBE_RESUME " uprobe_notify_resume\n"))
		SKIP(return, "no kprobe on uprobe_notify_resume (CONFIG_KPROBE_EVENTS): %s",
		     strerror(errno));
	uprobe = open_uprobe(site);
	if (uprobe < 0) {
		tracefs_write(root, "kprobe_events", "-:" UPROBE_RESUME "\n");
		SKIP(return, "no uprobe PMU (CONFIG_UPROBE_EVENTS): %s", strerror(errno));
	}
	if (open_twins(_metadata, &tw, tps, 1, 0, -1, false, false)) {
		close(uprobe);
		tracefs_write(root, "kprobe_events", "-:" UPROBE_RESUME "\n");
		SKIP(return, "%s", tw.why);
	}

	ASSERT_EQ(0, sampling(true));
	for (i = 0; i < ROUNDS; i++)
		emulated_call();
	ASSERT_EQ(0, sampling(false));
	drain_twins(&tw);

	compare_twins(_metadata, &tw, gettid_(), 0, MIN_DEPTH, &ag);
	expect_agreement(_metadata, &ag, MIN_HITS);
	for (k = 0; k < ag.nr_pair; k++) {
		const struct pair *p = &ag.pair[k];

		if (!p->def->cookie || !p->got_nr)
			continue;
		at_call += p->got[0] == site + 1;
		in_target += p->got[0] == (unsigned long)exact_call_target;
		EXPECT_EQ((__u64)site + 1, frame(p->want, p->want_nr, 0))
			TH_LOG("walked at the trap: expected the breakpoint's address + 1");
	}
	EXPECT_EQ(ag.joined, at_call)
		TH_LOG("want stacks that start at the trap %#lx: %d of %d joined, %d in its target",
		       site + 1, at_call, ag.joined, in_target);

	free(ag.pair);
	close_twins(&tw);
	close(uprobe);
	EXPECT_EQ(0, tracefs_write(root, "kprobe_events", "-:" UPROBE_RESUME "\n"));
}

/* What the tracee of ptrace_register_writes_end_the_stay knows of itself. */
struct tracee {
	pid_t pid;
	unsigned long getppid_ip;	/* after its getppid() */
	unsigned long tgkill_ip;	/* after its tgkill() */
	unsigned long tgkill_bp;	/* the frame pointer there */
	int handled;
	int calls;
};

static struct tracee tracee;

/* Never run: the tracer points the user IP here, and the IP goes back. */
static __attribute__((noipa)) void detour_a(void)
{
	asm volatile("nop" ::: "memory");
}

static __attribute__((noipa)) void detour_b(void)
{
	asm volatile("nop; nop" ::: "memory");
}

/* Named as callers in a fake frame-pointer chain; never run either. */
static __attribute__((noipa)) void fake_caller_1(void)
{
	asm volatile("nop; nop; nop" ::: "memory");
}

static __attribute__((noipa)) void fake_caller_2(void)
{
	asm volatile("nop; nop; nop; nop" ::: "memory");
}

/*
 * Two frames of a frame-pointer chain in f[], on the stack of the function
 * whose frame pointer is bp: fake_caller_1 called from fake_caller_2
 * called from that function. f[] lies above the stack pointer and below bp,
 * so that either walk follows the chain: f, f + 2, bp, ...
 */
static void fake_frames(unsigned long *f, unsigned long bp)
{
	f[0] = (unsigned long)&f[2];
	f[1] = (unsigned long)fake_caller_1;
	f[2] = bp;
	f[3] = (unsigned long)fake_caller_2;
}

/* A call after the system call: the caller is no leaf, f[] above its sp. */
static __attribute__((noipa)) void tracee_count(unsigned long *f)
{
	tracee.calls += f[0] != 0;
}

/*
 * getppid(), with the fake frames in its first argument register and
 * detour_a in its second (rdi and rsi; ebx and ecx on i386): at the
 * syscall-entry stop the tracer moves the user IP to detour_a and the
 * frame pointer to the fake frames, and puts both back at the exit stop.
 */
static __attribute__((noipa)) void tracee_getppid(void)
{
	unsigned long f[4];

	fake_frames(f, (unsigned long)__builtin_frame_address(0));
	raw_syscall(tracee.getppid_ip, __NR_getppid, f, detour_a, 0, 0, 0, 0);
	tracee_count(f);
}

/*
 * tgkill() of SIGUSR1, with the fake frames in its fourth argument
 * register and detour_b in its fifth (r10 and r8; esi and edi on i386): at
 * the signal-delivery stop the tracer moves the user IP and frame pointer
 * there, and the handler puts them back.
 */
static __attribute__((noipa)) void tracee_tgkill(void)
{
	unsigned long f[4];

	tracee.tgkill_bp = (unsigned long)__builtin_frame_address(0);
	fake_frames(f, tracee.tgkill_bp);
	raw_syscall(tracee.tgkill_ip, __NR_tgkill, tracee.pid, tracee.pid, SIGUSR1,
		    f, detour_b, 0);
	tracee_count(f);
}

#ifdef __x86_64__
#define UC_IP		REG_RIP
#define UC_FP		REG_RBP
#else
#define UC_IP		REG_EIP
#define UC_FP		REG_EBP
#endif

static void tracee_handler(int sig, siginfo_t *info, void *ctx)
{
	greg_t *regs = ((ucontext_t *)ctx)->uc_mcontext.gregs;

	if (regs[UC_IP] == (greg_t)(unsigned long)detour_b) {
		regs[UC_IP] = tracee.tgkill_ip;
		regs[UC_FP] = tracee.tgkill_bp;
	}
	tracee.handled++;
}

static void tracee_main(void)
{
	struct sigaction sa = {
		.sa_sigaction	= tracee_handler,
		.sa_flags	= SA_SIGINFO,
	};
	int i;

	tracee.pid = getpid();
	if (sigaction(SIGUSR1, &sa, NULL) || sigaction(SIGUSR2, &sa, NULL) ||
	    ptrace(PTRACE_TRACEME, 0, NULL, NULL) || raise(SIGSTOP))
		_exit(126);
	for (i = 0; i < ROUNDS; i++) {
		tracee_getppid();
		tracee_tgkill();
	}
	_exit(tracee.handled == 2 * ROUNDS && tracee.calls == 2 * ROUNDS ? 0 : 125);
}

/*
 * The registers of struct user_regs_struct the tracer reads and writes:
 * the system call number, the user IP, the frame pointer, and the raw
 * system call's arguments a0, a1, a3 and a4.
 */
#ifdef __x86_64__
#define R_NR(r)		((r).orig_rax)
#define R_IP(r)		((r).rip)
#define R_FP(r)		((r).rbp)
#define R_A0(r)		((r).rdi)
#define R_A1(r)		((r).rsi)
#define R_A3(r)		((r).r10)
#define R_A4(r)		((r).r8)
#else
#define R_NR(r)		((r).orig_eax)
#define R_IP(r)		((r).eip)
#define R_FP(r)		((r).ebp)
#define R_A0(r)		((r).ebx)
#define R_A1(r)		((r).ecx)
#define R_A3(r)		((r).esi)
#define R_A4(r)		((r).edi)
#endif

/* The tracer's side: what it changed, and where. */
struct tracer {
	pid_t child;
	struct user_regs_struct saved;	/* at the getppid() entry stop */
	bool moved;			/* saved holds what to put back */
	unsigned long getppid_ip, tgkill_ip;
	int entry_writes, exit_writes, signal_writes, stops;
};

/* Handle one ptrace stop; returns the signal to resume with, -1 on error. */
static int tracer_stop(struct tracer *t, int status)
{
	struct __ptrace_syscall_info info;
	struct user_regs_struct regs;
	int sig = WSTOPSIG(status);

	if (ptrace(PTRACE_GETREGS, t->child, NULL, &regs))
		return -1;
	if (sig == (SIGTRAP | 0x80)) {
		bool entry;

		if (ptrace(PTRACE_GET_SYSCALL_INFO, t->child, (void *)sizeof(info), &info) <= 0)
			return -1;
		entry = info.op == PTRACE_SYSCALL_INFO_ENTRY;

		if (R_NR(regs) == __NR_getppid && entry &&
		    (unsigned long)R_A1(regs) == (unsigned long)detour_a) {
			t->saved = regs;
			t->moved = true;
			t->getppid_ip = R_IP(regs);
			R_IP(regs) = R_A1(regs);
			R_FP(regs) = R_A0(regs);
			t->entry_writes++;
		} else if (R_NR(regs) == __NR_getppid && !entry && t->moved) {
			R_IP(regs) = R_IP(t->saved);
			R_FP(regs) = R_FP(t->saved);
			t->moved = false;
			t->exit_writes++;
			/* Delivered on the way out, in the same stay. */
			if (syscall(SYS_tgkill, t->child, t->child, SIGUSR2))
				return -1;
		} else {
			if (R_NR(regs) == __NR_tgkill && !entry)
				t->tgkill_ip = R_IP(regs);
			return 0;
		}
		return ptrace(PTRACE_SETREGS, t->child, NULL, &regs) ? -1 : 0;
	}
	if (sig == SIGUSR1 && (unsigned long)R_A4(regs) == (unsigned long)detour_b) {
		R_IP(regs) = R_A4(regs);
		R_FP(regs) = R_A3(regs);
		t->signal_writes++;
		if (ptrace(PTRACE_SETREGS, t->child, NULL, &regs))
			return -1;
	}
	return sig;
}

/*
 * A tracer rewrites the user registers of its tracee in ptrace stops: the
 * pending walk runs before each stop, and the stay ends there, so every
 * sample sees the registers of its own moment.
 *  - getppid(): moved at the syscall-entry stop, put back at the exit stop,
 *    which also sends SIGUSR2. The samples at sys_enter/sys_exit_getppid
 *    see the moved registers; the SIGUSR2 delivery, after the exit stop in
 *    the same stay, the ones put back.
 *  - tgkill(SIGUSR1): the sample at sys_exit_tgkill sees the call site;
 *    at the signal-delivery stop (inside get_signal()) the tracer moves the
 *    registers, and the delivery, later in the same stay, sees them moved.
 */
TEST(ptrace_register_writes_end_the_stay)
{
	static const char * const tps[] = {
		SYS_ENTER_TP(getppid), SYS_EXIT_TP(getppid),
		SYS_EXIT_TP(tgkill), "signal/signal_deliver",
	};
	unsigned long a = (unsigned long)detour_a, b = (unsigned long)detour_b;
	unsigned long f1 = (unsigned long)fake_caller_1;
	unsigned long f2 = (unsigned long)fake_caller_2;
	int moved, getppid, tgkill, put_back, delivered, status, sig;
	struct tracer t = { 0 };
	struct agreement ag;
	struct twins tw;

	t.child = fork();
	ASSERT_LE(0, t.child);
	if (!t.child)
		tracee_main();

	ASSERT_EQ(t.child, waitpid(t.child, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP)
		TH_LOG("tracee status %#x, expected its SIGSTOP", status);
	ASSERT_EQ(0, ptrace(PTRACE_SETOPTIONS, t.child, NULL,
			    (void *)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)));
	if (open_twins(_metadata, &tw, tps, ARRAY_SIZE(tps), t.child, -1, false, true)) {
		kill(t.child, SIGKILL);
		waitpid(t.child, &status, 0);
		SKIP(return, "%s", tw.why);
	}

	sig = 0;
	for (;;) {
		ASSERT_EQ(0, ptrace(PTRACE_SYSCALL, t.child, NULL, (void *)(long)sig))
			TH_LOG("PTRACE_SYSCALL: %s", strerror(errno));
		ASSERT_EQ(t.child, waitpid(t.child, &status, 0));
		drain_twins(&tw);
		if (!WIFSTOPPED(status))
			break;
		sig = tracer_stop(&t, status);
		ASSERT_LE(0, sig) TH_LOG("stop %#x: %s", status, strerror(errno));
		ASSERT_GT(MAX_STOPS, ++t.stops)
			TH_LOG("the tracee is still running after %d stops", t.stops);
	}
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("tracee status %#x, expected exit 0", status);
	EXPECT_EQ(ROUNDS, t.entry_writes);
	EXPECT_EQ(ROUNDS, t.exit_writes);
	EXPECT_EQ(ROUNDS, t.signal_writes);

	compare_twins(_metadata, &tw, t.child, 0, MIN_DEPTH, &ag);
	expect_agreement(_metadata, &ag, MIN_HITS);
	getppid = hits_of(&ag, 0) + hits_of(&ag, 1);
	moved = hits_from(&ag, 0, a, f1, f2) + hits_from(&ag, 1, a, f1, f2);
	tgkill = hits_from(&ag, 2, t.tgkill_ip, 0, 0);
	put_back = hits_from(&ag, 3, t.getppid_ip, 0, 0);
	delivered = hits_from(&ag, 3, b, f1, f2);
	EXPECT_LE(MIN_HITS, getppid)
		TH_LOG("want %d getppid() entries and exits, saw %d", MIN_HITS, getppid);
	EXPECT_EQ(getppid, moved)
		TH_LOG("want getppid() hits walked from the moved regs (%#lx %#lx %#lx), %d of %d",
		       a, f1, f2, moved, getppid);
	EXPECT_LE(MIN_HITS, tgkill)
		TH_LOG("want %d tgkill() exits walked in place from %#lx, saw %d",
		       MIN_HITS, t.tgkill_ip, tgkill);
	EXPECT_LE(MIN_HITS, put_back)
		TH_LOG("want %d SIGUSR2 deliveries walked in place from getppid() at %#lx, saw %d",
		       MIN_HITS, t.getppid_ip, put_back);
	EXPECT_LE(MIN_HITS, delivered)
		TH_LOG("want %d SIGUSR1 deliveries from the moved regs (%#lx %#lx %#lx), saw %d",
		       MIN_HITS, b, f1, f2, delivered);
	TH_LOG("%d stops: %d getppid() hits, %d tgkill() exits, %d + %d deliveries",
	       t.stops, getppid, tgkill, put_back, delivered);

	free(ag.pair);
	close_twins(&tw);
}

/* What the exec-ing thread of exec_from_non_leader_thread tells the test. */
struct exec_share {
	pid_t tid;			/* its tid before the exec */
	unsigned long exec_ip;		/* after its execve() */
};

/* execve() of this test, with the argument that makes it exit at once. */
static __attribute__((noipa)) void exec_self(struct exec_share *sh)
{
	static char * const argv[] = { "deferred_exact", EXIT_ARG, NULL };

	raw_syscall(sh->exec_ip, __NR_execve, "/proc/self/exe", argv, environ,
		    0, 0, 0);
}

static void *exec_thread(void *arg)
{
	struct exec_share *sh = arg;

	__atomic_store_n(&sh->tid, gettid_(), __ATOMIC_RELEASE);
	exec_self(sh);
	_exit(125);		/* execve() failed */
}

/*
 * The process under test, pinned to cpu: once told to go, a second thread
 * execs while the leader waits for it. Exec must kill the leader and wait
 * for it to die on the one CPU, and the thread switches out in de_thread()
 * with its own tid, the leader's tid once the exec is through.
 */
static void exec_child(struct exec_share *sh, int cpu, int ready, int go)
{
	pthread_t thread;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) || write(ready, "r", 1) != 1)
		_exit(126);
	if (wait_go(go) != 1)
		_exit(126);
	if (pthread_create(&thread, NULL, exec_thread, sh))
		_exit(126);
	pthread_join(thread, NULL);
	_exit(124);
}

/* Read tw while child runs, until it exits; returns its wait status. */
static int follow_child(struct twins *tw, pid_t child, double seconds)
{
	double deadline = ring_now() + seconds;
	int status = -1;

	for (;;) {
		drain_twins(tw);
		if (child_done(child, deadline, &status))
			break;
		usleep(1000);
	}
	drain_twins(tw);
	return status;
}

/*
 * A thread that is not the leader execs: the samples taken in the exec
 * while it still has its own tid (at sys_enter_execve, and in de_thread()
 * while it waits for the leader to die) are joined with records of that
 * same tid, or walked in place; no record of the leader's tid, which the
 * thread takes, carries the cookie of a sample of the old tid.
 */
TEST(exec_from_non_leader_thread)
{
	static const char * const tps[] = {
		SYS_ENTER_TP(execve), "sched/sched_switch",
		"sched/sched_process_exec", SYS_EXIT_TP(execve),
	};
	int bad_zero = 0, bad_tid = 0, missing = 0, dup = 0;
	int entered = 0, in_exec = 0, exec_done = 0, from_site;
	char msg[4][200] = { "", "", "", "" };
	int go[2], ready[2], cpu, status, nrec;
	struct exec_share *sh;
	__u64 entered_at = 0;
	struct agreement ag;
	struct twins tw;
	const struct ring *r;
	pid_t child, old;
	size_t i, j, at;
	char x;

	if (access("/proc/self/exe", X_OK))
		SKIP(return, "no /proc/self/exe to exec");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	cpu = sched_getcpu();
	ASSERT_LE(0, cpu);
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		close(go[1]);
		close(ready[0]);
		exec_child(sh, cpu, ready[1], go[0]);
	}
	close(go[0]);
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &x, 1));

	/* Inherited, so bound to the CPU that the process is pinned to. */
	if (open_twins(_metadata, &tw, tps, ARRAY_SIZE(tps), child, cpu, true, true)) {
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
		SKIP(return, "%s", tw.why);
	}
	ASSERT_EQ(1, write(go[1], "g", 1));
	status = follow_child(&tw, child, 15);
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x, expected the exec'd image to exit 0", status);
	old = __atomic_load_n(&sh->tid, __ATOMIC_ACQUIRE);
	ASSERT_NE(0, old);
	ASSERT_NE(child, old);

	r = &tw.r[0];
	for (i = 0; i < r->nr_rec; i++)
		if (sample_of(&r->rec[i], tw.id[0][0], old) && !entered++)
			entered_at = r->rec[i].time;
	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *s = &r->rec[i];
		bool exec_tp = s->id != tw.id[0][1];

		if (s->type != PERF_RECORD_SAMPLE)
			continue;
		if (s->tid == (__u32)old && !exec_tp && entered && s->time > entered_at)
			in_exec++;
		if (s->tid == (__u32)child && (s->id == tw.id[0][2] || s->id == tw.id[0][3]))
			exec_done++;
		if (!s->cookie) {
			/* Walked in place: it has the user part (only the dying have none). */
			if ((s->tid == (__u32)old || exec_tp) && !has_user_context(s) &&
			    !bad_zero++)
				snprintf(msg[0], sizeof(msg[0]), "tid %u at %llu ns",
					 s->tid, (unsigned long long)s->time);
			continue;
		}
		nrec = records_of_cookie(r, s->cookie, &at);
		if (!nrec && !missing++)
			snprintf(msg[1], sizeof(msg[1]), "tid %u, cookie %#llx", s->tid,
				 (unsigned long long)s->cookie);
		if (nrec > 1 && !dup++)
			snprintf(msg[2], sizeof(msg[2]), "cookie %#llx: %d records",
				 (unsigned long long)s->cookie, nrec);
		for (j = 0; j < r->nr_rec; j++) {
			const struct ring_record *rr = &r->rec[j];

			if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED ||
			    rr->cookie != s->cookie || rr->tid == s->tid)
				continue;
			if (!bad_tid++)
				snprintf(msg[3], sizeof(msg[3]),
					 "sample of tid %u%s at %llu ns, cookie %#llx: record of tid %u",
					 s->tid, s->tid == (__u32)old ? " (before the exec)" : "",
					 (unsigned long long)s->time,
					 (unsigned long long)s->cookie, rr->tid);
		}
	}
	EXPECT_EQ(0, bad_tid)
		TH_LOG("want records with the tid of their samples, %d not (first: %s)",
		       bad_tid, msg[3]);
	EXPECT_EQ(0, missing)
		TH_LOG("want a record for every cookie, %d without (first: %s); %d records lost",
		       missing, msg[1], lost_records(r));
	EXPECT_EQ(0, dup)
		TH_LOG("want one record per cookie, %d with more (first: %s)", dup, msg[2]);
	EXPECT_EQ(0, bad_zero)
		TH_LOG("want an inline user part in samples with cookie 0, %d lack it (first: %s)",
		       bad_zero, msg[0]);
	EXPECT_LE(1, entered)
		TH_LOG("want sys_enter_execve sampled in the thread %d, saw nothing", old);
	EXPECT_LE(1, in_exec)
		TH_LOG("want the thread %d sampled later in its exec (de_thread()), saw nothing",
		       old);
	EXPECT_LE(1, exec_done)
		TH_LOG("want the exec's end sampled under the leader's tid %d, saw nothing",
		       child);

	/*
	 * What the thread's samples were joined with is what it had; only
	 * frame 0 for sure, for it may switch out in libc, too.
	 */
	compare_twins(_metadata, &tw, old, 0, 1, &ag);
	expect_agreement(_metadata, &ag, 0);
	from_site = hits_from(&ag, 0, sh->exec_ip, 0, 0);
	EXPECT_EQ(entered, from_site)
		TH_LOG("want sys_enter_execve walked in place from %#lx, %d of %d were",
		       sh->exec_ip, from_site, entered);
	TH_LOG("thread %d: %d samples in the exec, %d at its end under tid %d",
	       old, in_exec, exec_done, child);

	free(ag.pair);
	close_twins(&tw);
	close(go[1]);
	close(ready[0]);
	munmap(sh, sizeof(*sh));
}

int main(int argc, char **argv)
{
	/* The image exec_from_non_leader_thread execs exits at once. */
	if (argc == 2 && !strcmp(argv[1], EXIT_ARG))
		_exit(0);
	return test_harness_run(argc, argv);
}
