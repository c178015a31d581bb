/* SPDX-License-Identifier: GPL-2.0 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM unwind

#if !defined(_TRACE_UNWIND_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_UNWIND_H

#include <linux/tracepoint.h>

/**
 * unwind_deferred_walk - a deferred user stack walk ran
 * @cookie:	the kernel stay it belongs to, as its consumers get it
 * @nr:		the entries it found
 * @reads:	the reads of user memory it made (of the stack and of SFrame
 *		tables), at most UNWIND_USER_MAX_READS
 *
 * Once per stay that asked, in task context on the way back to user space
 * (kernel/unwind/deferred.c), whatever the number of consumers and of
 * requests: counting these against the requests shows what deferral saved.
 */
TRACE_EVENT(unwind_deferred_walk,
	    TP_PROTO(u64 cookie, unsigned int nr, unsigned int reads),
	    TP_ARGS(cookie, nr, reads),
	    TP_STRUCT__entry(__field(u64, cookie)
			     __field(unsigned int, nr)
			     __field(unsigned int, reads)),
	    TP_fast_assign(__entry->cookie = cookie;
			   __entry->nr = nr;
			   __entry->reads = reads;),
	    TP_printk("cookie=%#llx nr=%u reads=%u", __entry->cookie,
		      __entry->nr, __entry->reads)
);

#endif /* _TRACE_UNWIND_H */

/* This part must be outside protection */
#include <trace/define_trace.h>
