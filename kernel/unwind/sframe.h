/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The SFrame format (GNU binutils, "The SFrame format"), versions 1, 2 and
 * 3, as kernel/unwind/sframe.c reads it from user memory. Every structure
 * is packed: an FDE of version 1 is 17 bytes, version 3 keeps a 5-byte
 * record of each function among the FREs, so fields may be unaligned.
 */
#ifndef _KERNEL_UNWIND_SFRAME_H
#define _KERNEL_UNWIND_SFRAME_H

#include <linux/types.h>

#define SFRAME_MAGIC			0xdee2

#define SFRAME_VERSION_1		1
#define SFRAME_VERSION_2		2
#define SFRAME_VERSION_3		3

/* sframe_preamble::flags */
#define SFRAME_F_FDE_SORTED		0x1	/* FDEs sorted by start address */
#define SFRAME_F_FRAME_POINTER		0x2	/* v1, v2: the code keeps frame pointers */
#define SFRAME_F_FDE_FUNC_START_PCREL	0x4	/* v2, v3: start relative to the field */

/* sframe_header::abi_arch */
#define SFRAME_ABI_AMD64_ENDIAN_LITTLE	3

/* sframe_header::cfa_fixed_{fp,ra}_offset: not fixed, in each FRE instead */
#define SFRAME_CFA_FIXED_OFFSET_INVALID	0

/* The FRE start address type of an FDE: how wide an FRE's start is. */
#define SFRAME_FRE_TYPE_ADDR1		0
#define SFRAME_FRE_TYPE_ADDR2		1
#define SFRAME_FRE_TYPE_ADDR4		2

/*
 * The FDE type: an FRE's start is an offset into the function (PCINC), or
 * into each block of a repeated pattern such as PLT entries (PCMASK).
 */
#define SFRAME_FDE_TYPE_PCINC		0
#define SFRAME_FDE_TYPE_PCMASK		1

#define SFRAME_FUNC_FRE_TYPE(info)	((info) & 0xf)
#define SFRAME_FUNC_FDE_TYPE(info)	(((info) >> 4) & 0x1)

/*
 * Version 3: the FDE info byte's top bit marks a signal trampoline, whose
 * caller is the context the signal interrupted; the second info byte says
 * how the FREs' data words read.
 */
#define SFRAME_V3_FDE_SIGNAL(info)	(((info) >> 7) & 0x1)
#define SFRAME_V3_FDE_TYPE(info2)	((info2) & 0x1f)
/* The data words are offsets: CFA from SP or FP, then RA and FP from the CFA. */
#define SFRAME_V3_FDE_TYPE_DEFAULT	0
/* The data words are pairs, a control word and an offset, for CFA, RA, FP. */
#define SFRAME_V3_FDE_TYPE_FLEX		1

/*
 * A control word of a FLEX FDE: the value is register @regnum plus the
 * offset (reg_p), or the CFA plus the offset, and is read from that
 * address (deref_p). 0: no rule, the default's.
 */
#define SFRAME_V3_FLEX_REG_P(ctl)	((ctl) & 0x1)
#define SFRAME_V3_FLEX_DEREF_P(ctl)	(((ctl) >> 1) & 0x1)
#define SFRAME_V3_FLEX_REGNUM(ctl)	((ctl) >> 3)

/* DWARF's numbers of the AMD64 registers a walk knows in every frame. */
#define SFRAME_AMD64_DWARF_RBP		6
#define SFRAME_AMD64_DWARF_RSP		7

/* Version 1 has no rep_size: its PCMASK FDEs are AMD64's 16-byte PLT entries. */
#define SFRAME_V1_AMD64_REP_SIZE	16

/* An FRE's info byte: CFA base register, number and size of its offsets. */
#define SFRAME_BASE_REG_FP		0
#define SFRAME_BASE_REG_SP		1
#define SFRAME_FRE_CFA_BASE_REG(info)	((info) & 0x1)
#define SFRAME_FRE_OFFSET_COUNT(info)	(((info) >> 1) & 0xf)
#define SFRAME_FRE_OFFSET_SIZE(info)	(((info) >> 5) & 0x3)
#define SFRAME_FRE_MANGLED_RA(info)	(((info) >> 7) & 0x1)

#define SFRAME_FRE_OFFSET_1B		0
#define SFRAME_FRE_OFFSET_2B		1
#define SFRAME_FRE_OFFSET_4B		2

/* CFA, RA and FP, each a pair in a FLEX FDE: the most data words of an FRE. */
#define SFRAME_FRE_MAX_OFFSETS		6
/* Start address, info byte, offsets. */
#define SFRAME_FRE_MAX_SIZE		(4 + 1 + SFRAME_FRE_MAX_OFFSETS * 4)

struct sframe_preamble {
	u16	magic;
	u8	version;
	u8	flags;
} __packed;

struct sframe_header {
	struct sframe_preamble preamble;
	u8	abi_arch;
	s8	cfa_fixed_fp_offset;
	s8	cfa_fixed_ra_offset;
	u8	auxhdr_len;	/* bytes of an auxiliary header after this one */
	u32	num_fdes;
	u32	num_fres;
	u32	fre_len;	/* bytes of the FRE sub-section */
	u32	fdes_off;	/* both offsets from the end of the header(s) */
	u32	fres_off;
} __packed;

/* A function descriptor entry of version 1: 17 bytes. */
struct sframe_fde_v1 {
	s32	start_addr;	/* from the start of the section */
	u32	func_size;
	u32	fres_off;	/* of its first FRE, in the FRE sub-section */
	u32	fres_num;
	u8	info;
} __packed;

/* A function descriptor entry of version 2: 20 bytes. */
struct sframe_fde_v2 {
	s32	start_addr;	/* from the section, or from this field (PCREL) */
	u32	func_size;
	u32	fres_off;
	u32	fres_num;
	u8	info;
	u8	rep_size;	/* the repeated block of a PCMASK FDE */
	u16	padding;
} __packed;

/*
 * Version 3's FDE is an index entry, 16 bytes; the rest of the function's
 * description is a record at the head of its FREs.
 */
struct sframe_fde_v3 {
	s64	start_off;	/* from this field (PCREL) or from the section */
	u32	func_size;
	u32	fres_off;	/* of its record, in the FRE sub-section */
} __packed;

/* A function's record in version 3, 5 bytes; its FREs follow it. */
struct sframe_fda_v3 {
	u16	fres_num;
	u8	info;
	u8	info2;
	u8	rep_size;
} __packed;

#endif /* _KERNEL_UNWIND_SFRAME_H */
