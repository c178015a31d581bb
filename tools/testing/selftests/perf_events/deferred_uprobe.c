// SPDX-License-Identifier: GPL-2.0
/*
 * Samples taken in uprobe and uretprobe handlers: a deferred walk would
 * start where the task returns to user space, not at the probed call, so
 * they are walked in place (cookie 0), and deferral works as ever after.
 *
 * Built 64-bit, and 32-bit as deferred_uprobe_32, a compat task (see
 * deferred_chain.h).
 */
#define _GNU_SOURCE
#include <limits.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_chain.h"

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
