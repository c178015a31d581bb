// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user callchains through a task's life: an inherited event's
 * records carry the child's tid, a task exits with samples pending, and
 * execve() keeps the old image's stacks apart from the new one's.
 *
 * Built 64-bit, and 32-bit as deferred_task_32, a compat task (see
 * deferred_chain.h).
 */
#define _GNU_SOURCE
#include <sched.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_chain.h"

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

TEST_HARNESS_MAIN
