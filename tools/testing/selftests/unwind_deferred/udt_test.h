/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the unwind_deferred selftests share: the functions whose frames a
 * walk must find (frames_syscall() and its callers), the checks of what
 * the hook's consumers got, and the fixture that opens the hook. Include
 * after kselftest_harness.h and udt_hook.h; build with frame pointers and
 * no sibling calls (see Makefile).
 */
#ifndef UNWIND_DEFERRED_UDT_TEST_H
#define UNWIND_DEFERRED_UDT_TEST_H

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Keep each function whole and called: its frame is what a test expects.
 * noipa (GCC) implies noinline and noclone; not every test calls them all.
 */
#define NOIPA		__attribute__((noipa, unused))

/*
 * The user IPs the kernel sees for the system calls made by
 * frames_syscall() and corrupt_syscall(): the labels right after their
 * syscall (int $0x80) instructions.
 */
#include "syscall_ip.h"

/**
 * struct frames - what a walk from frames_syscall() must find after its IP
 * @ret: the return addresses of frames_syscall(), frames_2() and frames_1()
 */
struct frames {
	unsigned long ret[3];
};

static const char *const context_name[] = {
	[UDT_CTX_TASK]	= "task",
	[UDT_CTX_IRQ]	= "IRQ",
	[UDT_CTX_NMI]	= "NMI",
};

/*
 * A system call with no libc frame between it and the caller: the walk
 * starts at frames_syscall_ip, then finds frames_syscall()'s frame.
 */
static NOIPA long frames_syscall(struct frames *fr, long nr, long a1, long a2,
				 long a3)
{
	long ret = nr;

	fr->ret[0] = (unsigned long)__builtin_return_address(0);
#ifdef __x86_64__
	asm volatile("syscall\n"
		     ".globl frames_syscall_ip\n"
		     ".hidden frames_syscall_ip\n"
		     "frames_syscall_ip:"
		     : "+a" (ret)
		     : "D" (a1), "S" (a2), "d" (a3)
		     : "rcx", "r11", "memory");
#else
	asm volatile("int $0x80\n"
		     ".globl frames_syscall_ip\n"
		     ".hidden frames_syscall_ip\n"
		     "frames_syscall_ip:"
		     : "+a" (ret)
		     : "b" (a1), "c" (a2), "d" (a3)
		     : "memory");
#endif
	return ret;
}

static NOIPA long frames_2(struct frames *fr, long nr, long a1, long a2, long a3)
{
	long ret;

	fr->ret[1] = (unsigned long)__builtin_return_address(0);
	ret = frames_syscall(fr, nr, a1, a2, a3);
	asm volatile("" : : : "memory");	/* not a tail call */
	return ret;
}

/* f1 -> f2 -> f3: a system call whose user stack the test knows. */
static NOIPA long frames_1(struct frames *fr, long nr, long a1, long a2, long a3)
{
	long ret;

	fr->ret[2] = (unsigned long)__builtin_return_address(0);
	ret = frames_2(fr, nr, a1, a2, a3);
	asm volatile("" : : : "memory");	/* not a tail call */
	return ret;
}

static inline pid_t sys_gettid(void)
{
	return syscall(SYS_gettid);
}

static inline int arm(int fd, __u32 nr, __u32 flags)
{
	struct udt_arm arm = { .nr = nr, .flags = flags };

	return ioctl(fd, UDT_IOC_ARM, &arm);
}

static inline int get_arm_result(int fd, struct udt_arm_result *res)
{
	memset(res, 0, sizeof(*res));
	return ioctl(fd, UDT_IOC_ARM_RESULT, res);
}

static inline void *map_shared(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* The cookie names the CPU of the stay's first request; its counter is odd. */
static inline void expect_cookie_shape(struct __test_metadata *_metadata,
				       __u64 cookie, __u32 cpu)
{
	EXPECT_NE(0, cookie) TH_LOG("a cookie is never 0");
	EXPECT_EQ(cpu + 1, (__u32)cookie)
		TH_LOG("cookie %#llx: low half must be cpu + 1 = %u of the first request, seen %u",
		       (unsigned long long)cookie, cpu + 1, (__u32)cookie);
	EXPECT_EQ(1, (cookie >> 32) & 1)
		TH_LOG("cookie %#llx: the counter in the high 32 bits must be odd",
		       (unsigned long long)cookie);
}

static inline void expect_entry(struct __test_metadata *_metadata,
				const struct udt_result *res, int i,
				unsigned long expected, const char *what)
{
	EXPECT_EQ((__u64)expected, res->entries[i])
		TH_LOG("entries[%d]: expected %#lx (%s), seen %#llx", i,
		       expected, what, (unsigned long long)res->entries[i]);
}

/* The walk must be frames_syscall_ip, then the chain's return addresses. */
static inline void expect_frames(struct __test_metadata *_metadata,
				 const struct udt_result *res, const struct frames *fr)
{
	EXPECT_LE(4, res->nr)
		TH_LOG("expected at least 4 entries (the IP and 3 frames), seen %u",
		       res->nr);
	expect_entry(_metadata, res, 0, (unsigned long)frames_syscall_ip,
		     "after the syscall instruction");
	expect_entry(_metadata, res, 1, fr->ret[0], "return address of frames_syscall");
	expect_entry(_metadata, res, 2, fr->ret[1], "return address of frames_2");
	expect_entry(_metadata, res, 3, fr->ret[2], "return address of frames_1");
}

/* Two consumers served by one walk saw the same trace. */
static inline void expect_same_trace(struct __test_metadata *_metadata,
				     const struct udt_result *a,
				     const struct udt_result *b)
{
	unsigned int i, nr = a->nr < UDT_MAX_ENTRIES ? a->nr : UDT_MAX_ENTRIES;

	EXPECT_EQ(a->nr, b->nr)
		TH_LOG("one walk: consumer %u got %u entries, consumer %u %u",
		       a->consumer, a->nr, b->consumer, b->nr);
	for (i = 0; i < nr && a->entries[i] == b->entries[i]; i++)
		;
	EXPECT_EQ(nr, i)
		TH_LOG("one walk: entries[%u] is %#llx for consumer %u, %#llx for consumer %u",
		       i, (unsigned long long)a->entries[i], a->consumer,
		       (unsigned long long)b->entries[i], b->consumer);
}

FIXTURE(unwind) {
	int fd;
};

FIXTURE_SETUP(unwind)
{
	setup_hook(_metadata, &self->fd);
}

FIXTURE_TEARDOWN(unwind)
{
	teardown_hook(self->fd);
}

#endif /* UNWIND_DEFERRED_UDT_TEST_H */
