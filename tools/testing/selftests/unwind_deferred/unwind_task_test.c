// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user stack walks through a task's life, driven through the
 * test hook of lib/test_unwind_deferred.c: signal delivery ends the stay,
 * exit runs the pending walk on the exiting stack, exec walks the old
 * image under the old cookie, and a fork child has no pending walk.
 *
 * Built 64-bit and 32-bit (compat), as unwind_task_test_32.
 */
#define _GNU_SOURCE
#include <sys/auxv.h>

#include "../kselftest_harness.h"
#include "udt_hook.h"
#include "udt_test.h"

/* argv[1] of the image that the exec test starts. */
#define EXEC_CHECK_ARG	"--unwind-deferred-exec-check"

static int got_sigusr1;

static void on_sigusr1(int sig)
{
	__atomic_store_n(&got_sigusr1, 1, __ATOMIC_RELAXED);
}

/*
 * The hook asks for consumer 0 when tgkill() is entered. On the way out,
 * get_signal() runs the task work first (consumer 0 is called back), then
 * delivers SIGUSR1, where the hook asks again for consumer 0 (already
 * served: 1) and for the first time for consumer 1 (queued: 0). Consumer 1
 * must be called back with the same cookie and the walk already made.
 */
/*
 * A signal's frame rewrites the user registers: get_signal() runs the walk
 * pending from tgkill() and ends the stay before it dequeues the signal.
 * Requests at the delivery start a new stay, walked before the frame is set
 * up: the same stack as tgkill()'s, under a new cookie.
 */
TEST_F(unwind, signal_delivery_ends_the_stay)
{
	struct sigaction sa = { .sa_handler = on_sigusr1 };
	struct udt_result res[UDT_CONSUMERS];
	struct udt_arm_result armed;
	struct frames fr = { };
	__u64 cookie, signal_cookie;
	unsigned int i;
	long ret;

	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	ASSERT_EQ(0, arm(self->fd, __NR_tgkill, UDT_ARM_SIGNAL))
		TH_LOG("ARM: %s", strerror(errno));

	ret = frames_1(&fr, __NR_tgkill, getpid(), sys_gettid(), SIGUSR1);
	ASSERT_EQ(0, ret) TH_LOG("tgkill: %s", strerror(-ret));
	ASSERT_EQ(1, __atomic_load_n(&got_sigusr1, __ATOMIC_RELAXED))
		TH_LOG("SIGUSR1 was not delivered on the way out of tgkill");

	ASSERT_EQ(0, get_arm_result(self->fd, &armed));
	ASSERT_EQ(UDT_HIT_SYSCALL | UDT_HIT_SIGNAL, armed.hits)
		TH_LOG("expected the hook to ask at tgkill and at the signal, hits %#x",
		       armed.hits);
	cookie = armed.syscall_cookie;
	EXPECT_EQ(0, armed.syscall_ret);
	expect_cookie_shape(_metadata, cookie, (__u32)cookie - 1);
	signal_cookie = armed.signal_cookie[0];
	EXPECT_NE(cookie, signal_cookie)
		TH_LOG("the stay did not end at the signal: cookie %#llx at both",
		       (unsigned long long)cookie);
	expect_cookie_shape(_metadata, signal_cookie, (__u32)signal_cookie - 1);
	for (i = 0; i < UDT_CONSUMERS; i++) {
		EXPECT_EQ(0, armed.signal_ret[i])
			TH_LOG("consumer %u asking in the new stay: expected 0 (queued), seen %d",
			       i, armed.signal_ret[i]);
		EXPECT_EQ(signal_cookie, armed.signal_cookie[i])
			TH_LOG("consumer %u at the signal: expected %#llx, seen %#llx",
			       i, (unsigned long long)signal_cookie,
			       (unsigned long long)armed.signal_cookie[i]);
	}

	for (i = 0; i < UDT_CONSUMERS; i++) {
		ASSERT_EQ(0, get_result(self->fd, i, &res[i]));
		EXPECT_EQ(signal_cookie, res[i].cookie);
	}
	EXPECT_EQ(2, res[0].calls)
		TH_LOG("consumer 0: expected a callback per stay, seen %u", res[0].calls);
	EXPECT_EQ(1, res[1].calls)
		TH_LOG("consumer 1: expected 1 callback, seen %u", res[1].calls);
	/* Before the frame: the handler is not on the stack yet. */
	expect_frames(_metadata, &res[0], &fr);
	expect_same_trace(_metadata, &res[0], &res[1]);
	EXPECT_EQ(2, res[0].walks)
		TH_LOG("expected a walk per stay, seen %u", res[0].walks);
}

/* Exit codes of the children of the exit and exec tests. */
enum {
	CHILD_ARM_FAILED = 10,
	CHILD_SYSCALL_RETURNED,
	/* from the new image of the exec test */
	NEW_IMAGE_NO_HOOK = 20,
	NEW_IMAGE_NOT_CALLED_ONCE,
	NEW_IMAGE_WRONG_STACK,
};

static const char *child_failure(int status)
{
	if (!WIFEXITED(status))
		return "killed";
	switch (WEXITSTATUS(status)) {
	case 0:
		return "none";
	case CHILD_ARM_FAILED:
		return "ARM failed";
	case CHILD_SYSCALL_RETURNED:
		return "the system call returned";
	case NEW_IMAGE_NO_HOOK:
		return "the new image could not read the hook";
	case NEW_IMAGE_NOT_CALLED_ONCE:
		return "consumer 1 was not called back once";
	case NEW_IMAGE_WRONG_STACK:
		return "consumer 1 did not get the new image's stack";
	}
	return "unknown";
}

TEST_F(unwind, exit_runs_the_pending_walk_on_the_exiting_stack)
{
	struct frames *fr = map_shared(sizeof(*fr));
	struct udt_arm_result armed;
	struct udt_result res;
	int status;
	pid_t child;

	ASSERT_TRUE(!!fr) TH_LOG("mmap: %s", strerror(errno));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		if (arm(self->fd, __NR_exit_group, 0))
			_exit(CHILD_ARM_FAILED);
		frames_1(fr, __NR_exit_group, 0, 0, 0);
		_exit(CHILD_SYSCALL_RETURNED);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_EQ(0, status)
		TH_LOG("child: wait status %#x: %s", status, child_failure(status));

	ASSERT_EQ(0, get_arm_result(self->fd, &armed));
	ASSERT_EQ(UDT_HIT_SYSCALL, armed.hits);
	EXPECT_EQ(child, armed.tid);
	EXPECT_EQ(0, armed.syscall_ret)
		TH_LOG("request at exit_group: expected 0 (queued), seen %d",
		       armed.syscall_ret);

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	ASSERT_EQ(1, res.calls)
		TH_LOG("a walk pending at exit: expected 1 callback, seen %u", res.calls);
	EXPECT_EQ(child, res.tid);
	EXPECT_EQ(child, res.tgid);
	EXPECT_EQ(armed.syscall_cookie, res.cookie)
		TH_LOG("expected the cookie of the request at exit_group %#llx, seen %#llx",
		       (unsigned long long)armed.syscall_cookie,
		       (unsigned long long)res.cookie);
	expect_frames(_metadata, &res, fr);
	EXPECT_EQ(1, res.walks);
	munmap(fr, sizeof(*fr));
}

/*
 * In the new image of exec_walks_the_old_image_under_the_old_cookie:
 * consumer 1, asked at sched_process_exec, must have been called back on
 * the way out of execve with the new image's IP: the entry point of its
 * ELF interpreter, or its own without one.
 */
static int exec_check(void)
{
	struct udt_result res = { .consumer = 1 };
	unsigned long base = getauxval(AT_BASE), expected;
	int fd = open(UDT_PATH, O_RDWR | O_CLOEXEC);

	if (base)
		/* e_entry: offset 24 of the ELF header, a word wide in both classes */
		expected = base + *(const unsigned long *)(base + 24);
	else
		expected = getauxval(AT_ENTRY);

	if (fd < 0 || ioctl(fd, UDT_IOC_RESULT, &res)) {
		fprintf(stderr, "# new image: %s: %s\n", UDT_PATH, strerror(errno));
		return NEW_IMAGE_NO_HOOK;
	}
	if (res.calls != 1) {
		fprintf(stderr, "# new image: consumer 1: expected 1 callback, seen %u\n",
			res.calls);
		return NEW_IMAGE_NOT_CALLED_ONCE;
	}
	if (!res.nr || res.entries[0] != expected) {
		fprintf(stderr, "# new image: consumer 1's entries[0]: expected %#lx, seen %#llx\n",
			expected, (unsigned long long)res.entries[0]);
		fprintf(stderr, "# (the new image's entry point; %u entries)\n", res.nr);
		return NEW_IMAGE_WRONG_STACK;
	}
	return 0;
}

TEST_F(unwind, exec_walks_the_old_image_under_the_old_cookie)
{
	struct frames *fr = map_shared(sizeof(*fr));
	struct udt_result res[UDT_CONSUMERS];
	struct udt_arm_result armed;
	int status;
	pid_t child;

	ASSERT_TRUE(!!fr) TH_LOG("mmap: %s", strerror(errno));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		char *const argv[] = { "/proc/self/exe", EXEC_CHECK_ARG, NULL };

		if (arm(self->fd, __NR_execve, UDT_ARM_EXEC))
			_exit(CHILD_ARM_FAILED);
		frames_1(fr, __NR_execve, (long)argv[0], (long)argv, (long)environ);
		_exit(CHILD_SYSCALL_RETURNED);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_EQ(0, status)
		TH_LOG("child: wait status %#x: %s", status, child_failure(status));

	ASSERT_EQ(0, get_arm_result(self->fd, &armed));
	ASSERT_EQ(UDT_HIT_SYSCALL | UDT_HIT_EXEC, armed.hits)
		TH_LOG("expected the hook to ask at execve and at exec, hits %#x",
		       armed.hits);
	EXPECT_EQ(0, armed.syscall_ret)
		TH_LOG("request at execve: expected 0 (queued), seen %d", armed.syscall_ret);
	EXPECT_EQ(0, armed.exec_ret)
		TH_LOG("request after exec: expected 0 (queued), seen %d", armed.exec_ret);
	EXPECT_NE(0, armed.exec_cookie);
	EXPECT_NE(armed.syscall_cookie, armed.exec_cookie)
		TH_LOG("exec must end the cookie: %#llx before and after",
		       (unsigned long long)armed.exec_cookie);

	/* consumer 0: the old image's stack, under the old cookie */
	ASSERT_EQ(0, get_result(self->fd, 0, &res[0]));
	ASSERT_EQ(1, res[0].calls)
		TH_LOG("a walk pending at exec: expected 1 callback, seen %u", res[0].calls);
	EXPECT_EQ(child, res[0].tid);
	EXPECT_EQ(armed.syscall_cookie, res[0].cookie)
		TH_LOG("expected the cookie of the request at execve %#llx, seen %#llx",
		       (unsigned long long)armed.syscall_cookie,
		       (unsigned long long)res[0].cookie);
	expect_frames(_metadata, &res[0], fr);

	/* consumer 1: the new cookie, and not the old image's stack */
	ASSERT_EQ(0, get_result(self->fd, 1, &res[1]));
	EXPECT_EQ(1, res[1].calls);
	EXPECT_EQ(child, res[1].tid);
	EXPECT_EQ(armed.exec_cookie, res[1].cookie)
		TH_LOG("expected the cookie of the request after exec %#llx, seen %#llx",
		       (unsigned long long)armed.exec_cookie,
		       (unsigned long long)res[1].cookie);
	EXPECT_NE((__u64)(uintptr_t)frames_syscall_ip, res[1].entries[0])
		TH_LOG("the old image's stack under the new cookie");

	EXPECT_EQ(2, res[0].walks)
		TH_LOG("expected 2 walks (old image, new image), seen %u", res[0].walks);
	munmap(fr, sizeof(*fr));
}

TEST_F(unwind, fork_child_has_no_pending_walk)
{
	struct udt_arm_result armed;
	struct frames fr = { };
	struct udt_result res;
	int status;
	long child;

	ASSERT_EQ(0, arm(self->fd, __NR_fork, 0)) TH_LOG("ARM: %s", strerror(errno));
	child = frames_1(&fr, __NR_fork, 0, 0, 0);
	if (!child)
		_exit(0);
	ASSERT_LT(0, child) TH_LOG("fork: %s", strerror(-child));
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_EQ(0, status);

	ASSERT_EQ(0, get_arm_result(self->fd, &armed));
	ASSERT_EQ(UDT_HIT_SYSCALL, armed.hits);
	EXPECT_EQ(0, armed.syscall_ret);

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	EXPECT_EQ(1, res.calls)
		TH_LOG("a walk pending at fork: expected 1 callback (the parent's), seen %u",
		       res.calls);
	EXPECT_EQ(sys_gettid(), res.tid)
		TH_LOG("expected the callback in the parent (%d), seen in %u",
		       sys_gettid(), res.tid);
	EXPECT_EQ(armed.syscall_cookie, res.cookie);
	expect_frames(_metadata, &res, &fr);
	EXPECT_EQ(1, res.walks)
		TH_LOG("expected 1 walk (the parent's), seen %u", res.walks);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], EXEC_CHECK_ARG))
		return exec_check();
	return test_harness_run(argc, argv);
}
