// SPDX-License-Identifier: GPL-2.0
/*
 * Check an event format of a file's trace data before libtraceevent parses
 * it.
 *
 * libtraceevent trusts the formats it parses, and a damaged or hostile
 * file's trace data crashes it (1.7.1 to 1.8.4 at least): a field whose '['
 * is not closed before the text ends, a field whose type begins with
 * __attribute__, a __print_flags() or __print_symbolic() of a field the
 * event does not have, an operator with nothing after it at the end of the
 * text, an unknown operator or an index where it expects a known one, a
 * constant divided by 0, or nesting deep enough to exhaust the stack. The
 * kernel writes a format as lines of printable ASCII (f_show() in
 * kernel/trace/trace_events.c): the name, the ID, one line per field,
 * and the print format with its arguments, C expressions. These checks
 * accept what the kernel writes and refuse what the parser cannot survive:
 * a damaged name, ID or field refuses the format; a damaged print format
 * keeps the fields, and the event prints them without its text.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/ctype.h>
#include <linux/kernel.h>
#include <traceevent/event-parse.h>

#include "debug.h"
#include "trace-event.h"

/* The parser recurses into each bracket, operator and unary operator. */
#define FORMAT_MAX_NESTING	128
#define FORMAT_MAX_OPERATORS	4096

static bool format_byte_ok(unsigned char c)
{
	return (c >= ' ' && c <= '~') || c == '\t' || c == '\n';
}

static bool ident_char(char c)
{
	return isalnum(c) || c == '_';
}

/*
 * A line of the name, the ID or a field: each '[' closed on it, strings too
 * (a clang-built kernel's __user is __attribute__((btf_type_tag("user")))),
 * and no "field:__attribute__", whose type the parser appends to before it
 * has one.
 */
static bool format_line_ok(const char *p, const char *end)
{
	bool string = false;
	const char *q;
	int open = 0;

	for (; p < end; p++) {
		switch (*p) {
		case '\'':
		case '\\':
			return false;
		case '"':
			string = !string;
			break;
		case '[':
			open += !string;
			break;
		case ']':
			if (!string && open)
				open--;
			break;
		case ':':
			for (q = p + 1; q < end && (*q == ' ' || *q == '\t'); q++)
				;
			if (end - q >= 13 && !memcmp(q, "__attribute__", 13) &&
			    (end - q == 13 || !ident_char(q[13])))
				return false;
			break;
		default:
			break;
		}
	}
	return !string && !open;
}

/* The print format's tokens, as libtraceevent's __read_token() cuts them. */
enum format_token {
	FT_END,		/* the end of the text, or a string that goes to it */
	FT_ITEM,	/* a name or a number */
	FT_STRING,
	FT_DELIM,	/* ( ) , */
	FT_OP,
};

struct format_lexer {
	const char *p, *end;
	enum format_token type;
	const char *tok;
	size_t len;
	int operators;
	struct tep_event *fields;	/* the event's fields, for REC->name */
	const char *why;
	char name[64];
};

/*
 * A string ends at its quote or at a byte that is not printable but for a
 * newline (a tab), unless the byte before is a backslash; two strings with
 * only spaces between are one. NULL when it goes on to the end.
 */
static const char *format_string_end(const char *p, const char *end)
{
	char quote = *p, prev;

	for (;;) {
		prev = *p++;
		if (p == end)
			return NULL;
		if (prev == '\\' || *p == '\n' || (*p != quote && isprint(*p)))
			continue;
		if (*p++ != quote || quote != '"')
			return p;
		/* the next string's opening quote, after spaces */
		while (p < end && isspace(*p))
			p++;
		if (p == end || *p != '"')
			return p;
	}
}

static void format_next(struct format_lexer *lx)
{
	const char *p = lx->p, *q;

	while (p < lx->end && isspace(*p))
		p++;
	lx->tok = p;
	if (p == lx->end) {
		lx->type = FT_END;
		lx->len = 0;
		return;
	}
	q = p + 1;
	if (ident_char(*p)) {
		while (q < lx->end && ident_char(*q))
			q++;
		lx->type = FT_ITEM;
	} else if (*p == '"' || *p == '\'') {
		q = format_string_end(p, lx->end);
		lx->type = q ? FT_STRING : FT_END;
		if (!q)
			q = lx->end;
	} else if (*p == '(' || *p == ')' || *p == ',') {
		lx->type = FT_DELIM;
	} else {
		/* "->", a doubled "-+|&<>", then "=" after "<>!=" or after
		 * one of "-+|&" that is not doubled
		 */
		lx->type = FT_OP;
		lx->operators++;
		if (*p == '-' && q < lx->end && *q == '>') {
			q++;
		} else if (strchr("-+|&<>", *p) && q < lx->end && *q == *p) {
			if (strchr("<>", *q++) && q < lx->end && *q == '=')
				q++;
		} else if (strchr("-+|&<>!=", *p) && q < lx->end && *q == '=') {
			q++;
		}
	}
	lx->len = q - p;
	lx->p = q;
}

static bool token_is(struct format_lexer *lx, enum format_token type, const char *tok)
{
	return lx->type == type && lx->len == strlen(tok) && !memcmp(lx->tok, tok, lx->len);
}

static bool format_fail(struct format_lexer *lx, const char *why)
{
	if (!lx->why)
		lx->why = why;
	return false;
}

static bool format_expr(struct format_lexer *lx, int depth);

static bool format_unary(struct format_lexer *lx)
{
	return lx->type == FT_OP && lx->len == 1 && strchr("-+!~*&", *lx->tok);
}

/* "type" or "type *" then ')': the cast's or sizeof()'s type, consumed. */
static bool format_type(struct format_lexer *lx)
{
	struct format_lexer start = *lx;

	while (lx->type == FT_ITEM)
		format_next(lx);
	while (token_is(lx, FT_OP, "*"))
		format_next(lx);
	if (lx->tok != start.tok && token_is(lx, FT_DELIM, ")"))
		return true;
	*lx = start;
	return false;
}

/*
 * libtraceevent divides when it folds constants and when it prints: a
 * divisor is a number other than 0 (the kernel's: "/ 250", "/ 1000L") or
 * the size of a type ("/ sizeof(u64)").
 */
static bool format_divisor_ok(const struct format_lexer *divisor)
{
	struct format_lexer lx = *divisor;
	char number[32];

	if (lx.type != FT_ITEM)
		return false;
	if (lx.len == 6 && !memcmp(lx.tok, "sizeof", 6)) {
		format_next(&lx);
		if (!token_is(&lx, FT_DELIM, "("))
			return false;
		format_next(&lx);
		return !token_is(&lx, FT_ITEM, "REC") && format_type(&lx);
	}
	if (!isdigit(*lx.tok) || lx.len >= sizeof(number))
		return false;
	memcpy(number, lx.tok, lx.len);
	number[lx.len] = '\0';
	return strtoull(number, NULL, 0) != 0;
}

/* Expressions separated by commas, up to and past CLOSE. */
static bool format_list(struct format_lexer *lx, const char *close, int depth)
{
	if (++depth > FORMAT_MAX_NESTING)
		return format_fail(lx, "nests too deep");
	if (!token_is(lx, FT_DELIM, close) && !token_is(lx, FT_OP, close)) {
		while (format_expr(lx, depth) && token_is(lx, FT_DELIM, ","))
			format_next(lx);
		if (lx->why)
			return false;
	}
	if (!token_is(lx, FT_DELIM, close) && !token_is(lx, FT_OP, close))
		return format_fail(lx, "has an argument that does not end");
	format_next(lx);
	return true;
}

/* REC->name: the event has that field (libtraceevent assumes it). */
static bool format_entry(struct format_lexer *lx)
{
	char name[sizeof(lx->name)];

	if (!token_is(lx, FT_OP, "->"))
		return true;	/* "(REC)->" or an error the parser reports */
	format_next(lx);
	if (lx->type != FT_ITEM)
		return true;
	snprintf(name, sizeof(name), "%.*s", (int)lx->len, lx->tok);
	if (lx->len >= sizeof(name) || !tep_find_any_field(lx->fields, name)) {
		memcpy(lx->name, name, sizeof(name));
		return format_fail(lx, "prints a field it does not have");
	}
	format_next(lx);
	return true;
}

/*
 * A statement expression ("({ int x = ...; x; })", from the kernel's min()
 * and others), up to its '}': libtraceevent refuses it at its '{', so only
 * its end matters, and its REC->names and divisors, checked anyway.
 */
static bool format_block(struct format_lexer *lx, int depth)
{
	char close[FORMAT_MAX_NESTING];
	int open = 0;

	close[open++] = '}';
	while (open) {
		if (depth + open >= FORMAT_MAX_NESTING)
			return format_fail(lx, "nests too deep");
		if (lx->type == FT_END)
			return format_fail(lx, "has an argument that does not end");
		if (lx->len == 1 && strchr("([{", *lx->tok)) {
			close[open++] = *lx->tok == '(' ? ')' : *lx->tok + 2;
		} else if (lx->len == 1 && strchr(")]}", *lx->tok)) {
			if (close[--open] != *lx->tok)
				return format_fail(lx, "has brackets that do not pair up");
		} else if (lx->type == FT_ITEM && lx->len == 3 && !memcmp(lx->tok, "REC", 3)) {
			format_next(lx);
			if (!format_entry(lx))
				return false;
			continue;
		} else if (token_is(lx, FT_OP, "/") || token_is(lx, FT_OP, "%")) {
			format_next(lx);
			if (!format_divisor_ok(lx))
				return format_fail(lx, "divides by what may be 0");
			continue;
		}
		if (lx->operators > FORMAT_MAX_OPERATORS)
			return format_fail(lx, "has too many operators");
		format_next(lx);
	}
	return true;
}

static bool format_primary(struct format_lexer *lx, int depth)
{
	if (++depth > FORMAT_MAX_NESTING)
		return format_fail(lx, "nests too deep");
	if (lx->type == FT_ITEM) {
		bool rec = lx->len == 3 && !memcmp(lx->tok, "REC", 3);

		format_next(lx);
		if (rec)
			return format_entry(lx);
		if (!token_is(lx, FT_DELIM, "("))
			return true;
		format_next(lx);
		if (format_type(lx)) {		/* sizeof(type) */
			format_next(lx);
			return true;
		}
		return format_list(lx, ")", depth);
	}
	if (lx->type == FT_STRING) {
		format_next(lx);
		return true;
	}
	if (token_is(lx, FT_DELIM, "(")) {
		format_next(lx);
		if (token_is(lx, FT_OP, "{")) {		/* a statement expression */
			format_next(lx);
			if (!format_block(lx, depth))
				return false;
			return format_list(lx, ")", depth);
		}
		if (!format_type(lx))
			return format_list(lx, ")", depth);
		format_next(lx);
		/* a cast, or a name in parentheses: "(REC)->" */
		if (lx->type == FT_ITEM || lx->type == FT_STRING ||
		    token_is(lx, FT_DELIM, "(") || format_unary(lx))
			return format_expr(lx, depth);
		return format_entry(lx);
	}
	if (token_is(lx, FT_OP, "{")) {		/* a flag's or a symbol's value and name */
		format_next(lx);
		return format_list(lx, "}", depth);
	}
	return format_fail(lx, "has an operator or a delimiter where a value belongs");
}

/*
 * A value and its [index] ("->" is REC's alone, '.' nobody's). libtraceevent
 * takes '[' for an operator of no priority: after a second '[', or after
 * the last operand of "?:", it takes the right side of an operation that
 * has none.
 */
static bool format_postfix(struct format_lexer *lx, int depth, bool index_ok)
{
	if (!format_primary(lx, depth))
		return false;
	if (!token_is(lx, FT_OP, "["))
		return true;
	if (!index_ok)
		return format_fail(lx, "indexes the last operand of a conditional");
	format_next(lx);
	if (!format_list(lx, "]", depth))
		return false;
	if (token_is(lx, FT_OP, "["))
		return format_fail(lx, "has an index of an index");
	return true;
}

/*
 * The binary operators libtraceevent knows (get_op_prio(), and ':' of
 * "?:"): after an array's ']', it takes another for the right side of one
 * that does not exist.
 */
static bool format_binary(const struct format_lexer *lx)
{
	static const char * const binary[] = {
		"*", "/", "%", "+", "-", "<", ">", "&", "^", "|", "?", ":",
		"<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(binary); i++) {
		if (lx->len == strlen(binary[i]) && !memcmp(lx->tok, binary[i], lx->len))
			return true;
	}
	return false;
}

/* Unary operators, values and binary operators between them. */
static bool format_expr(struct format_lexer *lx, int depth)
{
	bool after_colon = false;

	for (;;) {
		while (format_unary(lx)) {
			if (++depth > FORMAT_MAX_NESTING)
				return format_fail(lx, "nests too deep");
			format_next(lx);
		}
		if (!format_postfix(lx, depth, !after_colon))
			return false;
		if (lx->operators > FORMAT_MAX_OPERATORS)
			return format_fail(lx, "has too many operators");
		if (lx->type != FT_OP || token_is(lx, FT_OP, "]") || token_is(lx, FT_OP, "}"))
			return true;
		if (!format_binary(lx))
			return format_fail(lx, "has an unknown operator");
		after_colon = token_is(lx, FT_OP, ":");
		if (token_is(lx, FT_OP, "/") || token_is(lx, FT_OP, "%")) {
			format_next(lx);
			if (!format_divisor_ok(lx))
				return format_fail(lx, "divides by what may be 0");
		} else {
			format_next(lx);
		}
	}
}

/* After "print fmt:", a string and then its arguments. */
static bool format_print_ok(struct format_lexer *lx)
{
	format_next(lx);
	if (lx->type != FT_STRING)
		return format_fail(lx, "has no format string");
	format_next(lx);
	/* libtraceevent stops at anything else than a comma here */
	if (!token_is(lx, FT_DELIM, ","))
		return true;
	format_next(lx);
	while (format_expr(lx, 0) && token_is(lx, FT_DELIM, ","))
		format_next(lx);
	if (!lx->why && lx->type != FT_END)
		return format_fail(lx, "has an argument that does not end");
	return !lx->why;
}

static int parse_fields(struct tep_handle *pevent, struct tep_event **event,
			const char *buf, size_t print_at, const char *sys)
{
	static const char empty_print[] = "print fmt: \"\"\n";
	char *text = malloc(print_at + sizeof(empty_print));
	int err;

	if (!text)
		return -ENOMEM;
	memcpy(text, buf, print_at);
	memcpy(text + print_at, empty_print, sizeof(empty_print));
	err = tep_parse_format(pevent, event, text, print_at + sizeof(empty_print) - 1, sys);
	free(text);
	return err;
}

/**
 * trace_event__parse_format - parse an event format of a file's trace data
 * @pevent: the handle to add the event to
 * @buf: the format's text, as the kernel wrote it
 * @size: its length
 * @sys: the event's system
 *
 * Returns libtraceevent's answer, or -1 when the format's name, ID or
 * fields are damaged (a message says why). A damaged print format parses
 * the fields alone, with a warning.
 */
int trace_event__parse_format(struct tep_handle *pevent, const char *buf,
			      unsigned long size, const char *sys)
{
	const char *end = buf + size, *line, *eol, *name = "?";
	struct format_lexer lx = { .end = end, };
	struct tep_handle *scratch;
	struct tep_event *event = NULL;
	int name_len = 1, nr = 0;
	unsigned long i;

	if (size > 6 && !memcmp(buf, "name: ", 6)) {
		name = buf + 6;
		name_len = 0;
		while (name + name_len < end && name_len < 64 && isprint(name[name_len]))
			name_len++;
	}
	for (line = buf; line < end; line = eol + 1, nr++) {
		eol = memchr(line, '\n', end - line) ?: end;
		if (eol - line >= 10 && !memcmp(line, "print fmt:", 10))
			break;
		for (i = 0; line + i < eol; i++) {
			if (!format_byte_ok(line[i]))
				break;
		}
		if (line + i < eol || !format_line_ok(line, eol)) {
			pr_err("Damaged trace data (HEADER_TRACING_DATA): the format of %s:%.*s is damaged in line %d\n",
			       sys, name_len, name, nr + 1);
			return -1;
		}
	}
	if (line >= end)	/* no print format: libtraceevent refuses it */
		return tep_parse_event(pevent, buf, size, sys);

	for (i = line - buf; i < size; i++) {
		if (!format_byte_ok(buf[i])) {
			lx.why = "holds a byte that is not text";
			break;
		}
	}
	if (!lx.why) {
		/* The fields as libtraceevent parses them, in a handle of their own. */
		scratch = tep_alloc();
		if (!scratch)
			return -ENOMEM;
		tep_set_long_size(scratch, tep_get_long_size(pevent));
		tep_set_page_size(scratch, tep_get_page_size(pevent));
		if (!parse_fields(scratch, &event, buf, line - buf, sys) && event &&
		    !(event->flags & TEP_EVENT_FL_FAILED)) {
			lx.fields = event;
			lx.p = line + 10;
			format_print_ok(&lx);
		}
		/* Fields it cannot parse stop libtraceevent before the print format. */
		tep_free(scratch);
		if (!lx.why)
			return tep_parse_event(pevent, buf, size, sys);
	}
	pr_warning("Damaged trace data (HEADER_TRACING_DATA): the print format of %s:%.*s %s%s%s: its events print their fields alone\n",
		   sys, name_len, name, lx.why, lx.name[0] ? ": REC->" : "", lx.name);
	return parse_fields(pevent, &event, buf, line - buf, sys);
}
