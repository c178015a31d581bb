// SPDX-License-Identifier: GPL-2.0
/*
 * The consumers of deferred user stack walks, through the test hook of
 * lib/test_unwind_deferred.c: one callback per consumer per stay, one
 * walk for all of them, the walk cache's allocation failing, and the
 * consumer limit.
 *
 * Built 64-bit and 32-bit (compat), as unwind_consumer_test_32.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "../kselftest_harness.h"
#include "../perf_events/deferred_kallsyms.h"
#include "udt_hook.h"
#include "udt_test.h"

#define FAILSLAB	"/sys/kernel/debug/failslab/"

static int write_knob(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, value, strlen(value));
	close(fd);
	return n == (ssize_t)strlen(value) ? 0 : -EIO;
}

static long read_knob(const char *path)
{
	char buf[32] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtol(buf, NULL, 0) : -EIO;
}

/* Three stays of a new thread, whose first walk cache allocations fail. */
struct failing_stays {
	int fd;
	const char *failed;	/* what went wrong, NULL when nothing */
	int err;
	struct frames fr;
	struct udt_request req[3];
	struct udt_result res[3][UDT_CONSUMERS];
	long times_left[3];	/* failslab's failures left after each stay */
};

static void *failing_stays_thread(void *arg)
{
	struct failing_stays *fs = arg;
	int i, c, ret;

	/* A new task: no walk cache yet; failslab's task filter takes it. */
	ret = write_knob("/proc/thread-self/make-it-fail", "1");
	if (ret) {
		fs->failed = "/proc/thread-self/make-it-fail";
		fs->err = -ret;
		return NULL;
	}
	for (i = 0; i < 3; i++) {
		/*
		 * Consumer 0 asks, the walk runs, consumer 0 asks again and
		 * consumer 1 for the first time, in the same stay.
		 */
		add_step(&fs->req[i], 0, UDT_CTX_TASK);
		add_step(&fs->req[i], 0, UDT_CTX_TASK_WORK);
		add_step(&fs->req[i], 0, UDT_CTX_TASK);
		add_step(&fs->req[i], 1, UDT_CTX_TASK);
		add_step(&fs->req[i], 0, UDT_CTX_IRQ);
		ret = frames_1(&fs->fr, __NR_ioctl, fs->fd, UDT_IOC_REQUEST,
			       (long)&fs->req[i]);
		if (ret) {
			fs->failed = "REQUEST";
			fs->err = -ret;
			return NULL;
		}
		fs->times_left[i] = read_knob(FAILSLAB "times");
		for (c = 0; c < UDT_CONSUMERS; c++)
			if (get_result(fs->fd, c, &fs->res[i][c])) {
				fs->failed = "RESULT";
				fs->err = errno;
				return NULL;
			}
	}
	return NULL;
}

/*
 * When the walk cache cannot be allocated, the stay's consumers get an
 * empty stack once each and the stay is served: the requests of those
 * consumers that come after the walk in the same stay (the hook runs the
 * task work in its system call, as io_uring's wait does) are told it ran,
 * and queue no new walk and no new allocation. A consumer that had not
 * asked is not told it ran: its request is queued, and its callback gets
 * the stay's (empty) stack too. The next stay tries again, and walks once
 * the allocation succeeds. failslab fails the first two allocations
 * made by the deferred walk (a stack filter on unwind_deferred_run()) of
 * one thread (its task filter).
 */
TEST_F(unwind, walk_cache_allocation_fails_once_per_stay)
{
	struct failing_stays fs = { .fd = self->fd };
	unsigned long long start, end;
	char value[32];
	pthread_t th;
	int i, c;

	ASSERT_TRUE(kernel_function("unwind_deferred_run", &start, &end))
		TH_LOG("unwind_deferred_run() is not in /proc/kallsyms");
	ASSERT_EQ(0, write_knob(FAILSLAB "probability", "0"))
		TH_LOG("%s: needs CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS",
		       FAILSLAB);
	ASSERT_EQ(0, write_knob(FAILSLAB "task-filter", "Y"));
	ASSERT_EQ(0, write_knob(FAILSLAB "ignore-gfp-wait", "N"));
	ASSERT_EQ(0, write_knob(FAILSLAB "verbose", "0"));
	ASSERT_EQ(0, write_knob(FAILSLAB "interval", "1"));
	snprintf(value, sizeof(value), "%#llx", start);
	ASSERT_EQ(0, write_knob(FAILSLAB "require-start", value))
		TH_LOG("needs CONFIG_FAULT_INJECTION_STACKTRACE_FILTER");
	snprintf(value, sizeof(value), "%#llx", end);
	ASSERT_EQ(0, write_knob(FAILSLAB "require-end", value));
	ASSERT_EQ(0, write_knob(FAILSLAB "times", "2"));
	ASSERT_EQ(0, write_knob(FAILSLAB "probability", "100"));

	ASSERT_EQ(0, pthread_create(&th, NULL, failing_stays_thread, &fs));
	ASSERT_EQ(0, pthread_join(th, NULL));

	/* failslab's defaults again. */
	EXPECT_EQ(0, write_knob(FAILSLAB "probability", "0"));
	EXPECT_EQ(0, write_knob(FAILSLAB "times", "1"));
	EXPECT_EQ(0, write_knob(FAILSLAB "require-start", "0"));
	EXPECT_EQ(0, write_knob(FAILSLAB "require-end", "0xffffffffffffffff"));
	EXPECT_EQ(0, write_knob(FAILSLAB "task-filter", "N"));
	EXPECT_EQ(0, write_knob(FAILSLAB "ignore-gfp-wait", "Y"));
	EXPECT_EQ(0, write_knob(FAILSLAB "verbose", "2"));

	ASSERT_TRUE(!fs.failed) TH_LOG("%s: %s", fs.failed, strerror(fs.err));
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(i < 2 ? 1 - i : 0, fs.times_left[i])
			TH_LOG("stay %d: want %d failslab failures left (one per stay), seen %ld",
			       i, i < 2 ? 1 - i : 0, fs.times_left[i]);
		for (c = 0; c < UDT_CONSUMERS; c++) {
			EXPECT_EQ(i + 1, fs.res[i][c].calls)
				TH_LOG("stay %d, consumer %d: want %d callbacks in all, seen %u",
				       i, c, i + 1, fs.res[i][c].calls);
			EXPECT_EQ(fs.req[i].steps[0].cookie, fs.res[i][c].cookie);
		}
		EXPECT_EQ(i < 2 ? 0 : 1, fs.res[i][0].walks)
			TH_LOG("stay %d: want %d walks in all, seen %u", i,
			       i < 2 ? 0 : 1, fs.res[i][0].walks);
		/*
		 * The steps after the task work's: consumer 0 was served,
		 * consumer 1 (step 3) had not asked.
		 */
		for (c = 2; c < (int)fs.req[i].nr_steps; c++) {
			int want = fs.req[i].steps[c].consumer == 1 ? 0 : 1;

			EXPECT_EQ(want, fs.req[i].steps[c].ret)
				TH_LOG("stay %d, request %d (consumer %u): want %d, got %d",
				       i, c, fs.req[i].steps[c].consumer, want,
				       fs.req[i].steps[c].ret);
			EXPECT_EQ(fs.req[i].steps[0].cookie, fs.req[i].steps[c].cookie)
				TH_LOG("stay %d, request %d: want the stay's cookie", i, c);
		}
	}
	for (i = 0; i < 2; i++)
		for (c = 0; c < UDT_CONSUMERS; c++)
			EXPECT_EQ(0, fs.res[i][c].nr)
				TH_LOG("stay %d, consumer %d, no cache: want no entries, got %u",
				       i, c, fs.res[i][c].nr);
	expect_frames(_metadata, &fs.res[2][0], &fs.fr);
	expect_same_trace(_metadata, &fs.res[2][0], &fs.res[2][1]);
}

TEST_F(unwind, one_callback_per_consumer_per_stay)
{
	struct udt_request req = { };
	struct udt_result res;
	unsigned int i;

	add_step(&req, 0, UDT_CTX_TASK);
	add_step(&req, 0, UDT_CTX_TASK);
	add_step(&req, 0, UDT_CTX_IRQ);
	ASSERT_EQ(0, request(self->fd, &req)) TH_LOG("REQUEST: %s", strerror(errno));
	for (i = 0; i < req.nr_steps; i++) {
		EXPECT_EQ(0, req.steps[i].ret)
			TH_LOG("request %u before the work ran: expected 0 (queued), seen %d",
			       i, req.steps[i].ret);
		EXPECT_EQ(req.steps[0].cookie, req.steps[i].cookie);
	}

	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	EXPECT_EQ(1, res.calls)
		TH_LOG("3 requests of one consumer in one stay: expected 1 callback, seen %u",
		       res.calls);
	EXPECT_EQ(1, res.walks)
		TH_LOG("expected 1 walk, seen %u", res.walks);
}

TEST_F(unwind, one_walk_serves_every_consumer)
{
	struct udt_request req = { };
	struct udt_result res[UDT_CONSUMERS];
	unsigned int i;

	add_step(&req, 0, UDT_CTX_TASK);
	add_step(&req, 1, UDT_CTX_TASK);
	ASSERT_EQ(0, request(self->fd, &req)) TH_LOG("REQUEST: %s", strerror(errno));
	EXPECT_EQ(req.steps[0].cookie, req.steps[1].cookie);

	for (i = 0; i < UDT_CONSUMERS; i++) {
		ASSERT_EQ(0, get_result(self->fd, i, &res[i]));
		EXPECT_EQ(1, res[i].calls)
			TH_LOG("consumer %u: expected 1 callback, seen %u", i, res[i].calls);
		EXPECT_EQ(req.steps[0].cookie, res[i].cookie);
	}
	EXPECT_EQ(1, res[0].walks)
		TH_LOG("two consumers in one stay: expected 1 walk, seen %u", res[0].walks);
	expect_same_trace(_metadata, &res[0], &res[1]);
}

/*
 * A consumer cancelled after its callback ran in a stay leaves no trace in
 * the task: one that takes its bit in the same stay is not told "already
 * ran" for a callback it never had; its request is queued, and it gets
 * the stay's walk.
 */
TEST_F(unwind, cancelled_consumer_bit_is_new_for_the_next)
{
	struct udt_reuse reuse = { };

	ASSERT_EQ(0, ioctl(self->fd, UDT_IOC_REUSE, &reuse))
		TH_LOG("REUSE: %s", strerror(errno));
	ASSERT_EQ(1, reuse.same_bit)
		TH_LOG("the second consumer did not get the first one's bit");
	EXPECT_EQ(0, reuse.first_ret);
	EXPECT_EQ(1, reuse.first_calls);
	EXPECT_EQ(0, reuse.second_ret)
		TH_LOG("the new consumer's first request: want 0 (queued), seen %d",
		       reuse.second_ret);
	EXPECT_EQ(1, reuse.second_calls)
		TH_LOG("the new consumer: want 1 callback, seen %u", reuse.second_calls);
	EXPECT_LT(0, reuse.second_nr)
		TH_LOG("the new consumer got an empty stack");
}

TEST_F(unwind, consumers_past_the_limit_are_refused)
{
	struct udt_limit lim[2] = { };
	int i;

	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, ioctl(self->fd, UDT_IOC_LIMIT, &lim[i]))
			TH_LOG("LIMIT: %s", strerror(errno));
		EXPECT_EQ(-EBUSY, lim[i].refusal)
			TH_LOG("past the limit of %u: expected -EBUSY, seen %d after %u more",
			       lim[i].max, lim[i].refusal, lim[i].registered);
		EXPECT_LT(0, lim[i].registered)
			TH_LOG("no free consumer slot besides the hook's two");
		EXPECT_GE(lim[i].max - UDT_CONSUMERS, lim[i].registered)
			TH_LOG("%u more consumers past the hook's two, limit %u",
			       lim[i].registered, lim[i].max);
		EXPECT_EQ(1, lim[i].distinct_slots)
			TH_LOG("two registered consumers share a slot, or a slot is out of range");
		EXPECT_EQ(0, lim[i].reregister)
			TH_LOG("registering again after one unregister: expected 0, seen %d",
			       lim[i].reregister);
		EXPECT_EQ(-EBUSY, lim[i].refusal_again)
			TH_LOG("one more after that: expected -EBUSY, seen %d",
			       lim[i].refusal_again);
	}
	EXPECT_EQ(lim[0].registered, lim[1].registered)
		TH_LOG("unregister must free slots: %u more consumers the first time, %u then",
		       lim[0].registered, lim[1].registered);
	TH_LOG("limit %u: the hook's 2, %u more, so %u registered by others",
	       lim[0].max, lim[0].registered,
	       lim[0].max - UDT_CONSUMERS - lim[0].registered);
}

TEST_HARNESS_MAIN
