// SPDX-License-Identifier: GPL-2.0
/*
 * libsframe-eh.so: SFrame tables for the libraries that have none, made
 * from their .eh_frame and registered with prctl(PR_SFRAME).
 *
 * The kernel's deferred user stack walk reads SFrame tables; Debian's
 * libraries have none, but every one of them has .eh_frame, the DWARF
 * call frame information that C++ exceptions and debuggers unwind with.
 * For the code of x86-64, the rules .eh_frame gives are mostly the ones an
 * SFrame table holds: the CFA as the stack or frame pointer plus an
 * offset, the return address at CFA - 8, and where %rbp was saved. This
 * library, preloaded (LD_PRELOAD), interprets the .eh_frame of every
 * loaded object without a PT_GNU_SFRAME segment, writes a table of
 * version 3 (binutils 2.46's default; SFRAME_EH_VERSION=2 in the
 * environment writes version 2) for the functions whose rules all fit,
 * and registers it for
 * the object's code. A function whose rules do not fit (a CFA computed by
 * an expression, as in PLT stubs; a return address elsewhere) gets no
 * entry: the kernel's walk ends at its frames, as at any code its table
 * leaves out. Objects that dlopen() loads get theirs when it returns.
 *
 * Nothing here runs unless preloaded; a kernel without PR_SFRAME refuses
 * the tables and the process runs as before. SFRAME_EH_VERBOSE=1 in the
 * environment reports each object's table on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/prctl.h>

#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME		0x6474e554
#endif

/* include/uapi/linux/prctl.h, for system headers older than the kernel. */
#ifndef PR_SFRAME
#define PR_SFRAME		0x53465241
#define PR_SFRAME_ADD		1
#define PR_SFRAME_REMOVE	2
struct prctl_sframe {
	__u64	sframe_start;
	__u64	sframe_size;
	__u64	text_start;
	__u64	text_size;
};
#endif

/* DWARF call frame instructions (DWARF 5, section 6.4.2) */
#define DW_CFA_advance_loc		0x40
#define DW_CFA_offset			0x80
#define DW_CFA_restore			0xc0
#define DW_CFA_nop			0x00
#define DW_CFA_set_loc			0x01
#define DW_CFA_advance_loc1		0x02
#define DW_CFA_advance_loc2		0x03
#define DW_CFA_advance_loc4		0x04
#define DW_CFA_offset_extended		0x05
#define DW_CFA_restore_extended		0x06
#define DW_CFA_undefined		0x07
#define DW_CFA_same_value		0x08
#define DW_CFA_register			0x09
#define DW_CFA_remember_state		0x0a
#define DW_CFA_restore_state		0x0b
#define DW_CFA_def_cfa			0x0c
#define DW_CFA_def_cfa_register		0x0d
#define DW_CFA_def_cfa_offset		0x0e
#define DW_CFA_def_cfa_expression	0x0f
#define DW_CFA_expression		0x10
#define DW_CFA_offset_extended_sf	0x11
#define DW_CFA_def_cfa_sf		0x12
#define DW_CFA_def_cfa_offset_sf	0x13
#define DW_CFA_val_offset		0x14
#define DW_CFA_val_offset_sf		0x15
#define DW_CFA_val_expression		0x16
#define DW_CFA_GNU_args_size		0x2e
#define DW_CFA_GNU_negative_offset_extended 0x2f

/* Pointer encodings (.eh_frame, LSB) */
#define DW_EH_PE_omit			0xff
#define DW_EH_PE_absptr			0x00
#define DW_EH_PE_uleb128		0x01
#define DW_EH_PE_udata2			0x02
#define DW_EH_PE_udata4			0x03
#define DW_EH_PE_udata8			0x04
#define DW_EH_PE_sleb128		0x09
#define DW_EH_PE_sdata2			0x0a
#define DW_EH_PE_sdata4			0x0b
#define DW_EH_PE_sdata8			0x0c
#define DW_EH_PE_pcrel			0x10
#define DW_EH_PE_datarel		0x30
#define DW_EH_PE_indirect		0x80

/* x86-64 DWARF register numbers */
#define REG_FP				6	/* %rbp */
#define REG_SP				7	/* %rsp */
#define REG_RA				16

/* The SFrame format, versions 2 and 3 (GNU binutils, "The SFrame format"). */
#define SFRAME_MAGIC			0xdee2
#define SFRAME_VERSION_2		2
#define SFRAME_VERSION_3		3
#define SFRAME_F_FDE_SORTED		0x1
#define SFRAME_F_FDE_FUNC_START_PCREL	0x4
#define SFRAME_ABI_AMD64_ENDIAN_LITTLE	3
#define SFRAME_HDR_SIZE			28
#define SFRAME_FDE_SIZE			20	/* version 2's */
#define SFRAME_FDE_V3_SIZE		16	/* version 3's index entry */
#define SFRAME_FDA_V3_SIZE		5	/* and its record among the FREs */
#define SFRAME_FRE_TYPE_ADDR1		0
#define SFRAME_FRE_TYPE_ADDR2		1
#define SFRAME_FRE_TYPE_ADDR4		2
#define SFRAME_FDE_TYPE_PCMASK		1
#define SFRAME_BASE_REG_FP		0
#define SFRAME_BASE_REG_SP		1
#define SFRAME_FRE_OFFSET_1B		0
#define SFRAME_FRE_OFFSET_2B		1
#define SFRAME_FRE_OFFSET_4B		2

#define ARRAY_SIZE(a)			(sizeof(a) / sizeof((a)[0]))
#define MAX_STATES			16	/* DW_CFA_remember_state nesting */
#define MAX_ROWS			4096	/* rows of one function */

/* The rule of one row: what an SFrame FRE says. */
struct row {
	uint64_t loc;		/* from the function's start */
	int reg;		/* of the CFA: REG_SP or REG_FP, -1 if not representable */
	int64_t cfa;		/* CFA = reg + cfa */
	int64_t fp;		/* %rbp saved at CFA + fp; 0: not saved */
	bool undefined;		/* the return address: none (outermost) */
	bool ra_moved;		/* the return address is not at CFA - 8 */
	int plt;		/* a lazy PLT's entries from here: see plt_expression() */
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	bool signal;
	const uint8_t *insns, *insns_end;
};

/* One function's rows, and where the table goes. */
struct func {
	uint64_t start, size;
	uint8_t rep_size;	/* a PCMASK function's block; 0: PCINC */
	struct row rows[MAX_ROWS];
	unsigned int nr;
};

/* The table under construction: FDEs in .eh_frame's order, then sorted. */
struct table {
	size_t eh_fdes;		/* FDEs read from .eh_frame */
	uint8_t *fdes;		/* num FDEs of SFRAME_FDE_SIZE bytes */
	uint64_t *starts;	/* of each FDE's function */
	size_t num, fde_cap, start_cap;
	uint8_t *fres;
	size_t fre_len, fre_cap, num_fres;
	size_t *order;
};

/*
 * The CFA of the entries of a lazy PLT, as GNU ld describes it: each
 * 16-byte entry pushes its index at its start and jumps on from its
 * byte T, so that the CFA is %rsp + 8 before T and %rsp + 16 from there,
 * %rsp + 8 + ((%rip & 15) >= T) * 8:
 *   DW_OP_breg7 (%rsp) 8; DW_OP_breg16 (%rip) 0; DW_OP_lit15; DW_OP_and;
 *   DW_OP_litT; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
 * SFrame says it with a PCMASK function of 16-byte blocks. T + 1, or 0
 * for any other expression.
 */
static int plt_expression(const uint8_t *p, uint64_t len)
{
	static const uint8_t head[] = { 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a };
	static const uint8_t tail[] = { 0x2a, 0x33, 0x24, 0x22 };

	if (len != sizeof(head) + 1 + sizeof(tail) ||
	    memcmp(p, head, sizeof(head)) || p[6] < 0x30 || p[6] > 0x3f ||
	    memcmp(p + 7, tail, sizeof(tail)))
		return 0;
	return p[6] - 0x30 + 1;
}

/* The delta of DW_CFA_advance_loc1, 2 or 4: 1, 2 or 4 bytes, little-endian. */
static bool read_advance(const uint8_t **p, const uint8_t *end, uint8_t op,
			 uint64_t *v)
{
	size_t size = op == DW_CFA_advance_loc1 ? 1 : op == DW_CFA_advance_loc2 ? 2 : 4;
	size_t i;

	if ((size_t)(end - *p) < size)
		return false;
	for (*v = 0, i = 0; i < size; i++)
		*v |= (uint64_t)(*p)[i] << (8 * i);
	*p += size;
	return true;
}

static bool read_uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	unsigned int shift = 0;
	uint8_t b;

	*v = 0;
	do {
		if (*p >= end || shift > 63)
			return false;
		b = *(*p)++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	return true;
}

static bool read_sleb(const uint8_t **p, const uint8_t *end, int64_t *v)
{
	unsigned int shift = 0;
	uint64_t u = 0;
	uint8_t b;

	do {
		if (*p >= end || shift > 63)
			return false;
		b = *(*p)++;
		u |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		u |= -(1ULL << shift);
	*v = (int64_t)u;
	return true;
}

/* An encoded pointer at *p (whose address it is): its value. */
static bool read_ptr(const uint8_t **p, const uint8_t *end, uint8_t enc,
		     uint64_t *v)
{
	const uint8_t *at = *p;
	uint64_t u;
	int64_t s;

	if (enc == DW_EH_PE_omit)
		return false;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		if (end - *p < 8)
			return false;
		memcpy(&u, *p, 8);
		*p += 8;
		break;
	case DW_EH_PE_udata4:
		if (end - *p < 4)
			return false;
		u = (uint64_t)(*p)[0] | (uint64_t)(*p)[1] << 8 |
		    (uint64_t)(*p)[2] << 16 | (uint64_t)(*p)[3] << 24;
		*p += 4;
		break;
	case DW_EH_PE_sdata4: {
		int32_t s32;

		if (end - *p < 4)
			return false;
		memcpy(&s32, *p, 4);
		u = (uint64_t)(int64_t)s32;
		*p += 4;
		break;
	}
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2: {
		uint16_t u16;

		if (end - *p < 2)
			return false;
		memcpy(&u16, *p, 2);
		u = (enc & 0x0f) == DW_EH_PE_sdata2 ? (uint64_t)(int16_t)u16 : u16;
		*p += 2;
		break;
	}
	case DW_EH_PE_uleb128:
		if (!read_uleb(p, end, &u))
			return false;
		break;
	case DW_EH_PE_sleb128:
		if (!read_sleb(p, end, &s))
			return false;
		u = (uint64_t)s;
		break;
	default:
		return false;
	}
	switch (enc & 0x70) {
	case 0:
		break;
	case DW_EH_PE_pcrel:
		u += (uintptr_t)at;
		break;
	default:
		return false;	/* not found in .eh_frame of x86-64 code */
	}
	if (enc & DW_EH_PE_indirect)
		return false;
	*v = u;
	return true;
}

static bool parse_cie(const uint8_t *p, const uint8_t *end, struct cie *cie)
{
	const char *aug;
	uint64_t len, u;
	uint8_t version, enc;

	memset(cie, 0, sizeof(*cie));
	cie->fde_enc = DW_EH_PE_absptr;
	if (p >= end)
		return false;
	version = *p++;
	if (version != 1 && version != 3)
		return false;
	aug = (const char *)p;
	p = memchr(p, 0, end - p);
	if (!p)
		return false;
	p++;
	if (strstr(aug, "eh"))
		return false;
	if (!read_uleb(&p, end, &cie->code_align) ||
	    !read_sleb(&p, end, &cie->data_align))
		return false;
	if (version == 1) {
		if (p >= end)
			return false;
		cie->ra_reg = *p++;
	} else if (!read_uleb(&p, end, &cie->ra_reg)) {
		return false;
	}
	if (aug[0] == 'z') {
		const uint8_t *data_end;

		if (!read_uleb(&p, end, &len) || len > (uint64_t)(end - p))
			return false;
		data_end = p + len;
		for (aug++; *aug; aug++) {
			switch (*aug) {
			case 'R':
				if (p >= data_end)
					return false;
				cie->fde_enc = *p++;
				break;
			case 'L':
				if (p >= data_end)
					return false;
				p++;
				break;
			case 'P':
				if (p >= data_end)
					return false;
				enc = *p++;
				/* Indirect pointers only need skipping. */
				if (!read_ptr(&p, data_end, enc & ~DW_EH_PE_indirect, &u))
					return false;
				break;
			case 'S':
				cie->signal = true;
				break;
			default:
				return false;
			}
		}
		p = data_end;
	} else if (aug[0]) {
		return false;
	}
	cie->insns = p;
	cie->insns_end = end;
	return true;
}

static void set_reg_rule(struct row *r, uint64_t reg, bool saved, int64_t off)
{
	if (reg == REG_FP)
		r->fp = saved ? off : 0;
	else if (reg == REG_RA)
		r->ra_moved = !saved || off != -8;
}

/*
 * Run the call frame instructions of [p, end) from row *r, adding a row to
 * f at each advance. false: the rules cannot be said in SFrame.
 */
static bool run_cfa(const struct cie *cie, const uint8_t *p, const uint8_t *end,
		    struct row *r, const struct row *initial, struct func *f)
{
	struct row stack[MAX_STATES];
	unsigned int depth = 0;
	uint64_t u, reg, delta;
	int64_t s;
	uint8_t op;

	while (p < end) {
		op = *p++;
		delta = 0;
		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			delta = (op & 0x3f) * cie->code_align;
			goto advance;
		case DW_CFA_offset:
			if (!read_uleb(&p, end, &u))
				return false;
			set_reg_rule(r, op & 0x3f, true, (int64_t)u * cie->data_align);
			continue;
		case DW_CFA_restore:
			reg = op & 0x3f;
			goto restore;
		}
		switch (op) {
		case DW_CFA_nop:
		case DW_CFA_GNU_args_size:
			if (op == DW_CFA_GNU_args_size && !read_uleb(&p, end, &u))
				return false;
			continue;
		case DW_CFA_advance_loc1:
		case DW_CFA_advance_loc2:
		case DW_CFA_advance_loc4:
			if (!read_advance(&p, end, op, &u))
				return false;
			delta = u * cie->code_align;
			goto advance;
		case DW_CFA_offset_extended:
			if (!read_uleb(&p, end, &reg) || !read_uleb(&p, end, &u))
				return false;
			set_reg_rule(r, reg, true, (int64_t)u * cie->data_align);
			continue;
		case DW_CFA_offset_extended_sf:
			if (!read_uleb(&p, end, &reg) || !read_sleb(&p, end, &s))
				return false;
			set_reg_rule(r, reg, true, s * cie->data_align);
			continue;
		case DW_CFA_restore_extended:
			if (!read_uleb(&p, end, &reg))
				return false;
			goto restore;
		case DW_CFA_undefined:
			if (!read_uleb(&p, end, &reg))
				return false;
			if (reg == REG_RA)
				r->undefined = true;
			else
				set_reg_rule(r, reg, false, 0);
			continue;
		case DW_CFA_same_value:
			if (!read_uleb(&p, end, &reg))
				return false;
			set_reg_rule(r, reg, false, 0);
			continue;
		case DW_CFA_register:
			if (!read_uleb(&p, end, &reg) || !read_uleb(&p, end, &u))
				return false;
			/* A register in another: only harmless for scratch ones. */
			if (reg == REG_FP || reg == REG_RA)
				return false;
			continue;
		case DW_CFA_remember_state:
			if (depth == MAX_STATES)
				return false;
			stack[depth++] = *r;
			continue;
		case DW_CFA_restore_state:
			if (!depth)
				return false;
			u = r->loc;
			*r = stack[--depth];
			r->loc = u;
			continue;
		case DW_CFA_def_cfa:
			if (!read_uleb(&p, end, &reg) || !read_uleb(&p, end, &u))
				return false;
			r->reg = reg == REG_SP || reg == REG_FP ? (int)reg : -1;
			r->cfa = (int64_t)u;
			continue;
		case DW_CFA_def_cfa_sf:
			if (!read_uleb(&p, end, &reg) || !read_sleb(&p, end, &s))
				return false;
			r->reg = reg == REG_SP || reg == REG_FP ? (int)reg : -1;
			r->cfa = s * cie->data_align;
			continue;
		case DW_CFA_def_cfa_register:
			if (!read_uleb(&p, end, &reg))
				return false;
			r->reg = reg == REG_SP || reg == REG_FP ? (int)reg : -1;
			continue;
		case DW_CFA_def_cfa_offset:
			if (!read_uleb(&p, end, &u))
				return false;
			r->cfa = (int64_t)u;
			continue;
		case DW_CFA_def_cfa_offset_sf:
			if (!read_sleb(&p, end, &s))
				return false;
			r->cfa = s * cie->data_align;
			continue;
		case DW_CFA_expression:
		case DW_CFA_val_expression:
			if (!read_uleb(&p, end, &reg) || !read_uleb(&p, end, &u) ||
			    u > (uint64_t)(end - p))
				return false;
			p += u;
			if (reg == REG_FP || reg == REG_RA)
				return false;
			continue;
		case DW_CFA_val_offset:
		case DW_CFA_val_offset_sf:
			if (!read_uleb(&p, end, &reg))
				return false;
			if (op == DW_CFA_val_offset ? !read_uleb(&p, end, &u) :
			    !read_sleb(&p, end, &s))
				return false;
			if (reg == REG_FP || reg == REG_RA)
				return false;
			continue;
		case DW_CFA_def_cfa_expression:
			if (!read_uleb(&p, end, &u) || u > (uint64_t)(end - p))
				return false;
			r->plt = plt_expression(p, u);
			if (!r->plt)
				return false;
			r->reg = REG_SP;
			r->cfa = 8;
			p += u;
			continue;
		default:
			/* set_loc, and what else there is */
			return false;
		}
advance:
		if (f) {
			if (f->nr == MAX_ROWS)
				return false;
			f->rows[f->nr++] = *r;
		}
		r->loc += delta;
		continue;
restore:
		if (!initial)
			return false;
		if (reg == REG_FP)
			r->fp = initial->fp;
		else if (reg == REG_RA)
			r->ra_moved = initial->ra_moved;
	}
	if (f) {
		if (f->nr == MAX_ROWS)
			return false;
		f->rows[f->nr++] = *r;
	}
	return true;
}

static bool grow(void **p, size_t *cap, size_t need, size_t unit)
{
	size_t n = *cap ? *cap : 256;
	void *q;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * unit);
	if (!q)
		return false;
	*p = q;
	*cap = n;
	return true;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);	/* little endian */
	return v;
}

/*
 * The FREs of a function whose rows all fit: one per distinct row, the
 * starts in the smallest width the function needs, each row's offsets in
 * the smallest that holds them.
 */
static bool add_func(struct table *t, const struct func *f)
{
	unsigned int i, nr_off, first_fre = t->num_fres;
	int addr_size = f->size <= 0xff ? 1 : f->size <= 0xffff ? 2 : 4;
	uint8_t fre_type = addr_size == 1 ? SFRAME_FRE_TYPE_ADDR1 :
			   addr_size == 2 ? SFRAME_FRE_TYPE_ADDR2 :
			   SFRAME_FRE_TYPE_ADDR4;
	size_t fre_off = t->fre_len;
	uint8_t *fde;

	for (i = 0; i < f->nr; i++) {
		const struct row *r = &f->rows[i];
		int64_t off[2] = { r->cfa, r->fp };
		int osize, j;
		uint8_t info, *p;

		if (r->reg < 0 || r->ra_moved || r->cfa > INT32_MAX ||
		    r->cfa < INT32_MIN || r->fp > INT32_MAX || r->fp < INT32_MIN)
			return false;
		/* Rows of an empty range: the last of them holds. */
		if (r->loc >= f->size || (i + 1 < f->nr && f->rows[i + 1].loc == r->loc))
			continue;
		nr_off = r->undefined ? 0 : r->fp ? 2 : 1;
		osize = 1;
		for (j = 0; j < (int)nr_off; j++) {
			if (off[j] < INT16_MIN || off[j] > INT16_MAX)
				osize = 4;
			else if ((off[j] < INT8_MIN || off[j] > INT8_MAX) && osize < 2)
				osize = 2;
		}
		if (!grow((void **)&t->fres, &t->fre_cap, t->fre_len + addr_size + 1 + 8, 1))
			return false;
		p = t->fres + t->fre_len;
		memcpy(p, &r->loc, addr_size);	/* little endian */
		info = (r->reg == REG_SP ? SFRAME_BASE_REG_SP : SFRAME_BASE_REG_FP) |
		       nr_off << 1 |
		       (osize == 1 ? SFRAME_FRE_OFFSET_1B : osize == 2 ?
			SFRAME_FRE_OFFSET_2B : SFRAME_FRE_OFFSET_4B) << 5;
		p[addr_size] = info;
		p += addr_size + 1;
		for (j = 0; j < (int)nr_off; j++, p += osize) {
			int32_t v = (int32_t)off[j];

			memcpy(p, &v, osize);	/* little endian: the low bytes */
		}
		t->fre_len = p - t->fres;
		t->num_fres++;
	}
	/* Version 3 counts a function's rows in 16 bits. */
	if (t->num_fres == first_fre || t->num_fres - first_fre > UINT16_MAX ||
	    f->size > UINT32_MAX)
		return false;

	if (!grow((void **)&t->fdes, &t->fde_cap, t->num + 1, SFRAME_FDE_SIZE) ||
	    !grow((void **)&t->starts, &t->start_cap, t->num + 1, sizeof(*t->starts)))
		return false;
	fde = t->fdes + t->num * SFRAME_FDE_SIZE;
	memset(fde, 0, SFRAME_FDE_SIZE);
	put_u32(fde + 4, f->size);
	put_u32(fde + 8, fre_off);
	put_u32(fde + 12, t->num_fres - first_fre);
	fde[16] = fre_type | (f->rep_size ? SFRAME_FDE_TYPE_PCMASK << 4 : 0);
	fde[17] = f->rep_size;
	t->starts[t->num++] = f->start;
	return true;
}

/*
 * A lazy PLT: the rows before its entries (PLT0, which pushes the GOT's
 * second word and jumps to the resolver), then the entries, 16-byte
 * blocks from a 16-byte boundary, as a PCMASK function.
 */
static void add_plt(struct table *t, struct func *f)
{
	uint64_t start = f->start, size = f->size, entries;
	unsigned int k = 0, i;
	int plt;

	while (!f->rows[k].plt)
		k++;
	plt = f->rows[k].plt;
	entries = f->rows[k].loc;
	for (i = k; i < f->nr; i++)
		if (f->rows[i].plt != plt)
			return;
	if ((start + entries) % 16 || entries >= size)
		return;
	if (entries) {
		f->nr = k;
		f->size = entries;
		if (!add_func(t, f))
			return;
	}
	f->start = start + entries;
	f->size = size - entries;
	f->rep_size = 16;
	f->rows[0] = (struct row) { .loc = 0, .reg = REG_SP, .cfa = 8 };
	f->rows[1] = (struct row) { .loc = plt - 1, .reg = REG_SP, .cfa = 16 };
	f->nr = 2;
	add_func(t, f);
}

/* The CIE an FDE points at, id bytes back from its field at body. */
static bool find_cie(const uint8_t *start, const uint8_t *end,
		     const uint8_t *body, uint32_t id, struct cie *cie)
{
	const uint8_t *rec;
	uint32_t len, cie_id;

	if (id > (uint64_t)(body - start))
		return false;
	rec = body - id;
	if (end - rec < 8)
		return false;
	memcpy(&len, rec, 4);
	memcpy(&cie_id, rec + 4, 4);
	if (len == 0xffffffff || len < 4 || len > (uint64_t)(end - rec - 4) || cie_id)
		return false;
	return parse_cie(rec + 8, rec + 4 + len, cie);
}

/* Convert the FDEs of .eh_frame [start, end) whose functions lie in [lo, hi). */
static void convert(struct table *t, const uint8_t *start, const uint8_t *end,
		    uint64_t lo, uint64_t hi, struct func *f)
{
	const uint8_t *p = start;

	while (end - p >= 4) {
		const uint8_t *body, *rec_end, *q;
		uint32_t len32, id;
		uint64_t len, pc, range, alen;
		struct row r, initial;
		struct cie cie;

		memcpy(&len32, p, 4);
		p += 4;
		if (!len32)
			break;		/* the terminator */
		if (len32 == 0xffffffff) {
			if (end - p < 8)
				break;
			memcpy(&len, p, 8);
			p += 8;
		} else {
			len = len32;
		}
		if (len > (uint64_t)(end - p) || len < 4)
			break;
		body = p;
		rec_end = p + len;
		p = rec_end;
		memcpy(&id, body, 4);
		if (!id)
			continue;	/* a CIE: read with its FDEs */
		t->eh_fdes++;
		if (!find_cie(start, end, body, id, &cie))
			continue;
		if (cie.ra_reg != REG_RA || cie.signal || cie.code_align != 1)
			continue;
		q = body + 4;
		if (!read_ptr(&q, rec_end, cie.fde_enc, &pc) ||
		    !read_ptr(&q, rec_end, cie.fde_enc & 0x0f, &range))
			continue;
		if (pc < lo || pc >= hi || !range || range > hi - pc)
			continue;
		if (!read_uleb(&q, rec_end, &alen) || alen > (uint64_t)(rec_end - q))
			continue;
		q += alen;

		memset(&r, 0, sizeof(r));
		r.reg = -1;
		f->nr = 0;
		if (!run_cfa(&cie, cie.insns, cie.insns_end, &r, NULL, NULL))
			continue;
		initial = r;
		r.loc = 0;
		f->start = pc;
		f->size = range;
		f->rep_size = 0;
		if (!run_cfa(&cie, q, rec_end, &r, &initial, f))
			continue;
		if (f->rows[f->nr - 1].plt)
			add_plt(t, f);
		else
			add_func(t, f);
	}
}

static const struct table *sort_table;

static int by_start(const void *a, const void *b)
{
	uint64_t x = sort_table->starts[*(const size_t *)a];
	uint64_t y = sort_table->starts[*(const size_t *)b];

	return x < y ? -1 : x > y;
}

/*
 * Whether a table at [sf, sf + len) can reach every function of the code
 * at [text_start, text_end): each FDE holds its function's start as a
 * signed 32-bit offset from the FDE itself.
 */
static bool reaches(uint64_t sf, size_t len, uint64_t text_start,
		    uint64_t text_end)
{
	return (int64_t)(text_start - (sf + len)) >= INT32_MIN &&
	       (int64_t)(text_end - sf) <= INT32_MAX;
}

/*
 * @len bytes of private memory at @addr (a hint, unless @flags say more):
 * anonymous, or the table of the cache file @fd (at its second page).
 */
static void *map_at(uint64_t addr, size_t len, int flags, int fd)
{
	return mmap((void *)addr, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | (fd < 0 ? MAP_ANONYMOUS : 0) | flags, fd,
		    fd < 0 ? 0 : sysconf(_SC_PAGESIZE));
}

/*
 * Memory for the table of the object mapped at [lo, hi), within reach of
 * its code. Right after the code are its own data and, for the program,
 * the heap, which a table there would stop growing; the kernel's choice of
 * address, without a hint, is next to the libraries, gigabytes away from a
 * PIE program. So: the first free place below the object, then above it
 * (not for the program), then the kernel's choice if that happens to be
 * near enough (libraries).
 */
/*
 * The first free place of @len bytes in reach of the code, probing 64
 * places from @addr on, @step bytes apart (negative: downwards).
 */
static void *map_first_free(uint64_t addr, int64_t step, size_t len,
			    uint64_t text_start, uint64_t text_end, int fd)
{
	void *sf;
	int i;

	for (i = 0; i < 64; i++, addr += step) {
		if (step < 0 && addr < (uint64_t)-step)
			break;
		if (!reaches(addr, len, text_start, text_end))
			break;
		sf = map_at(addr, len, MAP_FIXED_NOREPLACE, fd);
		/* A kernel older than 4.17 takes the flag as a mere hint. */
		if (sf == (void *)addr)
			return sf;
		if (sf != MAP_FAILED)
			munmap(sf, len);
	}
	return NULL;
}

static void *map_near(uint64_t lo, uint64_t hi, size_t len,
		      uint64_t text_start, uint64_t text_end, bool program, int fd)
{
	int64_t step = len + 16 * sysconf(_SC_PAGESIZE);
	void *sf = NULL;

	if (lo > (uint64_t)step)
		sf = map_first_free(lo - step, -step, len, text_start, text_end, fd);
	/* Above the program is its heap: brk() would fail there. */
	if (!sf && !program)
		sf = map_first_free(hi + step - len, step, len, text_start, text_end, fd);
	if (sf)
		return sf;
	sf = map_at(0, len, 0, fd);
	if (sf == MAP_FAILED)
		return NULL;
	if (reaches((uint64_t)sf, len, text_start, text_end))
		return sf;
	munmap(sf, len);
	errno = ERANGE;
	return NULL;
}

static int version = SFRAME_VERSION_3;

/* The bytes of the FREs of function k (in the order add_func() took them). */
static size_t fre_bytes(const struct table *t, size_t k)
{
	size_t end = k + 1 < t->num ?
		     get_u32(t->fdes + (k + 1) * SFRAME_FDE_SIZE + 8) : t->fre_len;

	return end - get_u32(t->fdes + k * SFRAME_FDE_SIZE + 8);
}

/*
 * Version 3's FDEs and FREs: per function, sorted, an index entry with a
 * 64-bit PC-relative start, and among the FREs a record of its row count
 * and info byte before its rows.
 */
static void write_v3(const struct table *t, uint8_t *sf)
{
	size_t fdes_len = t->num * SFRAME_FDE_V3_SIZE, i, at = 0;
	uint8_t *fres = sf + SFRAME_HDR_SIZE + fdes_len;

	for (i = 0; i < t->num; i++) {
		const uint8_t *v2 = t->fdes + t->order[i] * SFRAME_FDE_SIZE;
		uint8_t *fde = sf + SFRAME_HDR_SIZE + i * SFRAME_FDE_V3_SIZE;
		int64_t rel = (int64_t)(t->starts[t->order[i]] - (uint64_t)fde);
		size_t len = fre_bytes(t, t->order[i]);
		uint16_t nr = get_u32(v2 + 12);

		memcpy(fde, &rel, 8);
		memcpy(fde + 8, v2 + 4, 4);		/* size */
		put_u32(fde + 12, at);
		memcpy(fres + at, &nr, 2);
		fres[at + 2] = v2[16];			/* FRE type, PCINC */
		fres[at + 3] = 0;			/* DEFAULT data words */
		fres[at + 4] = v2[17];			/* PCMASK's rep_size */
		at += SFRAME_FDA_V3_SIZE;
		memcpy(fres + at, t->fres + get_u32(v2 + 8), len);
		at += len;
	}
}

/*
 * The table of one object: its header, FDEs sorted by function, FREs, in
 * memory within 2 GiB of the code (version 2's 32-bit PC-relative starts;
 * version 3 would reach further, but needs not), which spans [lo, hi) with
 * the object's data. NULL when nothing of it could be converted or placed,
 * with errno set.
 */
static uint8_t *write_table(struct table *t, uint64_t lo, uint64_t hi,
			    uint64_t text_start, uint64_t text_end,
			    bool program, size_t *size)
{
	size_t page = sysconf(_SC_PAGESIZE), i, len, fdes_len, fre_len;
	uint16_t magic = SFRAME_MAGIC;
	uint8_t *sf, *fde;

	errno = ENODATA;
	if (!t->num)
		return NULL;
	/* A table made for another mapping of the file is in order already. */
	if (!t->order) {
		t->order = calloc(t->num, sizeof(*t->order));
		if (!t->order) {
			errno = ENOMEM;
			return NULL;
		}
		for (i = 0; i < t->num; i++)
			t->order[i] = i;
		sort_table = t;
		qsort(t->order, t->num, sizeof(*t->order), by_start);
	}

	if (version == SFRAME_VERSION_3) {
		fdes_len = t->num * SFRAME_FDE_V3_SIZE;
		fre_len = t->fre_len + t->num * SFRAME_FDA_V3_SIZE;
	} else {
		fdes_len = t->num * SFRAME_FDE_SIZE;
		fre_len = t->fre_len;
	}
	len = SFRAME_HDR_SIZE + fdes_len + fre_len;
	*size = len;
	len = (len + page - 1) & ~(page - 1);
	sf = map_near(lo & ~(page - 1), (hi + page - 1) & ~(page - 1), len,
		      text_start, text_end, program, -1);
	if (!sf)
		return NULL;

	memcpy(sf, &magic, 2);
	sf[2] = version;
	sf[3] = SFRAME_F_FDE_SORTED | SFRAME_F_FDE_FUNC_START_PCREL;
	sf[4] = SFRAME_ABI_AMD64_ENDIAN_LITTLE;
	sf[5] = 0;			/* %rbp: in each FRE */
	sf[6] = (uint8_t)-8;		/* the return address at CFA - 8 */
	sf[7] = 0;
	put_u32(sf + 8, t->num);
	put_u32(sf + 12, t->num_fres);
	put_u32(sf + 16, fre_len);
	put_u32(sf + 20, 0);
	put_u32(sf + 24, fdes_len);
	if (version == SFRAME_VERSION_3) {
		write_v3(t, sf);
		mprotect(sf, len, PROT_READ);
		return sf;
	}
	for (i = 0; i < t->num; i++) {
		int64_t rel;
		int32_t rel32;

		fde = sf + SFRAME_HDR_SIZE + i * SFRAME_FDE_SIZE;
		memcpy(fde, t->fdes + t->order[i] * SFRAME_FDE_SIZE, SFRAME_FDE_SIZE);
		rel = (int64_t)(t->starts[t->order[i]] - (uint64_t)fde);
		rel32 = (int32_t)rel;
		memcpy(fde, &rel32, 4);
	}
	memcpy(sf + SFRAME_HDR_SIZE + fdes_len, t->fres, t->fre_len);
	mprotect(sf, len, PROT_READ);
	return sf;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool verbose;

/* A loaded object: its name ("" for the program), bias and program headers. */
struct object {
	const char *name;
	uint64_t bias;
	const Elf64_Phdr *phdr;
	unsigned int phnum;
};

/* A table this library registered, to go when its object does. */
struct registered {
	uint64_t text_start;
	void *sf;
	size_t len;
	bool initial;
};

/*
 * Tables made lately, by file. An auditor's namespace has a libc of its
 * own, mapped from the same file as the program's: the second one is the
 * first one's table, moved, not a second conversion. Kept until the
 * program's first objects are loaded (la_activity()).
 */
struct made {
	dev_t dev;
	ino_t ino;
	uint64_t bias;
	struct table t;
};

static struct made made[4];
static unsigned int nr_made;
static bool keep_made;

static void free_table(struct table *t)
{
	free(t->fdes);
	free(t->fres);
	free(t->starts);
	free(t->order);
	memset(t, 0, sizeof(*t));
}

static void forget_made(void)
{
	while (nr_made)
		free_table(&made[--nr_made].t);
	keep_made = false;
}

/* The table made for another mapping of @o's file @st, moved to @o's; or NULL. */
static struct table *made_for(const struct object *o, const struct stat *st)
{
	unsigned int i;
	size_t k;

	if (!*o->name)
		return NULL;
	for (i = 0; i < nr_made; i++) {
		struct made *m = &made[i];

		if (m->dev != st->st_dev || m->ino != st->st_ino)
			continue;
		for (k = 0; k < m->t.num; k++)
			m->t.starts[k] += o->bias - m->bias;
		m->bias = o->bias;
		return &m->t;
	}
	return NULL;
}

/*
 * Tables on disk, per user: the work of converting an object's .eh_frame
 * is done once, not at every start of every program that loads it. A
 * cache file holds a header saying what it was made from (the file's
 * device, inode, size and modification time, where its code is, the
 * SFrame version, the format of this library's tables), then, from its
 * second page on, the table as it was registered, mapped privately by
 * later processes: its rows stay shared in the page cache, and only its
 * function index is written, when the table lands at another distance
 * from the code (each function's start is relative to its own entry).
 * The folder: $SFRAME_EH_CACHE_DIR, or $XDG_CACHE_HOME/sframe-eh, or
 * ~/.cache/sframe-eh; SFRAME_EH_CACHE=0 turns it off. It must be the
 * user's own and not writable by others; the kernel trusts no table
 * anyway, so a bad one costs stacks, not safety.
 */
#define CACHE_MAGIC		"SFEHTAB"
/* Bumped with any change of what convert() and write_table() make. */
#define CACHE_FORMAT		2

struct cache_hdr {
	char magic[8];
	uint32_t format;
	uint32_t version;
	uint64_t dev, ino, size, mtime_sec, mtime_nsec;
	uint64_t text_off;	/* the code's start, from the object's bias */
	uint64_t text_size;
	int64_t placed;		/* the table's start, from the code's, when made */
	uint64_t table_size;
	uint64_t num, eh_fdes, num_fres;
};

static char cache_dir[PATH_MAX];

static bool private_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) && errno != EEXIST)
		return false;
	return !stat(dir, &st) && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & 022);
}

static void cache_init(void)
{
	const char *v = getenv("SFRAME_EH_CACHE"), *dir = getenv("SFRAME_EH_CACHE_DIR");
	const char *base = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char parent[PATH_MAX];
	int n;

	cache_dir[0] = 0;
	if (v && !strcmp(v, "0"))
		return;
	if (dir && *dir) {
		n = snprintf(cache_dir, sizeof(cache_dir), "%s", dir);
	} else if (base && *base == '/') {
		n = snprintf(cache_dir, sizeof(cache_dir), "%s/sframe-eh", base);
	} else if (home && *home == '/') {
		snprintf(parent, sizeof(parent), "%s/.cache", home);
		if (!private_dir(parent))
			return;
		n = snprintf(cache_dir, sizeof(cache_dir), "%s/sframe-eh", parent);
	} else {
		return;
	}
	if (n <= 0 || n >= (int)sizeof(cache_dir) - 64 || !private_dir(cache_dir))
		cache_dir[0] = 0;
}

/* The file of @o, for the caches: false when it has none to name. */
static bool object_file(const struct object *o, struct stat *st)
{
	const char *path = *o->name ? o->name : "/proc/self/exe";

	return *path == '/' && !stat(path, st) && S_ISREG(st->st_mode);
}

static void cache_path(char *path, size_t size, const struct stat *st)
{
	snprintf(path, size, "%s/%llx-%llx-v%d.sframe", cache_dir,
		 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino, version);
}

static void cache_key(struct cache_hdr *h, const struct object *o, const struct stat *st,
		      uint64_t text_start, uint64_t text_end)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, CACHE_MAGIC, sizeof(h->magic));
	h->format = CACHE_FORMAT;
	h->version = version;
	h->dev = st->st_dev;
	h->ino = st->st_ino;
	h->size = st->st_size;
	h->mtime_sec = st->st_mtim.tv_sec;
	h->mtime_nsec = st->st_mtim.tv_nsec;
	h->text_off = text_start - o->bias;
	h->text_size = text_end - text_start;
}

/*
 * Move the table at @sf by @delta bytes from where it was made, relative
 * to its code: each FDE's function start is relative to the FDE.
 */
static bool move_table(uint8_t *sf, size_t size, int64_t delta)
{
	uint32_t num = get_u32(sf + 8), fdes_off = get_u32(sf + 20), i;
	size_t fde_size = sf[2] == SFRAME_VERSION_3 ? SFRAME_FDE_V3_SIZE : SFRAME_FDE_SIZE;
	uint8_t *fde = sf + SFRAME_HDR_SIZE + fdes_off;

	if (SFRAME_HDR_SIZE + fdes_off + (uint64_t)num * fde_size > size)
		return false;
	for (i = 0; i < num; i++, fde += fde_size) {
		int64_t start;
		int32_t start32;

		if (fde_size == SFRAME_FDE_V3_SIZE) {
			memcpy(&start, fde, 8);
			start -= delta;
			memcpy(fde, &start, 8);
		} else {
			memcpy(&start32, fde, 4);
			start = (int64_t)start32 - delta;
			if (start < INT32_MIN || start > INT32_MAX)
				return false;
			start32 = start;
			memcpy(fde, &start32, 4);
		}
	}
	return true;
}

/*
 * The table of @o from the cache, mapped in reach of its code: its start,
 * with its size in *@size and its header in *@h; NULL when there is none.
 */
static uint8_t *cache_load(const struct object *o, const struct stat *st,
			   uint64_t text_start, uint64_t text_end, uint64_t lo,
			   uint64_t hi, size_t *size, struct cache_hdr *h)
{
	size_t page = sysconf(_SC_PAGESIZE), len;
	char path[PATH_MAX + 64];
	struct cache_hdr want;
	struct stat fst;
	uint8_t *sf;
	int fd;

	if (!cache_dir[0])
		return NULL;
	cache_path(path, sizeof(path), st);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	cache_key(&want, o, st, text_start, text_end);
	sf = NULL;
	if (pread(fd, h, sizeof(*h), 0) != sizeof(*h) || fstat(fd, &fst) ||
	    memcmp(h, &want, offsetof(struct cache_hdr, placed)) ||
	    h->table_size < SFRAME_HDR_SIZE ||
	    (uint64_t)fst.st_size < page + h->table_size)
		goto out;
	len = (h->table_size + page - 1) & ~(page - 1);
	sf = map_near(lo & ~(page - 1), (hi + page - 1) & ~(page - 1), len,
		      text_start, text_end, !*o->name, fd);
	if (!sf)
		goto out;
	if (!move_table(sf, h->table_size,
			(int64_t)((uint64_t)sf - text_start) - h->placed)) {
		munmap(sf, len);
		sf = NULL;
		goto out;
	}
	mprotect(sf, len, PROT_READ);
	*size = h->table_size;
out:
	close(fd);
	return sf;
}

/* Keep the table @sf of @o in the cache, for the next processes. */
static void cache_store(const struct object *o, const struct stat *st,
			uint64_t text_start, uint64_t text_end,
			const uint8_t *sf, size_t size, const struct table *t)
{
	size_t page = sysconf(_SC_PAGESIZE);
	char path[PATH_MAX + 64], tmp[PATH_MAX + 64];
	struct cache_hdr h;
	int fd;

	if (!cache_dir[0])
		return;
	cache_key(&h, o, st, text_start, text_end);
	h.placed = (int64_t)((uint64_t)sf - text_start);
	h.table_size = size;
	h.num = t->num;
	h.eh_fdes = t->eh_fdes;
	h.num_fres = t->num_fres;
	snprintf(tmp, sizeof(tmp), "%s/.new-XXXXXX", cache_dir);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return;
	/* A whole file or none: written aside, then renamed into place. */
	cache_path(path, sizeof(path), st);
	if (pwrite(fd, &h, sizeof(h), 0) != sizeof(h) ||
	    pwrite(fd, sf, size, page) != (ssize_t)size || close(fd) ||
	    rename(tmp, path))
		unlink(tmp);
}

/*
 * The table of @o's code from its .eh_frame, in @t: false when it has
 * none to read.
 */
static bool make_table(const struct object *o, const Elf64_Phdr *eh_frame_hdr,
		       uint64_t text_start, uint64_t text_end, struct func *f,
		       struct table *t)
{
	const uint8_t *hdr, *eh, *end;
	unsigned int i;
	uint64_t v;

	/* .eh_frame_hdr: version 1, then where .eh_frame starts. */
	hdr = (const uint8_t *)(o->bias + eh_frame_hdr->p_vaddr);
	if (eh_frame_hdr->p_memsz < 4 || hdr[0] != 1)
		return false;
	eh = hdr + 4;
	end = hdr + eh_frame_hdr->p_memsz;
	if (!read_ptr(&eh, end, hdr[1], &v))
		return false;
	eh = (const uint8_t *)v;
	/* .eh_frame ends with its zero terminator; bound it by its segment. */
	end = NULL;
	for (i = 0; i < o->phnum; i++) {
		const Elf64_Phdr *ph = &o->phdr[i];
		uint64_t s = o->bias + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && (uint64_t)eh >= s &&
		    (uint64_t)eh < s + ph->p_filesz)
			end = (const uint8_t *)(s + ph->p_filesz);
	}
	if (!end)
		return false;
	convert(t, eh, end, text_start, text_end, f);
	return true;
}

/*
 * Make and register the table of @o, unless it has one of its own: from
 * the cache on disk, or from a table made for another mapping of its
 * file, or from its .eh_frame. *@reg says what was registered (nothing:
 * sf NULL). 0, or an errno.
 */
static int register_object(const struct object *o, struct func *f,
			   struct registered *reg)
{
	const Elf64_Phdr *eh_frame_hdr = NULL;
	uint64_t text_start = 0, text_end = 0, lo = UINT64_MAX, hi = 0;
	size_t size = 0, page = sysconf(_SC_PAGESIZE);
	struct table t = { 0 }, *tp = NULL;
	const char *from = "";
	struct prctl_sframe arg;
	struct cache_hdr h;
	struct stat st;
	bool have_file;
	uint8_t *sf;
	unsigned int i;
	int err;

	memset(reg, 0, sizeof(*reg));
	for (i = 0; i < o->phnum; i++) {
		const Elf64_Phdr *ph = &o->phdr[i];

		if (ph->p_type == PT_GNU_SFRAME)
			return -EEXIST;	/* it has its own */
		if (ph->p_type == PT_GNU_EH_FRAME)
			eh_frame_hdr = ph;
		if (ph->p_type != PT_LOAD)
			continue;
		if (o->bias + ph->p_vaddr < lo)
			lo = o->bias + ph->p_vaddr;
		if (o->bias + ph->p_vaddr + ph->p_memsz > hi)
			hi = o->bias + ph->p_vaddr + ph->p_memsz;
		if ((ph->p_flags & PF_X) && !text_start) {
			text_start = o->bias + ph->p_vaddr;
			text_end = text_start + ph->p_memsz;
		}
	}
	if (!eh_frame_hdr || !text_start)
		return -ENODATA;

	have_file = object_file(o, &st);
	sf = have_file ? cache_load(o, &st, text_start, text_end, lo, hi, &size, &h) : NULL;
	if (sf) {
		from = " (cached)";
		t.num = h.num;
		t.eh_fdes = h.eh_fdes;
		t.num_fres = h.num_fres;
		tp = &t;
	} else {
		tp = have_file ? made_for(o, &st) : NULL;
		if (tp) {
			from = " (made before)";
		} else {
			tp = &t;
			if (!make_table(o, eh_frame_hdr, text_start, text_end, f, tp))
				return -ENODATA;
		}
		sf = write_table(tp, lo, hi, text_start, text_end, !*o->name, &size);
	}
	err = sf ? 0 : -errno;
	if (sf) {
		arg = (struct prctl_sframe) {
			.sframe_start = (uintptr_t)sf,
			.sframe_size = size,
			.text_start = text_start,
			.text_size = text_end - text_start,
		};
		if (prctl(PR_SFRAME, PR_SFRAME_ADD, &arg, sizeof(arg), 0)) {
			err = -errno;
			munmap(sf, (size + page - 1) & ~(page - 1));
		} else {
			*reg = (struct registered) {
				.text_start = text_start,
				.sf = sf,
				.len = (size + page - 1) & ~(page - 1),
			};
			if (have_file && !*from)
				cache_store(o, &st, text_start, text_end, sf, size, tp);
		}
	}
	if (verbose)
		fprintf(stderr,
			"sframe-eh: %s: %zu functions, %zu FDEs, %zu rows, %zu B, v%d: %s%s\n",
			*o->name ? o->name : "(program)", tp->num, tp->eh_fdes,
			tp->num_fres, sf ? size : 0, version,
			err ? strerror(-err) : "registered", from);
	/* A table made here: kept for another mapping of its file, or freed. */
	if (tp == &t && !t.fdes)
		return err;
	if (tp == &t) {
		if (keep_made && nr_made < ARRAY_SIZE(made) && have_file && *o->name) {
			made[nr_made++] = (struct made) {
				.dev = st.st_dev, .ino = st.st_ino, .bias = o->bias, .t = t,
			};
		} else {
			free_table(&t);
		}
	}
	return err;
}

/*
 * Objects already seen by the dl_iterate_phdr() walks: their code's
 * start, as long as no object was unloaded (the loader's count of
 * removals) since.
 */
static uint64_t seen[512];
static unsigned int nr_seen;
static unsigned long long subs;

static bool seen_before(struct dl_phdr_info *info, size_t info_size)
{
	uint64_t text_start = 0;
	unsigned int i;

	for (i = 0; i < info->dlpi_phnum && !text_start; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X))
			text_start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
	/* An object went since: what was seen may be somewhere else now. */
	if (info_size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs) &&
	    info->dlpi_subs != subs) {
		subs = info->dlpi_subs;
		nr_seen = 0;
	}
	for (i = 0; i < nr_seen; i++)
		if (seen[i] == text_start)
			return true;
	if (nr_seen < ARRAY_SIZE(seen))
		seen[nr_seen++] = text_start;
	return false;
}

static void object_of(struct dl_phdr_info *info, struct object *o)
{
	*o = (struct object) {
		.name = info->dlpi_name,
		.bias = info->dlpi_addr,
		.phdr = info->dlpi_phdr,
		.phnum = info->dlpi_phnum,
	};
}

/* After dlopen(): each new object, while the loader holds its lock. */
static int object_cb(struct dl_phdr_info *info, size_t info_size, void *data)
{
	struct registered reg;
	struct object o;

	if (!seen_before(info, info_size)) {
		object_of(info, &o);
		register_object(&o, data, &reg);
	}
	return 0;
}

struct objects {
	struct object o[512];
	uint64_t text[512];
	unsigned int nr;
};

static int collect_cb(struct dl_phdr_info *info, size_t info_size, void *data)
{
	struct objects *list = data;
	unsigned int i;

	if (list->nr == ARRAY_SIZE(list->o) || seen_before(info, info_size))
		return 0;
	object_of(info, &list->o[list->nr]);
	list->text[list->nr] = 0;
	/* ld.so: every stack of the start-up ends in it */
	if (info->dlpi_addr != getauxval(AT_BASE))
		for (i = 0; i < info->dlpi_phnum; i++)
			if (info->dlpi_phdr[i].p_type == PT_LOAD &&
			    (info->dlpi_phdr[i].p_flags & PF_X))
				list->text[list->nr] = info->dlpi_phdr[i].p_memsz;
	list->nr++;
	return 0;
}

/*
 * The objects loaded before the constructor: ld.so, then the smallest
 * code first, this library among the first, so that the stacks of the
 * work on the large ones (libc, the program) are whole while it is done.
 */
static void register_loaded(void)
{
	struct objects *list = calloc(1, sizeof(*list));
	struct func *f = malloc(sizeof(*f));
	struct registered reg;
	unsigned int i, j, best;

	if (!list || !f)
		goto out;
	pthread_mutex_lock(&lock);
	dl_iterate_phdr(collect_cb, list);
	for (i = 0; i < list->nr; i++) {
		for (best = i, j = i + 1; j < list->nr; j++)
			if (list->text[j] < list->text[best])
				best = j;
		register_object(&list->o[best], f, &reg);
		list->o[best] = list->o[i];
		list->text[best] = list->text[i];
	}
	pthread_mutex_unlock(&lock);
out:
	free(list);
	free(f);
}

static void register_new(void)
{
	struct func *f = malloc(sizeof(*f));

	if (!f)
		return;
	pthread_mutex_lock(&lock);
	dl_iterate_phdr(object_cb, f);
	pthread_mutex_unlock(&lock);
	free(f);
}

/* Whether this copy of the library was loaded in the program's namespace. */
static bool in_base_namespace(void)
{
	struct link_map *self;
	Dl_info info;
	Lmid_t lmid;

	if (!dladdr1((void *)in_base_namespace, &info, (void **)&self, RTLD_DL_LINKMAP) ||
	    dlinfo(self, RTLD_DI_LMID, &lmid))
		return true;
	return lmid == LM_ID_BASE;
}

__attribute__((constructor)) static void sframe_eh_init(void)
{
	const char *v = getenv("SFRAME_EH_VERBOSE");

	verbose = v && *v && strcmp(v, "0");
	v = getenv("SFRAME_EH_VERSION");
	if (v && !strcmp(v, "2"))
		version = SFRAME_VERSION_2;
	cache_init();
	/*
	 * Loaded by ld.so as an auditor (LD_AUDIT), in a namespace of its
	 * own: its objects first (ld.so, shared with the program, among
	 * them), then la_objopen() gives the program's as they are loaded.
	 */
	if (!in_base_namespace())
		keep_made = true;
	register_loaded();
}

/* Preloaded: the objects dlopen() brings get their tables when it returns. */
void *dlopen(const char *file, int mode)
{
	static void *(*real_dlopen)(const char *, int);
	void *handle;

	if (!real_dlopen)
		real_dlopen = dlsym(RTLD_NEXT, "dlopen");
	if (!real_dlopen)
		return NULL;
	handle = real_dlopen(file, mode);
	if (handle)
		register_new();
	return handle;
}

/*
 * The rtld-audit interface (LD_AUDIT=libsframe-eh.so, rtld-audit(7)):
 * ld.so tells the auditor of every object it maps, in every namespace
 * and however it was asked for (the program's dependencies, dlopen(),
 * dlmopen(), libc's own loading of NSS or iconv modules), before any of
 * its code runs, and of its unloading.
 */
unsigned int la_version(unsigned int v)
{
	return v < LAV_CURRENT ? v : LAV_CURRENT;
}

/* Until the program's first objects are all in: they stay until exit. */
static bool loading_initial = true;

void la_activity(uintptr_t *cookie, unsigned int flag)
{
	if (flag == LA_ACT_CONSISTENT)
		loading_initial = false;
	/* The program's first objects are in: no more copies of ours to come. */
	if (flag == LA_ACT_CONSISTENT && keep_made) {
		pthread_mutex_lock(&lock);
		forget_made();
		pthread_mutex_unlock(&lock);
	}
}

/*
 * The program headers of the object of @map, in memory (the program,
 * the vDSO) or read from its file into *@owned. false when not found.
 */
static bool audited_object(struct link_map *map, struct object *o, Elf64_Phdr **owned)
{
	const Elf64_Ehdr *vdso = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
	Elf64_Ehdr ehdr;
	size_t size;
	unsigned int i;
	int fd;

	*owned = NULL;
	*o = (struct object) { .name = map->l_name, .bias = map->l_addr };
	if (!*map->l_name) {
		o->phdr = (const Elf64_Phdr *)getauxval(AT_PHDR);
		o->phnum = getauxval(AT_PHNUM);
		return o->phdr;
	}
	if (vdso) {
		const Elf64_Phdr *ph = (const void *)vdso + vdso->e_phoff;

		for (i = 0; i < vdso->e_phnum; i++)
			if (ph[i].p_type == PT_DYNAMIC &&
			    (uintptr_t)map->l_ld == map->l_addr + ph[i].p_vaddr &&
			    map->l_addr == (uintptr_t)vdso) {
				o->phdr = ph;
				o->phnum = vdso->e_phnum;
				return true;
			}
	}
	fd = open(map->l_name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (pread(fd, &ehdr, sizeof(ehdr), 0) != sizeof(ehdr) ||
	    memcmp(ehdr.e_ident, ELFMAG, SELFMAG) || ehdr.e_ident[EI_CLASS] != ELFCLASS64 ||
	    ehdr.e_phentsize != sizeof(Elf64_Phdr) || !ehdr.e_phnum)
		goto fail;
	size = ehdr.e_phnum * sizeof(Elf64_Phdr);
	*owned = malloc(size);
	if (!*owned || pread(fd, *owned, size, ehdr.e_phoff) != (ssize_t)size)
		goto fail;
	close(fd);
	o->phdr = *owned;
	o->phnum = ehdr.e_phnum;
	return true;
fail:
	free(*owned);
	*owned = NULL;
	close(fd);
	return false;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
	struct registered *reg;
	Elf64_Phdr *owned;
	struct object o;
	struct func *f;

	*cookie = 0;
	/* ld.so is shared by all namespaces: the constructor registered it. */
	if (map->l_addr == getauxval(AT_BASE))
		return 0;
	reg = calloc(1, sizeof(*reg));
	f = malloc(sizeof(*f));
	if (reg && f && audited_object(map, &o, &owned)) {
		pthread_mutex_lock(&lock);
		register_object(&o, f, reg);
		pthread_mutex_unlock(&lock);
		free(owned);
	}
	free(f);
	if (reg && reg->sf) {
		reg->initial = loading_initial;
		*cookie = (uintptr_t)reg;
	} else {
		free(reg);
	}
	return 0;	/* no symbol bindings to audit */
}

/*
 * An object goes: its table first, then the memory it was read from.
 * The program's first objects only go at exit, where ld.so closes them
 * one by one while exit()'s own frames, in libc, still need theirs.
 */
unsigned int la_objclose(uintptr_t *cookie)
{
	struct registered *reg = (struct registered *)*cookie;

	if (reg && !reg->initial) {
		prctl(PR_SFRAME, PR_SFRAME_REMOVE, reg->text_start, 0, 0);
		munmap(reg->sf, reg->len);
		free(reg);
		*cookie = 0;
	}
	return 0;
}
