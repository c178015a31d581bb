// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user stack walks, driven through the test hook of
 * lib/test_unwind_deferred.c: the walk is the caller's own frames, and
 * frame pointer chains that must end it; a compat task has no SFrame
 * tables.
 *
 * Built 64-bit and 32-bit (compat), as unwind_deferred_test_32.
 */
#define _GNU_SOURCE
#include <sys/prctl.h>

#include "../kselftest_harness.h"
#include "udt_hook.h"
#include "udt_test.h"

#ifdef __x86_64__
/* Above the user half: the walker must not read there. */
#define OUTSIDE_USER	0xffff888000000000UL
#else
/* Above a compat task's TASK_SIZE: never mapped, any read faults. */
#define OUTSIDE_USER	0xfffff000UL
#endif

/* A system call made with the frame pointer register set to @fp. */
static NOIPA long corrupt_syscall(unsigned long fp, long nr, long a1, long a2,
				  long a3)
{
	unsigned long saved;
	long ret = nr;

#ifdef __x86_64__
	asm volatile("mov %%rbp, %[saved]\n\t"
		     "mov %[fp], %%rbp\n\t"
		     "syscall\n"
		     ".globl corrupt_syscall_ip\n"
		     ".hidden corrupt_syscall_ip\n"
		     "corrupt_syscall_ip:\n\t"
		     "mov %[saved], %%rbp"
		     : "+a" (ret), [saved] "=&r" (saved)
		     : [fp] "r" (fp), "D" (a1), "S" (a2), "d" (a3)
		     : "rcx", "r11", "memory");
#else
	asm volatile("mov %%ebp, %[saved]\n\t"
		     "mov %[fp], %%ebp\n\t"
		     "int $0x80\n"
		     ".globl corrupt_syscall_ip\n"
		     ".hidden corrupt_syscall_ip\n"
		     "corrupt_syscall_ip:\n\t"
		     "mov %[saved], %%ebp"
		     : "+a" (ret), [saved] "=&r" (saved)
		     : [fp] "r" (fp), "b" (a1), "c" (a2), "d" (a3)
		     : "memory");
#endif
	return ret;
}

/* Its address is the return address of a crafted frame. */
static NOIPA void crafted_return(void)
{
	asm volatile("");
}

TEST_F(unwind, walk_is_the_callers_own_frames)
{
	struct udt_request req = { };
	struct frames fr = { };
	struct udt_result res;
	long ret;

	add_step(&req, 0, UDT_CTX_TASK);
	ret = frames_1(&fr, __NR_ioctl, self->fd, UDT_IOC_REQUEST, (long)&req);
	ASSERT_EQ(0, ret) TH_LOG("REQUEST: %s", strerror(-ret));
	EXPECT_EQ(0, req.steps[0].ret)
		TH_LOG("first request: expected 0 (queued), seen %d", req.steps[0].ret);

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	ASSERT_EQ(1, res.calls)
		TH_LOG("expected 1 callback before the return to user, seen %u", res.calls);
	EXPECT_EQ(sys_gettid(), res.tid);
	EXPECT_EQ(getpid(), res.tgid);
	EXPECT_EQ(req.steps[0].cookie, res.cookie);
	expect_frames(_metadata, &res, &fr);
	EXPECT_EQ(1, res.walks);
}

/* How the frame pointer chain is broken. */
enum corruption {
	NEXT_POINTS_DOWN,	/* the frame's next pointer is below it */
	NEXT_POINTS_AT_ITSELF,
	NEXT_MISALIGNED,	/* above it, but not word aligned */
	FRAME_MISALIGNED,	/* the frame pointer itself is not aligned */
	FRAME_OUTSIDE_USER,	/* the frame pointer is not a user address */
	FRAME_NULL,
};

FIXTURE(corrupt_frame) {
	int fd;
};

/**
 * FIXTURE_VARIANT(corrupt_frame) - a broken chain and what the walk may find
 * @corruption:	how the chain is broken
 * @max_nr:	2 when the walker may report the crafted frame's return address
 *		before it stops; 1 when it must stop at the IP
 */
FIXTURE_VARIANT(corrupt_frame) {
	enum corruption corruption;
	unsigned int max_nr;
};

FIXTURE_VARIANT_ADD(corrupt_frame, next_points_down) {
	.corruption = NEXT_POINTS_DOWN,
	.max_nr = 2,
};

FIXTURE_VARIANT_ADD(corrupt_frame, next_points_at_itself) {
	.corruption = NEXT_POINTS_AT_ITSELF,
	.max_nr = 2,
};

FIXTURE_VARIANT_ADD(corrupt_frame, next_misaligned) {
	.corruption = NEXT_MISALIGNED,
	.max_nr = 2,
};

FIXTURE_VARIANT_ADD(corrupt_frame, frame_misaligned) {
	.corruption = FRAME_MISALIGNED,
	.max_nr = 1,
};

FIXTURE_VARIANT_ADD(corrupt_frame, frame_outside_user_memory) {
	.corruption = FRAME_OUTSIDE_USER,
	.max_nr = 1,
};

FIXTURE_VARIANT_ADD(corrupt_frame, frame_null) {
	.corruption = FRAME_NULL,
	.max_nr = 1,
};

FIXTURE_SETUP(corrupt_frame)
{
	setup_hook(_metadata, &self->fd);
}

FIXTURE_TEARDOWN(corrupt_frame)
{
	teardown_hook(self->fd);
}

/*
 * The system call is made with the frame pointer at a crafted frame in
 * this function's own stack frame, above the stack pointer: { next, return
 * address }. The walk must stop there, and the kernel must not complain
 * (the VM harness checks its log).
 */
TEST_F(corrupt_frame, walk_stops_at_the_broken_frame)
{
	unsigned long stack[16] = { };
	unsigned long *frame = &stack[8];
	unsigned long fp = (unsigned long)frame;
	unsigned long ret_addr = (unsigned long)crafted_return;
	struct udt_request req = { };
	struct udt_result res;
	long ret;

	frame[1] = ret_addr;
	switch (variant->corruption) {
	case NEXT_POINTS_DOWN:
		frame[0] = (unsigned long)&stack[2];
		break;
	case NEXT_POINTS_AT_ITSELF:
		frame[0] = fp;
		break;
	case NEXT_MISALIGNED:
		frame[0] = (unsigned long)&stack[12] + 1;
		break;
	case FRAME_MISALIGNED:
		frame[0] = (unsigned long)&stack[12];
		fp += sizeof(long) / 2;
		break;
	case FRAME_OUTSIDE_USER:
		fp = OUTSIDE_USER;
		break;
	case FRAME_NULL:
		fp = 0;
		break;
	}

	add_step(&req, 0, UDT_CTX_TASK);
	ret = corrupt_syscall(fp, __NR_ioctl, self->fd, UDT_IOC_REQUEST, (long)&req);
	ASSERT_EQ(0, ret) TH_LOG("REQUEST: %s", strerror(-ret));

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	ASSERT_EQ(1, res.calls)
		TH_LOG("expected 1 callback, also for a broken chain, seen %u", res.calls);
	EXPECT_LE(1, res.nr) TH_LOG("the IP at least must be reported");
	EXPECT_EQ((__u64)(uintptr_t)corrupt_syscall_ip, res.entries[0])
		TH_LOG("entries[0]: expected %#lx, seen %#llx",
		       (unsigned long)corrupt_syscall_ip,
		       (unsigned long long)res.entries[0]);
	EXPECT_GE(variant->max_nr, res.nr)
		TH_LOG("walk past the frame at %#lx: %u entries, [1] %#llx, [2] %#llx",
		       fp, res.nr, (unsigned long long)res.entries[1],
		       (unsigned long long)res.entries[2]);
	if (res.nr >= 2) {
		EXPECT_EQ((__u64)ret_addr, res.entries[1])
			TH_LOG("entries[1]: expected the crafted return address %#lx, seen %#llx",
			       ret_addr, (unsigned long long)res.entries[1]);
	}
	EXPECT_EQ(1, res.walks);
}

#ifndef __x86_64__
/* SFrame tables are for 64-bit tasks: a compat task is told so. */
TEST(sframe_tables_are_not_for_compat_tasks)
{
	struct prctl_sframe arg = { };

	EXPECT_EQ(-1, prctl(PR_SFRAME, PR_SFRAME_ADD, &arg, sizeof(arg), 0));
	EXPECT_EQ(EOPNOTSUPP, errno)
		TH_LOG("expected EOPNOTSUPP, seen %s", strerror(errno));
}
#endif

TEST_HARNESS_MAIN
