/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The per-task state of deferred user stack walks (kernel/unwind/deferred.c),
 * kept in task_struct.
 */
#ifndef _LINUX_UNWIND_DEFERRED_TYPES_H
#define _LINUX_UNWIND_DEFERRED_TYPES_H

#include <linux/atomic.h>
#include <linux/types.h>

struct unwind_cache;

/**
 * struct unwind_task_info - deferred user stack walks of one task
 * @cookie:	the cookie of the current entry context (stay), 0 until a
 *		consumer asks; the only word tested on the return to user
 *		space
 * @pending:	mask of the consumers that asked and were not called back
 *		yet, and UNWIND_QUEUED while the task work is queued
 * @served:	mask of the consumers called back in the stay of the cached
 *		walk (valid while @cache's cookie is @cookie)
 * @cache:	the last walk, allocated on first use
 * @work:	the task work that walks and calls the consumers back
 *
 * 48 bytes on 64-bit: keep it so (Documentation/core-api/unwind_deferred.rst).
 */
struct unwind_task_info {
	u64			cookie;
	atomic_long_t		pending;
	atomic_long_t		served;
	struct unwind_cache	*cache;
	struct callback_head	work;
};

#endif /* _LINUX_UNWIND_DEFERRED_TYPES_H */
