// SPDX-License-Identifier: GPL-2.0
/*
 * Exact stacks under ptrace: a tracer that writes the tracee's registers
 * (PTRACE_SETREGS, PTRACE_POKEUSER) ends the tracee's stay, the samples
 * taken before the stop are walked before it, and those taken on the way
 * to the stop and during it (the switch out) are walked in place.
 *
 * Built 64-bit, and 32-bit as deferred_exact_ptrace_32, a compat task (see
 * deferred_exact.h).
 */
#define _GNU_SOURCE
#include <sys/ptrace.h>
#include <sys/user.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_exact.h"

#define MAX_STOPS	2000	/* ptrace stops of the tracee, at most */

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
 *  - every stop: the sample of the switch out (sched_switch) sees the
 *    registers of the moment the tracee stopped, not those the tracer
 *    writes while it is stopped: it is walked in place, as is everything
 *    sampled from the way to a stop to its end (the deliveries above).
 *  - tgkill()'s own signal_generate, between its entry and exit stops, is
 *    deferred, and walked before the exit stop: the call site.
 */
TEST(ptrace_register_writes_end_the_stay)
{
	static const char * const tps[] = {
		SYS_ENTER_TP(getppid), SYS_EXIT_TP(getppid),
		SYS_EXIT_TP(tgkill), "signal/signal_deliver", "sched/sched_switch",
		"signal/signal_generate",
	};
	unsigned long a = (unsigned long)detour_a, b = (unsigned long)detour_b;
	unsigned long f1 = (unsigned long)fake_caller_1;
	unsigned long f2 = (unsigned long)fake_caller_2;
	int moved, getppid, tgkill, put_back, delivered, switches, generated, status, sig;
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
	switches = hits_of(&ag, 4);
	generated = hits_from(&ag, 5, t.tgkill_ip, 0, 0);
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
	EXPECT_LE(t.stops, switches)
		TH_LOG("want a switch out per stop (%d), saw %d", t.stops, switches);
	EXPECT_LE(MIN_HITS, generated)
		TH_LOG("want %d signal_generate hits in tgkill() at %#lx, saw %d",
		       MIN_HITS, t.tgkill_ip, generated);
	TH_LOG("%d stops: %d getppid(), %d tgkill(), %d + %d deliveries, %d switches, %d kills",
	       t.stops, getppid, tgkill, put_back, delivered, switches, generated);

	free(ag.pair);
	close_twins(&tw);
}

TEST_HARNESS_MAIN
