// SPDX-License-Identifier: GPL-2.0
/*
 * The rules that walks by SFrame tables looked up, kept per mm.
 *
 * A lookup by table costs a binary search of the functions and a scan of
 * one function's rows, a dozen faulting reads of the process's memory,
 * where a frame-pointer frame costs none. The walks of one process meet
 * the same few return addresses over and over (the system call wrappers,
 * main, an interpreter's loop), so each mm keeps what its walks found: a
 * small table of (address, rule), filled by the walks, read by all of the
 * process's threads without a lock.
 *
 * An entry holds what sframe_find() found for its address in the tables:
 * a rule, "no table here" (walk the frame by its frame pointer), or "the
 * table cannot say" (no function covers the address, or its rows are
 * damaged: the walk ends there). What did not come from the tables (a read
 * that failed, a walk out of budget) is not kept. An entry is valid only
 * for the generation of the tables it was found in: every change of an
 * mm's tables (a table added, mapped over, unmapped, removed) moves
 * mm->sframe_gen, and an entry of another generation is a miss. A process
 * that rewrites a registered table in place keeps the rules already
 * cached until it registers the table again, as the documentation says.
 *
 * The cache is one 4 KiB allocation per mm, made by the first walk that
 * needs it, charged to the process's memory cgroup, freed with the mm:
 * 32 sets of 4 slots, an address going to one set (the addresses of one
 * stack, a handful of functions of one program, must not push each other
 * out as they would in a slot each). A new rule takes a slot of its set
 * that is free or stale, or else one at random. Each slot has its own
 * sequence count: a writer claims the slot by making it odd (with
 * cmpxchg: several threads may walk at once, and a slot that is being
 * written is not waited for, but skipped), readers retry nothing and take
 * a torn or busy slot as a miss.
 */
#include <linux/atomic.h>
#include <linux/hash.h>
#include <linux/mm_types.h>
#include <linux/mmap_lock.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/sizes.h>
#include <linux/unwind_user_types.h>

#include "sframe_cache.h"

#define SFRAME_CACHE_SET_BITS	5
#define SFRAME_CACHE_SETS	BIT(SFRAME_CACHE_SET_BITS)
#define SFRAME_CACHE_WAYS	4

/* What a slot keeps of a rule's booleans. */
#define SFRAME_CACHE_USE_FP	BIT(0)
#define SFRAME_CACHE_CFA_DEREF	BIT(1)
#define SFRAME_CACHE_FP_FROM_FP	BIT(2)
#define SFRAME_CACHE_OUTERMOST	BIT(3)
#define SFRAME_CACHE_SIGNAL	BIT(4)

/**
 * struct sframe_cache_slot - the rule of one address
 * @seq:	odd while a writer fills the slot, even otherwise; it moves
 *		at every write; 0: never written
 * @gen:	the generation of the mm's tables the rule was found in
 * @ip:		the address looked up
 * @cfa_off:	the rule's CFA offset (struct unwind_user_frame)
 * @ra_off:	its return address offset
 * @fp_off:	its frame pointer offset
 * @ret:	what sframe_find() returned: 0 (the rule), -ENOENT (the frame
 *		is walked by its frame pointer), -ESRCH or -EINVAL (the walk
 *		ends)
 * @flags:	SFRAME_CACHE_*: the rule's booleans
 *
 * 32 bytes: 128 slots in 4 KiB.
 */
struct sframe_cache_slot {
	u32		seq;
	u32		gen;
	unsigned long	ip;
	s32		cfa_off;
	s32		ra_off;
	s32		fp_off;
	s8		ret;
	u8		flags;
};

struct sframe_cache {
	struct sframe_cache_slot set[SFRAME_CACHE_SETS][SFRAME_CACHE_WAYS];
};

static_assert(sizeof(struct sframe_cache) <= SZ_4K);

static struct sframe_cache_slot *sframe_cache_set(struct sframe_cache *cache,
						  unsigned long ip)
{
	return cache->set[hash_long(ip, SFRAME_CACHE_SET_BITS)];
}

/**
 * sframe_cache_gen - the generation of @mm's tables, before a lookup
 * @mm:		the mm of the walk
 *
 * Read before the tables are: a rule found in them is stored with this
 * generation, and is stale if the tables changed meanwhile.
 *
 * Return: the generation; SFRAME_GEN_NONE when nothing may be cached.
 */
u32 sframe_cache_gen(struct mm_struct *mm)
{
	u32 gen = READ_ONCE(mm->sframe_gen);

	/* Pairs with the smp_wmb() of sframe_cache_tables_changed(). */
	smp_rmb();
	return gen;
}

/* Read @slot if it holds @ip of generation @gen; false if not, or torn. */
static bool sframe_cache_read(struct sframe_cache_slot *slot, unsigned long ip,
			      u32 gen, struct unwind_user_frame *frame, int *ret)
{
	u32 seq, flags;

	/* Pairs with the release of the slot by sframe_cache_store(). */
	seq = smp_load_acquire(&slot->seq);
	/* Never written (seq 0), or being written. */
	if (!seq || (seq & 1))
		return false;
	if (READ_ONCE(slot->ip) != ip || READ_ONCE(slot->gen) != gen)
		return false;
	flags = READ_ONCE(slot->flags);
	*ret = READ_ONCE(slot->ret);
	*frame = (struct unwind_user_frame) {
		.cfa_off	= READ_ONCE(slot->cfa_off),
		.ra_off		= READ_ONCE(slot->ra_off),
		.fp_off		= READ_ONCE(slot->fp_off),
		.use_fp		= flags & SFRAME_CACHE_USE_FP,
		.cfa_deref	= flags & SFRAME_CACHE_CFA_DEREF,
		.fp_from_fp	= flags & SFRAME_CACHE_FP_FROM_FP,
		.outermost	= flags & SFRAME_CACHE_OUTERMOST,
		.signal		= flags & SFRAME_CACHE_SIGNAL,
	};
	/* Everything read above was written before @seq was: not torn. */
	smp_rmb();
	return READ_ONCE(slot->seq) == seq;
}

/**
 * sframe_cache_lookup - the rule cached for @ip
 * @mm:		the mm of the walk, current's
 * @ip:		the address to look up (as sframe_find() takes it)
 * @gen:	sframe_cache_gen() of this walk
 * @frame:	filled with the rule when it is found
 * @ret:	set to what sframe_find() returned for @ip when it is found
 *
 * Context: any; no lock, no user access.
 *
 * Return: true when a rule of the generation @gen was cached for @ip.
 */
bool sframe_cache_lookup(struct mm_struct *mm, unsigned long ip, u32 gen,
			 struct unwind_user_frame *frame, int *ret)
{
	struct sframe_cache_slot *set;
	struct sframe_cache *cache;
	int way;

	/* Pairs with the cmpxchg() that published the cache, zeroed. */
	cache = smp_load_acquire(&mm->sframe_cache);
	if (!cache || gen == SFRAME_GEN_NONE)
		return false;
	set = sframe_cache_set(cache, ip);
	for (way = 0; way < SFRAME_CACHE_WAYS; way++)
		if (sframe_cache_read(&set[way], ip, gen, frame, ret))
			return true;
	return false;
}

/* The cache of @mm, allocated if it has none yet; NULL without memory. */
static struct sframe_cache *sframe_cache_get(struct mm_struct *mm)
{
	struct sframe_cache *cache, *old;

	/* As in sframe_cache_lookup(). */
	cache = smp_load_acquire(&mm->sframe_cache);
	if (cache)
		return cache;
	cache = kzalloc(sizeof(*cache), GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!cache)
		return NULL;
	/* Another thread's walk may have got there first: use its cache. */
	old = cmpxchg(&mm->sframe_cache, NULL, cache);
	if (old) {
		kfree(cache);
		return old;
	}
	return cache;
}

/*
 * The slot of @set for a rule of @ip, generation @gen: one that holds @ip
 * already or nothing of @gen, else one at random. Racy: two writers may
 * pick the same slot (one of them then finds it claimed) or keep @ip twice.
 */
static struct sframe_cache_slot *sframe_cache_victim(struct sframe_cache_slot *set,
						     unsigned long ip, u32 gen)
{
	int way;

	for (way = 0; way < SFRAME_CACHE_WAYS; way++) {
		if (!READ_ONCE(set[way].seq) || READ_ONCE(set[way].ip) == ip ||
		    READ_ONCE(set[way].gen) != gen)
			return &set[way];
	}
	return &set[get_random_u32_below(SFRAME_CACHE_WAYS)];
}

/**
 * sframe_cache_store - cache what sframe_find() found for @ip
 * @mm:		the mm of the walk, current's
 * @ip:		the address looked up
 * @gen:	sframe_cache_gen() of the walk, read before the lookup
 * @frame:	the rule found, when @ret is 0
 * @ret:	what sframe_find() returned: 0, -ENOENT, -ESRCH and -EINVAL
 *		say what the tables say and are kept; others are not
 *
 * Context: task context, may sleep (the first store allocates the cache).
 *
 * A slot another thread is writing keeps what that thread writes.
 */
void sframe_cache_store(struct mm_struct *mm, unsigned long ip, u32 gen,
			const struct unwind_user_frame *frame, int ret)
{
	struct sframe_cache_slot *slot;
	struct sframe_cache *cache;
	u32 seq, flags = 0;

	if (gen == SFRAME_GEN_NONE ||
	    (ret && ret != -ENOENT && ret != -ESRCH && ret != -EINVAL))
		return;
	cache = sframe_cache_get(mm);
	if (!cache)
		return;
	slot = sframe_cache_victim(sframe_cache_set(cache, ip), ip, gen);
	seq = READ_ONCE(slot->seq);
	if ((seq & 1) || cmpxchg(&slot->seq, seq, seq + 1) != seq)
		return;

	if (!ret) {
		flags = (frame->use_fp ? SFRAME_CACHE_USE_FP : 0) |
			(frame->cfa_deref ? SFRAME_CACHE_CFA_DEREF : 0) |
			(frame->fp_from_fp ? SFRAME_CACHE_FP_FROM_FP : 0) |
			(frame->outermost ? SFRAME_CACHE_OUTERMOST : 0) |
			(frame->signal ? SFRAME_CACHE_SIGNAL : 0);
		WRITE_ONCE(slot->cfa_off, frame->cfa_off);
		WRITE_ONCE(slot->ra_off, frame->ra_off);
		WRITE_ONCE(slot->fp_off, frame->fp_off);
	}
	WRITE_ONCE(slot->flags, flags);
	WRITE_ONCE(slot->ret, ret);
	WRITE_ONCE(slot->ip, ip);
	WRITE_ONCE(slot->gen, gen);
	/* The slot's contents before its even count: pairs with the lookup. */
	smp_store_release(&slot->seq, seq + 2);
}

/**
 * sframe_cache_tables_changed - @mm's tables changed: cached rules are stale
 * @mm:		the mm, mmap_lock held for writing, its tree already changed
 *
 * A walk that read the generation before this change stores what it
 * finds under the old generation, which no later lookup accepts. After
 * 2^32 - 1 changes the generation stays at SFRAME_GEN_NONE: nothing is
 * cached any more, so that an old entry can never become valid again.
 */
void sframe_cache_tables_changed(struct mm_struct *mm)
{
	u32 gen = mm->sframe_gen;

	mmap_assert_write_locked(mm);
	if (gen == SFRAME_GEN_NONE)
		return;
	/* The tree's change before the new generation: see sframe_cache_gen(). */
	smp_wmb();
	WRITE_ONCE(mm->sframe_gen, gen + 1);
}

/**
 * sframe_cache_free - free @mm's cache
 * @mm:		the mm, its last reference gone
 */
void sframe_cache_free(struct mm_struct *mm)
{
	kfree(mm->sframe_cache);
	mm->sframe_cache = NULL;
}
