/* SPDX-License-Identifier: GPL-2.0 */
/*
 * An io_uring of our own, no liburing (which the test machines may lack):
 * shared by perf_events/deferred_iowq, whose io-wq workers must never
 * defer, deferred_enable, and the stress program's io_uring load.
 */
#ifndef DEFERRED_URING_H
#define DEFERRED_URING_H

#include <errno.h>
#include <linux/io_uring.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

struct uring {
	int fd;
	struct io_uring_params p;
	void *sq, *cq;
	size_t sq_size, cq_size;
	struct io_uring_sqe *sqes;
	size_t sqes_size;
	unsigned int *sq_tail, *sq_mask, *sq_array;
	unsigned int *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
};

static inline void *uring_map(size_t size, int fd, off_t off)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		       fd, off);

	return p == MAP_FAILED ? NULL : p;
}

/* Unmap and close what uring_setup() set up; u is left empty. */
static inline void uring_close(struct uring *u)
{
	if (u->sqes)
		munmap(u->sqes, u->sqes_size);
	if (u->cq && u->cq != u->sq)
		munmap(u->cq, u->cq_size);
	if (u->sq)
		munmap(u->sq, u->sq_size);
	if (u->fd >= 0)
		close(u->fd);
	memset(u, 0, sizeof(*u));
	u->fd = -1;
}

/* A ring of entries in u: 0, or -errno of what failed. */
static inline int uring_setup(struct uring *u, unsigned int entries)
{
	int err;

	memset(u, 0, sizeof(*u));
	u->fd = syscall(__NR_io_uring_setup, entries, &u->p);
	if (u->fd < 0)
		return -errno;
	u->sq_size = u->p.sq_off.array + u->p.sq_entries * sizeof(__u32);
	u->cq_size = u->p.cq_off.cqes + u->p.cq_entries * sizeof(struct io_uring_cqe);
	if (u->p.features & IORING_FEAT_SINGLE_MMAP) {
		if (u->cq_size > u->sq_size)
			u->sq_size = u->cq_size;
		u->cq_size = u->sq_size;
	}
	u->sq = uring_map(u->sq_size, u->fd, IORING_OFF_SQ_RING);
	if (!u->sq)
		goto fail;
	if (u->p.features & IORING_FEAT_SINGLE_MMAP)
		u->cq = u->sq;
	else
		u->cq = uring_map(u->cq_size, u->fd, IORING_OFF_CQ_RING);
	if (!u->cq)
		goto fail;
	u->sqes_size = u->p.sq_entries * sizeof(struct io_uring_sqe);
	u->sqes = uring_map(u->sqes_size, u->fd, IORING_OFF_SQES);
	if (!u->sqes)
		goto fail;
	u->sq_tail = (unsigned int *)((char *)u->sq + u->p.sq_off.tail);
	u->sq_mask = (unsigned int *)((char *)u->sq + u->p.sq_off.ring_mask);
	u->sq_array = (unsigned int *)((char *)u->sq + u->p.sq_off.array);
	u->cq_head = (unsigned int *)((char *)u->cq + u->p.cq_off.head);
	u->cq_tail = (unsigned int *)((char *)u->cq + u->p.cq_off.tail);
	u->cq_mask = (unsigned int *)((char *)u->cq + u->p.cq_off.ring_mask);
	u->cqes = (struct io_uring_cqe *)((char *)u->cq + u->p.cq_off.cqes);
	return 0;
fail:
	err = -errno;
	uring_close(u);
	return err;
}

#endif /* DEFERRED_URING_H */
