/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The per-mm cache of the rules that walks by SFrame tables looked up
 * (kernel/unwind/sframe_cache.c), for kernel/unwind/sframe.c.
 */
#ifndef _KERNEL_UNWIND_SFRAME_CACHE_H
#define _KERNEL_UNWIND_SFRAME_CACHE_H

#include <linux/limits.h>
#include <linux/mm_types.h>
#include <linux/unwind_user_types.h>

/* The generation of an mm whose tables changed too often to cache. */
#define SFRAME_GEN_NONE		U32_MAX

u32 sframe_cache_gen(struct mm_struct *mm);
bool sframe_cache_lookup(struct mm_struct *mm, unsigned long ip, u32 gen,
			 struct unwind_user_frame *frame, int *ret);
void sframe_cache_store(struct mm_struct *mm, unsigned long ip, u32 gen,
			const struct unwind_user_frame *frame, int ret);
void sframe_cache_tables_changed(struct mm_struct *mm);
void sframe_cache_free(struct mm_struct *mm);

#endif /* _KERNEL_UNWIND_SFRAME_CACHE_H */
