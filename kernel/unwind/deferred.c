// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user stack walks.
 *
 * A consumer (perf, a tracer) asks from any context, NMI included, for the
 * user stack of the current task. Instead of walking it there, where page
 * faults are not allowed, the request takes the cookie of the task's
 * current entry context (its stay in the kernel, from entry until the
 * return to user space: a "stay" for short) and queues a task work. On the
 * task's way back to user space the work walks the user stack once,
 * caches it for the rest of the stay, and calls back every consumer that
 * asked, once each, with the stack and the cookie. The cookie ends at the
 * very end of the return to user space (unwind_reset_info()).
 *
 * The walk reads memory the task controls, and a read may block for as
 * long as the task wants (a page of a FUSE file whose daemon never
 * answers): it runs only where the task may sleep, outside any RCU read
 * section and any lock, and it has a budget of reads (unwind_user.h).
 *
 * The per-task state is touched by the task itself and by interrupts and
 * NMIs on the CPU it runs on, never by another CPU: compiler ordering and
 * atomic operations against a nested NMI are all it needs.
 */
#include <linux/export.h>
#include <linux/irq_work.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rculist.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/srcu.h>
#include <linux/task_work.h>
#include <linux/unwind_deferred.h>
#include <linux/unwind_user.h>

#define CREATE_TRACE_POINTS
#include <trace/events/unwind.h>

/* In unwind_task_info::pending: the task work is queued and has not run. */
#define UNWIND_QUEUED		BIT(BITS_PER_LONG - 1)

/*
 * In unwind_task_info::cache: this stay's walk had no cache to go to (the
 * allocation failed). The consumers were called with an empty stack and
 * the stay counts as served: the next stay tries again.
 */
#define UNWIND_CACHE_FAILED	((struct unwind_cache *)1UL)

static_assert(UNWIND_MAX_CONSUMERS < BITS_PER_LONG);
/* What every task_struct carries (Documentation/core-api/unwind_deferred.rst). */
static_assert(sizeof(struct unwind_task_info) <= 6 * sizeof(u64));

/*
 * The last walk of a task, and the stay it belongs to; the consumers
 * called back in that stay are unwind_task_info::served.
 */
struct unwind_cache {
	u64		cookie;
	unsigned int	nr;
	unsigned long	entries[];
};

/* One 4 KiB allocation, not the 8 KiB slab one byte more would take. */
#define UNWIND_CACHE_SIZE	SZ_4K
static_assert(struct_size_t(struct unwind_cache, entries, UNWIND_MAX_ENTRIES) <=
	      UNWIND_CACHE_SIZE);

/* The registered unwind_works, and the request bits they hold. */
static DEFINE_MUTEX(callbacks_mutex);
static LIST_HEAD(callbacks);
static unsigned long unwind_mask;
DEFINE_STATIC_SRCU(callbacks_srcu);

static DEFINE_PER_CPU(u32, unwind_cookie_counter);

/*
 * Raised at the end of a return to user space that left a walk queued:
 * its own return runs the task work (unwind_deferred_end_stay()).
 */
static void unwind_kick(struct irq_work *work) { }
static DEFINE_PER_CPU(struct irq_work, unwind_kick_work) =
	IRQ_WORK_INIT_HARD(unwind_kick);

/* Set from the end of the exit work to user mode (unwind_exit_work_done()). */
DEFINE_PER_CPU(bool, unwind_exit_work_ran);

/*
 * The cookie of the current stay: taken on the first request, kept until
 * the task returns to user space, also across migration. The low half is
 * the CPU it was taken on plus one, the high half that CPU's counter, odd
 * and advancing by 2, so a cookie is never 0 and never repeats.
 */
static u64 unwind_stay_cookie(struct unwind_task_info *info)
{
	u64 cookie = READ_ONCE(info->cookie);
	u64 taken;
	u32 count;
	int cpu;

	if (cookie == UNWIND_COOKIE_BLOCKED)
		return 0;
	if (cookie)
		return cookie;

	/*
	 * Same CPU for the counter and the number, and the add is one
	 * instruction, which an interrupt or NMI cannot split: preemption off
	 * is all it needs (no interrupts-off section, whose tracepoints would
	 * sample inside the request).
	 */
	preempt_disable_notrace();
	cpu = smp_processor_id();
	count = this_cpu_add_return(unwind_cookie_counter, 2) - 1;
	preempt_enable_notrace();
	taken = (u64)count << 32 | (cpu + 1);

	/*
	 * An NMI may have taken a cookie for this task between the read above
	 * and here, or this may be that NMI: the first one stored wins and
	 * both end with it.
	 */
	if (!try_cmpxchg64(&info->cookie, &cookie, taken))
		return cookie == UNWIND_COOKIE_BLOCKED ? 0 : cookie;
	return taken;
}

/*
 * The consumers of @bits are served in the current stay. Served is marked
 * before they leave ->pending, so a request in between sees them as one or
 * the other, never as neither (which would call them twice).
 */
static void unwind_mark_served(struct unwind_task_info *info,
			       unsigned long bits)
{
	atomic_long_or(bits, &info->served);
	atomic_long_andnot(bits, &info->pending);
}

/* Walk the user stack, at most once per stay. */
static void unwind_cached_walk(struct unwind_task_info *info, u64 cookie,
			       struct unwind_stacktrace *trace)
{
	struct unwind_cache *cache = info->cache;
	int reads;

	trace->nr = 0;
	trace->entries = NULL;
	if (cache == UNWIND_CACHE_FAILED)
		return;
	if (!cache) {
		/* Charged to the task's memory cgroup: the task asked for it. */
		cache = kmalloc(UNWIND_CACHE_SIZE, GFP_KERNEL_ACCOUNT);
		if (!cache) {
			/*
			 * Nothing to walk into: this stay is served with an
			 * empty stack, not asked again for every sample.
			 */
			atomic_long_set(&info->served, 0);
			WRITE_ONCE(info->cache, UNWIND_CACHE_FAILED);
			return;
		}
		cache->cookie = 0;
		/* Read from interrupts and NMIs of the task: initialised first. */
		barrier();
		WRITE_ONCE(info->cache, cache);
	}

	if (cache->cookie != cookie) {
		/* A new stay: nobody is served in it yet. */
		atomic_long_set(&info->served, 0);
		barrier();
		trace->entries = cache->entries;
		reads = unwind_user_faultable(trace, UNWIND_MAX_ENTRIES);
		WRITE_ONCE(cache->nr, trace->nr);
		/* The entries before the cookie: unwind_deferred_cached(). */
		barrier();
		WRITE_ONCE(cache->cookie, cookie);
		trace_unwind_deferred_walk(cookie, cache->nr, max(reads, 0));
	}
	trace->nr = cache->nr;
	trace->entries = cache->entries;
}

/* Task context: walk (once per stay) and call back who asked. */
static void unwind_deferred_run(struct unwind_task_info *info)
{
	struct unwind_stacktrace trace;
	struct unwind_work *work;
	unsigned long todo;
	u64 cookie;
	int idx;

	/*
	 * The walk reads memory the task controls and may block for as long
	 * as the task wants: never in an RCU read section (sleepable ones
	 * included), under a lock, or with preemption off
	 * (Documentation/core-api/unwind_deferred.rst).
	 */
	might_sleep();
	lockdep_assert_none_held_once();

	/* From here on, a new request queues a new run. */
	atomic_long_andnot(UNWIND_QUEUED, &info->pending);

	/* Taken again only when exec ended the stay under a request (NMI). */
	cookie = unwind_stay_cookie(info);
	if (!cookie) {
		/* Blocked meanwhile: nobody may get this stay's stack. */
		atomic_long_set(&info->pending, 0);
		return;
	}
	unwind_cached_walk(info, cookie, &trace);

	todo = atomic_long_read(&info->pending) & ~UNWIND_QUEUED;
	if (!todo)
		return;

	/*
	 * A consumer stays in ->pending while its callback runs: a request
	 * meanwhile, from an interrupt of this task, is told its callback is
	 * due (0), and the callback, not done yet, serves it. Once the
	 * callback has marked it served (unwind_deferred_mark_served()) or returned,
	 * the consumer is served (1): a request then knows it came after.
	 */
	idx = srcu_read_lock(&callbacks_srcu);
	list_for_each_entry_srcu(work, &callbacks, list,
				 srcu_read_lock_held(&callbacks_srcu)) {
		/* -1 while being cancelled. */
		int bit = READ_ONCE(work->bit);

		if (bit < 0 || !(todo & BIT(bit)))
			continue;
		work->func(work, &trace, cookie);
		unwind_mark_served(info, BIT(bit));
	}
	srcu_read_unlock(&callbacks_srcu, idx);

	/* The bits of consumers cancelled meanwhile: nobody left to call. */
	unwind_mark_served(info, todo);
}

/**
 * unwind_deferred_mark_served - answer later requests "already ran"
 * @work:	the consumer whose callback is running
 *
 * Context: @work's callback.
 *
 * From here on, a request of @work in this stay is told that the callback
 * already ran (1) rather than that it is due (0). A consumer whose callback
 * hands the stack to sinks that may appear at any time (perf's events, when
 * enabled) calls this before it writes to them: a request from then on,
 * from an interrupt of the callback too, checks whether its own sink got
 * the stack, instead of counting on a callback that may have passed that
 * sink already. Otherwise the consumer is served when its callback returns.
 */
void unwind_deferred_mark_served(struct unwind_work *work)
{
	int bit = READ_ONCE(work->bit);

	if (bit >= 0)
		unwind_mark_served(&current->unwind_info, BIT(bit));
}

/**
 * unwind_deferred_cached - the walk of the current stay, if it already ran
 * @cookie:	the stay's cookie, as a request answered 1 gave it
 * @trace:	set to the walk's entries, valid until the task's next stay
 *
 * Context: any, NMI included, for the current task.
 *
 * A consumer whose request came after the stay's walk (answered 1) and
 * whose sink missed the stack takes it from here, as the walk found it,
 * instead of walking the stack again where it can: the walk read tables
 * that a walk in an interrupt cannot. Only the task itself writes the
 * cache, at the walk of a new stay, never within the stay of @cookie.
 *
 * Return: 0, or -ENOENT when the cache does not hold that stay's walk.
 */
int unwind_deferred_cached(u64 cookie, struct unwind_stacktrace *trace)
{
	struct unwind_cache *cache = READ_ONCE(current->unwind_info.cache);

	if (!cache || cache == UNWIND_CACHE_FAILED || !cookie ||
	    READ_ONCE(cache->cookie) != cookie)
		return -ENOENT;
	/* Pairs with the barrier() of unwind_cached_walk(): same CPU. */
	barrier();
	trace->nr = READ_ONCE(cache->nr);
	trace->entries = cache->entries;
	return 0;
}

static void unwind_deferred_work(struct callback_head *head)
{
	unwind_deferred_run(container_of(head, struct unwind_task_info, work));
}

/*
 * Whether the callback of @bit already ran in the stay of @cookie. A failed
 * cache allocation is this stay's (unwind_forget_stay() drops it when the
 * stay ends): served are the consumers called back since, with an empty
 * stack; one that had not asked is queued, and gets the same.
 */
static bool unwind_served(struct unwind_task_info *info, u64 cookie,
			  unsigned long bit)
{
	struct unwind_cache *cache = READ_ONCE(info->cache);

	if (!cache)
		return false;
	if (cache != UNWIND_CACHE_FAILED && READ_ONCE(cache->cookie) != cookie)
		return false;
	return atomic_long_read(&info->served) & bit;
}

/*
 * A request on the way out, past the exit work: only the stay's cookie, if
 * the callback ran or is due in it; too late otherwise (the caller walks in
 * place), for deferring would start a stay that the task carries into user
 * space and ends with another stack.
 */
static int unwind_late_request(struct unwind_task_info *info,
			       unsigned long bit, u64 *cookie)
{
	u64 stay = READ_ONCE(info->cookie);

	if (!stay || stay == UNWIND_COOKIE_BLOCKED)
		return -EAGAIN;
	if (unwind_served(info, stay, bit)) {
		*cookie = stay;
		return 1;
	}
	if (atomic_long_read(&info->pending) & bit) {
		*cookie = stay;
		return 0;
	}
	return -EAGAIN;
}

/**
 * unwind_deferred_request - ask for the current task's user stack
 * @work:	a registered consumer (unwind_deferred_init())
 * @cookie:	where to store the cookie of the current kernel stay
 *
 * Context: any, NMI included, for the current task, with preemption off
 * (unwind_deferred_cancel() counts on it); NMI-safe primitives only.
 *
 * The stack is walked once per kernel stay, in task context before the
 * task returns to user space, and @work's callback gets it and
 * @cookie, once per stay whatever the number of requests.
 *
 * Return: 0 when the callback is queued or running (or was already), 1
 * when the callback already ran in this stay and returned (the same
 * @cookie, nothing queued),
 * -EINVAL for a task that has no user stack to walk (kernel threads, user
 * workers, exiting tasks), -EAGAIN on the way back to user space past the
 * exit work, while the kernel moves the task's user registers (a uprobe
 * hit) or in an exec that is changing the task's tid (walk the stack in
 * place in these cases), -ENOENT for a consumer that is not registered,
 * -ESRCH when the task work could not be queued.
 * *@cookie is 0 on error.
 */
int unwind_deferred_request(struct unwind_work *work, u64 *cookie)
{
	struct task_struct *task = current;
	struct unwind_task_info *info = &task->unwind_info;
	int nr = READ_ONCE(work->bit);
	unsigned long bit, old;
	int ret;

	*cookie = 0;
	/* Signed: a cancelled work's bit is -1. */
	if (nr < 0)
		return -ENOENT;
	if (!is_user_task(task) || (task->flags & PF_EXITING))
		return -EINVAL;

	bit = BIT(nr);
	/* Interrupts off: the flag is this CPU's, and so is the task. */
	if (!in_nmi() && irqs_disabled() && raw_cpu_read(unwind_exit_work_ran))
		return unwind_late_request(info, bit, cookie);

	*cookie = unwind_stay_cookie(info);
	if (!*cookie)
		return -EAGAIN;
	if (unwind_served(info, *cookie, bit))
		return 1;

	/*
	 * Asked already: queued, or its callback is running (the run clears
	 * UNWIND_QUEUED first, the consumer's bit once it is served).
	 */
	if (atomic_long_read(&info->pending) & bit)
		return 0;
	/* Another consumer queued the run: it serves this one too. */
	old = atomic_long_fetch_or(bit | UNWIND_QUEUED, &info->pending);
	if (old & (bit | UNWIND_QUEUED))
		return 0;

	/*
	 * Anything but an NMI (an interrupt, the task itself) came before
	 * the exit work (see above), which will run the walk. An NMI may have
	 * interrupted any instruction, the last ones of a return to user space
	 * too (a return thunk after the exit work's last look at the thread
	 * flags), and the registers it passes may be synthetic (an event raised
	 * in its handler): it raises a self-interrupt, whose return to user
	 * space runs the walk in this stay (TWA_NMI_CURRENT). TWA_RESUME would
	 * also record the queueing stack for KASAN, with a trylock, which has
	 * no place in NMI context. Requests come from perf samples taken under
	 * raw locks: no allocation either.
	 */
	if (in_nmi())
		ret = task_work_add(task, &info->work, TWA_NMI_CURRENT);
	else
		ret = task_work_add(task, &info->work,
				    TWA_RESUME | TWAF_NO_ALLOC);
	if (ret) {
		atomic_long_andnot(bit | UNWIND_QUEUED, &info->pending);
		*cookie = 0;
		return ret;
	}
	return 0;
}

/**
 * unwind_deferred_init - become a consumer of deferred user stacks
 * @work:	the consumer, owned by the caller until cancelled
 * @func:	its callback
 *
 * Context: task context, may sleep.
 *
 * Return: 0, or -EBUSY when UNWIND_MAX_CONSUMERS are registered already.
 */
int unwind_deferred_init(struct unwind_work *work, unwind_callback_t func)
{
	int bit;

	guard(mutex)(&callbacks_mutex);
	bit = find_first_zero_bit(&unwind_mask, UNWIND_MAX_CONSUMERS);
	if (bit >= UNWIND_MAX_CONSUMERS) {
		work->bit = -1;
		return -EBUSY;
	}

	__set_bit(bit, &unwind_mask);
	work->func = func;
	WRITE_ONCE(work->bit, bit);
	list_add_rcu(&work->list, &callbacks);
	return 0;
}

/**
 * unwind_deferred_cancel - stop being a consumer
 * @work:	a registered consumer
 *
 * Context: task context, may sleep.
 *
 * Requests that are pending in tasks are dropped for @work; when this
 * returns, its callback does not run any more and @work may be freed.
 * Every task forgets @work's requests and callbacks, so that a consumer
 * that takes its bit later starts afresh in every stay under way.
 */
void unwind_deferred_cancel(struct unwind_work *work)
{
	struct task_struct *g, *t;
	int bit = work->bit;

	if (bit < 0)
		return;

	scoped_guard(mutex, &callbacks_mutex) {
		list_del_rcu(&work->list);
		WRITE_ONCE(work->bit, -1);
	}
	/* No callback of @work runs any more ... */
	synchronize_srcu(&callbacks_srcu);
	/*
	 * ... nor a request that read its bit before it was -1: requests are
	 * made with preemption off (interrupts, NMIs, tracepoint probes).
	 */
	synchronize_rcu();

	scoped_guard(rcu) {
		for_each_process_thread(g, t) {
			atomic_long_andnot(BIT(bit), &t->unwind_info.pending);
			atomic_long_andnot(BIT(bit), &t->unwind_info.served);
		}
	}

	/* Only now may a new consumer take the bit. */
	scoped_guard(mutex, &callbacks_mutex)
		__clear_bit(bit, &unwind_mask);
}

/*
 * The stay is over: forget what it served and walked, so that its cookie,
 * should a CPU's counter wrap round to it, is a new stay; a failed cache
 * allocation is tried again in the next.
 */
static void unwind_forget_stay(struct unwind_task_info *info)
{
	struct unwind_cache *cache = info->cache;

	if (cache == UNWIND_CACHE_FAILED)
		WRITE_ONCE(info->cache, NULL);
	else if (cache)
		cache->cookie = 0;
}

/**
 * unwind_deferred_end_stay - end the kernel stay of the current task
 *
 * Context: the very end of the return to user space, interrupts off,
 * through unwind_reset_info() (only when the stay has a cookie).
 *
 * The next request takes a new cookie. A run that is still due keeps the
 * stay going until an interrupt's return to user space runs it, before
 * any user instruction: the user stack does not change in between. The
 * NMI that queued such a run raised that interrupt itself
 * (TWA_NMI_CURRENT); raising it here too costs nothing more while it is
 * pending, and keeps the stay's walk in the stay should anything else
 * ever queue one this late.
 */
void unwind_deferred_end_stay(void)
{
	struct unwind_task_info *info = &current->unwind_info;
	u64 cookie = READ_ONCE(info->cookie);
	unsigned long pending = atomic_long_read(&info->pending);

	if (pending) {
		if (pending & UNWIND_QUEUED)
			irq_work_queue(this_cpu_ptr(&unwind_kick_work));
		return;
	}
	WRITE_ONCE(info->cookie, 0);
	barrier();
	/*
	 * An NMI between the test and the clear queued a run under the
	 * ending cookie: give it back. An NMI after the clear took a new
	 * cookie, which stays.
	 */
	if (unlikely(atomic_long_read(&info->pending)) &&
	    !cmpxchg64(&info->cookie, 0, cookie))
		return;

	unwind_forget_stay(info);
}

/**
 * unwind_task_init - a new task has no stay, no request and no cache
 * @task:	the task being created (its task_struct was copied)
 */
void unwind_task_init(struct task_struct *task)
{
	memset(&task->unwind_info, 0, sizeof(task->unwind_info));
	init_task_work(&task->unwind_info.work, unwind_deferred_work);
}

/**
 * unwind_task_free - release the walk cache of a task being freed
 * @task:	the task
 */
void unwind_task_free(struct task_struct *task)
{
	if (task->unwind_info.cache != UNWIND_CACHE_FAILED)
		kfree(task->unwind_info.cache);
	task->unwind_info.cache = NULL;
}

/**
 * unwind_deferred_task_exit - run a pending walk of an exiting task
 * @task:	current, in do_exit() before its perf events and mm go
 *
 * Task work runs only after exit_mm(), when there is no user stack left:
 * run the pending walk now, so that its consumers see the stack the
 * requests saw. PF_EXITING is set: no new request is taken.
 */
void unwind_deferred_task_exit(struct task_struct *task)
{
	struct unwind_task_info *info = &task->unwind_info;

	if (!(atomic_long_read(&info->pending) & UNWIND_QUEUED))
		return;
	if (task_work_cancel(task, &info->work))
		unwind_deferred_run(info);
}

/*
 * Run the walk pending in the current stay, against the stack its requests
 * saw, and end the stay: @next takes the cookie's place (0, or
 * UNWIND_COOKIE_BLOCKED).
 */
static void unwind_end_stay_now(struct unwind_task_info *info, u64 next)
{
	u64 cookie, cleared;

	for (;;) {
		cookie = READ_ONCE(info->cookie);
		if (atomic_long_read(&info->pending) & UNWIND_QUEUED) {
			/*
			 * Not on the task's list: task_work_run() took it and
			 * runs it next, in this stay. No caller runs inside a
			 * task work; should one, the walk runs later, and may
			 * see a stack the requests did not.
			 */
			if (WARN_ON_ONCE(!task_work_cancel(current, &info->work)))
				return;
			unwind_deferred_run(info);
			/* An NMI may have asked again meanwhile: look again. */
			continue;
		}
		if (!try_cmpxchg64(&info->cookie, &cookie, next))
			continue;
		if (!(atomic_long_read(&info->pending) & UNWIND_QUEUED))
			break;
		/*
		 * An NMI between the test and the clear queued a run under
		 * the ending cookie: give the cookie back and run it. One
		 * after the clear took a new cookie (or was refused).
		 */
		cleared = next;
		if (!try_cmpxchg64(&info->cookie, &cleared, cookie))
			break;
	}
	unwind_forget_stay(info);
}

/**
 * unwind_deferred_user_rewrite - the user registers or stack are rewritten
 *
 * Context: current, task context, may sleep and fault, no lock held;
 * through unwind_user_rewrite() (only when the stay has a cookie).
 *
 * Where the kernel rewrites the task's user registers or stack inside one
 * stay (signal frame setup, rt_sigreturn, a ptrace stop), the samples
 * taken so far saw the old stack: the pending walk runs now, against it,
 * and the stay ends there. A later request takes a new cookie and gets
 * the stack the task returns to.
 */
void unwind_deferred_user_rewrite(void)
{
	unwind_end_stay_now(&current->unwind_info, 0);
}

/**
 * __unwind_deferred_pause - unwind_deferred_pause() with a stay under way
 *
 * Context: as unwind_deferred_pause(). Exported, as KVM may be a module.
 */
void __unwind_deferred_pause(void)
{
	unwind_end_stay_now(&current->unwind_info, UNWIND_COOKIE_BLOCKED);
}
EXPORT_SYMBOL_GPL(__unwind_deferred_pause);
