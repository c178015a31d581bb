// SPDX-License-Identifier: GPL-2.0
/*
 * Exact stacks around signals: the samples of a stay that delivers a
 * signal are walked before the kernel writes the signal frame, and those
 * of rt_sigreturn (and the compat sigreturn) before it restores the
 * registers the frame saved.
 *
 * Built 64-bit, and 32-bit as deferred_exact_signal_32, a compat task (see
 * deferred_exact.h).
 */
#define _GNU_SOURCE

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_exact.h"

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

TEST_HARNESS_MAIN
