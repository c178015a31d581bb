// SPDX-License-Identifier: GPL-2.0
/*
 * Exact stacks across execve() from a thread that is not the group
 * leader: the samples taken before the exec are walked in the old image,
 * with the exec-ing thread's tid.
 *
 * Built 64-bit, and 32-bit as deferred_exact_exec_32, a compat task (see
 * deferred_exact.h).
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_exact.h"

#define EXIT_ARG	"--deferred-exact-exit"

/* Wait for "go" with a raw system call: no libc code while sampled. */
static __attribute__((noipa)) long wait_go(int fd)
{
	unsigned long ip;
	char x;

	return raw_syscall(ip, __NR_read, fd, &x, 1, 0, 0, 0);
}

/* What the exec-ing thread of exec_from_non_leader_thread tells the test. */
struct exec_share {
	pid_t tid;			/* its tid before the exec */
	unsigned long exec_ip;		/* after its execve() */
};

/* execve() of this test, with the argument that makes it exit at once. */
static __attribute__((noipa)) void exec_self(struct exec_share *sh)
{
	static char * const argv[] = { "deferred_exact_exec", EXIT_ARG, NULL };

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
