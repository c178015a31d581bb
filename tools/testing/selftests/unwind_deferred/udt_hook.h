/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The selftests' side of the test hook of lib/test_unwind_deferred.c:
 * open it, ask for walks, read what its consumers got. Include after
 * kselftest_harness.h.
 */
#ifndef UNWIND_DEFERRED_UDT_HOOK_H
#define UNWIND_DEFERRED_UDT_HOOK_H

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* A private UAPI of the test hook, not installed with the others. */
#include "../../../../lib/test_unwind_deferred_uapi.h"

static inline void add_step(struct udt_request *req, __u32 consumer,
			    __u32 context)
{
	struct udt_step *step = &req->steps[req->nr_steps++];

	step->consumer = consumer;
	step->context = context;
}

static inline int request(int fd, struct udt_request *req)
{
	return ioctl(fd, UDT_IOC_REQUEST, req);
}

static inline int get_result(int fd, __u32 consumer, struct udt_result *res)
{
	memset(res, 0, sizeof(*res));
	res->consumer = consumer;
	return ioctl(fd, UDT_IOC_RESULT, res);
}

static inline void setup_hook(struct __test_metadata *_metadata, int *fd)
{
	*fd = open(UDT_PATH, O_RDWR | O_CLOEXEC);
	if (*fd < 0)
		SKIP(return, "%s: %s (needs CONFIG_TEST_UNWIND_DEFERRED, debugfs, root)",
		     UDT_PATH, strerror(errno));
	ASSERT_EQ(0, ioctl(*fd, UDT_IOC_RESET))
		TH_LOG("RESET: %s", strerror(errno));
}

static inline void teardown_hook(int fd)
{
	if (fd < 0)
		return;
	ioctl(fd, UDT_IOC_RESET);	/* disarm */
	close(fd);
}

#endif /* UNWIND_DEFERRED_UDT_HOOK_H */
