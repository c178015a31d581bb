// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED from the observer's side: in a child pid
 * namespace, a sample and its PERF_RECORD_CALLCHAIN_DEFERRED record carry
 * the same tid, as the namespace of the event's owner sees it.
 *
 * Build with frame pointers and no sibling calls (see Makefile).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_observe.h"

/* tids_in_a_child_pid_namespace */
struct ns_child {
	int stop;
	pid_t pid_in_ns;
	int err;		/* errno of the child's perf_event_open() */
};

static int send_fd(int sock, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	char data = 'f';
	struct iovec iov = { .iov_base = &data, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov	= &iov,
		.msg_iovlen	= 1,
		.msg_control	= u.buf,
		.msg_controllen	= sizeof(u.buf),
	};
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	char data;
	struct iovec iov = { .iov_base = &data, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov	= &iov,
		.msg_iovlen	= 1,
		.msg_control	= u.buf,
		.msg_controllen	= sizeof(u.buf),
	};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, 0) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/*
 * Pid 1 of the new namespace: open an event on itself, hand it to the
 * parent, burn when told to until told to stop. Never returns.
 */
static void ns_child_main(const struct burner *b, struct ns_child *sh, int sock,
			  struct perf_event_attr *attr)
{
	double deadline;
	int fd;
	char x;

	sh->pid_in_ns = getpid();
	fd = perf_open(attr, 0, -1);
	if (fd < 0) {
		sh->err = errno;
		_exit(10);
	}
	if (send_fd(sock, fd))
		_exit(11);
	if (read(sock, &x, 1) != 1)
		_exit(12);
	deadline = ring_now() + 4 * RUN_SECONDS;
	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED) && ring_now() < deadline)
		if (!burn(b))
			_exit(13);
	_exit(0);
}

TEST(tids_in_a_child_pid_namespace)
{
	static const char * const name[2] = {
		"the event opened outside the namespace",
		"the event opened inside the namespace",
	};
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK);
	int sv[2], fd, i, status, others, common = 0, differ = 0;
	char msg[160] = "";
	struct ns_child *sh;
	__u32 tid[2], first = 0;
	struct ring r[2];
	struct burner b;
	pid_t child;
	size_t k, m = 0;

	burner_init(_metadata, &b);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_FALSE(sh == MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));

	if (unshare(CLONE_NEWPID)) {
		if (errno == EPERM || errno == EINVAL)
			SKIP(return, "unshare(CLONE_NEWPID): %s", strerror(errno));
		ASSERT_EQ(0, errno) TH_LOG("unshare(CLONE_NEWPID): %s", strerror(errno));
	}
	child = fork();
	ASSERT_LE(0, child) TH_LOG("fork into the new namespace: %s", strerror(errno));
	if (!child) {
		close(sv[0]);
		ns_child_main(&b, sh, sv[1], &attr);
	}
	close(sv[1]);

	/* r[0]: opened here, outside; r[1]: opened by the child, inside. */
	fd = recv_fd(sv[0]);
	ASSERT_LE(0, fd) TH_LOG("no event from the child (its perf_event_open(): %s)",
				strerror(sh->err));
	ASSERT_EQ(1, sh->pid_in_ns)
		TH_LOG("expected the child to be pid 1 of its namespace, it is %d",
		       sh->pid_in_ns);
	ASSERT_EQ(0, ring_map(&r[1], fd, &attr, DATA_PAGES))
		TH_LOG("mmap of the child's event: %s", strerror(errno));
	open_ring(_metadata, &r[0], &attr, child, -1, DATA_PAGES);
	tid[0] = child;
	tid[1] = 1;

	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_ENABLE, 0));
	ASSERT_EQ(1, write(sv[0], "g", 1));
	drain_until_sampled(r, 2);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	wait_exited(child, r, 2);
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_DISABLE, 0));
	status = reap(child);
	for (i = 0; i < 2; i++)
		ring_drain(&r[i]);
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x", status);

	for (i = 0; i < 2; i++) {
		__u64 excuse = last_cookie(&r[i], tid[i]);
		struct join j = join_tid(&r[i], tid[i], &excuse, 1, true);

		EXPECT_EQ(0, r[i].nr_malformed)
			TH_LOG("%s: malformed: %s", name[i], r[i].why);
		ASSERT_LE(MIN_SAMPLES, j.samples)
			TH_LOG("%s: expected samples of the child as tid %u, saw %d (of %zu)",
			       name[i], tid[i], j.samples, r[i].nr_samples);
		others = count_other(&r[i], PERF_RECORD_SAMPLE, tid[i], tid[i], &first);
		EXPECT_EQ(0, others)
			TH_LOG("%s: want samples with pid = tid = %u, %d were not (first: tid %u)",
			       name[i], tid[i], others, first);
		others = count_other(&r[i], PERF_RECORD_CALLCHAIN_DEFERRED, tid[i],
				     tid[i], &first);
		EXPECT_EQ(0, others)
			TH_LOG("%s: want records with pid = tid = %u, %d were not (first: tid %u)",
			       name[i], tid[i], others, first);
		expect_joined(_metadata, name[i], tid[i], &j);
		TH_LOG("%s: %d samples as tid %u (%d in user mode), %d deferred, %d joined",
		       name[i], j.samples, tid[i], j.user, j.deferred, j.joined);
	}

	/* One walk per stay: both buffers got the same user stack. */
	for (k = 0; k < r[0].nr_rec; k++) {
		const struct ring_record *a = &r[0].rec[k];
		const struct ring_record *c;

		if (a->type != PERF_RECORD_CALLCHAIN_DEFERRED ||
		    records_of_cookie(&r[1], a->cookie, &m) != 1)
			continue;
		common++;
		c = &r[1].rec[m];
		if (a->nr == c->nr && (!a->nr || !memcmp(a->ips, c->ips, a->nr * 8)))
			continue;
		if (!differ++)
			snprintf(msg, sizeof(msg), "cookie %#llx: %llu and %llu ips",
				 (unsigned long long)a->cookie,
				 (unsigned long long)a->nr, (unsigned long long)c->nr);
	}
	EXPECT_LE(1, common)
		TH_LOG("expected cookies with a record in both buffers, saw none");
	EXPECT_EQ(0, differ)
		TH_LOG("want one stack per cookie in both buffers, %d of %d differ (first: %s)",
		       differ, common, msg);

	for (i = 0; i < 2; i++)
		close_ring(&r[i]);
	close(sv[0]);
	munmap(sh, sizeof(*sh));
	burner_fini(&b);
}

TEST_HARNESS_MAIN
