#!/bin/bash
# perf reads damaged files with an error, never a crash
# SPDX-License-Identifier: GPL-2.0
#
# The inputs that crashed perf under the fuzzer (make fuzz-perf), cut down
# to the one record that did it: counts larger than their record, an attr
# larger than its record, a byte-swapped record of an unknown type, a
# feature string without its NUL, an event description count that wraps
# or an attr of one byte in it, trace data cut short or with a header
# event of 2^62 bytes (perf skipped it a buffer at a time, for ages),
# a data section past the end of the file (also one with deferred callchains)
# or ending inside an event header (perf mapped it again, for ever).
# Each goes through perf script and perf report -D, which must refuse it
# (a non-zero exit and a short message: its reason, in at most four lines
# with perf's own framing) or read it (exit 0), as each case says,
# and never die of a signal. Built with ASAN (make check runs
# it so), perf also reports any read past a buffer.

set -eu

err=0
tmpdir=$(mktemp -d /tmp/perf-test-damaged.XXXXXX)
trap 'rm -rf "$tmpdir"' EXIT

if ! command -v python3 >/dev/null; then
	echo "FAIL: no python3 to write the damaged files"
	exit 1
fi

python3 - "$tmpdir" <<'EOF'
import struct
import sys

out = sys.argv[1]
MAGIC = 0x32454c4946524550
ATTR_SIZE = 136


def attr(sample_type=0x7, size=ATTR_SIZE):
    # cpu-clock, period 1, IP | TID | TIME
    head = struct.pack("<IIQQQQ", 1, size, 0, 1, sample_type, 0)
    return head + bytes(ATTR_SIZE - len(head))


def record(rtype, body):
    return struct.pack("<IHH", rtype, 0, 8 + len(body)) + body


def pipe(name, *records):
    with open(f"{out}/{name}", "wb") as f:
        f.write(struct.pack("<QQ", MAGIC, 16) + b"".join(records))


header_attr = record(64, attr() + struct.pack("<Q", 1))
# PERF_RECORD_THREAD_MAP: one entry, a count of 2^40.
pipe("thread-map-count.data", header_attr,
     record(73, struct.pack("<Q", 1 << 40) + struct.pack("<Q", 1) + bytes(16)))
# PERF_RECORD_CPU_MAP: a list of 65535 CPUs holding one.
pipe("cpu-map-count.data", header_attr,
     record(74, struct.pack("<HHH", 0, 0xffff, 0) + bytes(2)))
# PERF_RECORD_HEADER_ATTR: an attr of 1.5 GiB.
pipe("attr-size.data", record(64, attr(size=0x60000000) + struct.pack("<Q", 1)))
# PERF_RECORD_HEADER_FEATURE, HEADER_HOSTNAME: a string without its NUL.
pipe("feature-string.data", header_attr,
     record(80, struct.pack("<QI", 3, 8) + b"ABCDEFGH" + bytes(4)))
# PERF_RECORD_HEADER_FEATURE, HEADER_EVENT_DESC: 2^32 - 1 events (one more
# is 0).
pipe("event-desc-count.data", header_attr,
     record(80, struct.pack("<QII", 12, 0xffffffff, ATTR_SIZE) + attr() + bytes(8)))

# Big-endian: a record of type 0xffffff00 (swapped before it is checked).
with open(f"{out}/swapped-type.data", "wb") as f:
    f.write(struct.pack(">QQ", MAGIC, 16) + struct.pack(">IHH", 0xffffff00, 0, 8))

# Big-endian: a sample of 65535 bytes, not a whole number of u64s.
with open(f"{out}/swapped-odd-size.data", "wb") as f:
    f.write(struct.pack(">QQ", MAGIC, 16) + struct.pack(">IHH", 9, 0, 0xffff) +
            bytes(0xffff - 8))
# Big-endian: a context switch record of 0x3006 bytes, whose swap went by
# words past its end (a sample_id of a file with sample_id_all).
with open(f"{out}/swapped-odd-switch.data", "wb") as f:
    f.write(struct.pack(">QQ", MAGIC, 16) + struct.pack(">IHH", 14, 0, 0x3006) +
            bytes(0x3006 - 8))

# A file with a feature this perf does not know (bit 41), for perf inject,
# which writes the input's features out again.
sample = record(9, struct.pack("<QIIQ", 0x400000, 1, 1, 1000))
attrs_at = 104
data_at = attrs_at + ATTR_SIZE + 16
features = bytearray(32)
features[41 // 8] |= 1 << (41 % 8)
header = struct.pack("<QQQ", MAGIC, 104, ATTR_SIZE + 16)
header += struct.pack("<QQQQQQ", attrs_at, ATTR_SIZE + 16, data_at, len(sample), 0, 0)
feat_table_at = data_at + len(sample)
with open(f"{out}/unknown-feature.data", "wb") as f:
    f.write(header + bytes(features) + attr() + struct.pack("<QQ", 0, 0) + sample +
            struct.pack("<QQ", feat_table_at + 16, 8) + bytes(8))

# Big-endian: a file whose HEADER_EVENT_DESC has an attr of 1 byte (swapped
# as a whole attr); HEADER_HOSTNAME tells perf how to swap the feature bits.
attrs_at = 104
data_at = attrs_at + ATTR_SIZE + 16
be_attr = struct.pack(">IIQQQ", 1, ATTR_SIZE, 0, 1, 0x7) + bytes(ATTR_SIZE - 32)
sample = struct.pack(">IHHQIIQ", 9, 0, 32, 0x400000, 1, 1, 1000)
feat_table_at = data_at + len(sample)
hostname = struct.pack(">I", 8) + b"testhos\0"
event_desc = struct.pack(">III", 1, 1, 0) + struct.pack(">II", 0, 4) + b"ev\0\0"
header = struct.pack(">QQQ", MAGIC, 104, ATTR_SIZE + 16)
header += struct.pack(">QQQQQQ", attrs_at, ATTR_SIZE + 16, data_at, len(sample), 0, 0)
header += struct.pack(">QQQQ", 1 << 3 | 1 << 12, 0, 0, 0)
sections_at = feat_table_at + 32
with open(f"{out}/swapped-event-desc-size.data", "wb") as f:
    f.write(header + be_attr + bytes(16) + sample +
            struct.pack(">QQQQ", sections_at, len(hostname),
                        sections_at + len(hostname), len(event_desc)) +
            hostname + event_desc)

# A tracepoint event's file whose tracing data ends after the page size:
# perf freed the half-read trace data and then looked its events up in it.
attrs_at = 104
data_at = attrs_at + ATTR_SIZE + 16
tp_attr = struct.pack("<IIQQQQ", 2, ATTR_SIZE, 1, 1, 0x7, 0)
tp_attr += bytes(ATTR_SIZE - len(tp_attr))
sample = record(9, struct.pack("<QIIQ", 0x400000, 1, 1, 1000))
tracing = b"\x17\x08\x44tracing0.6\x00" + b"\x00\x08" + struct.pack("<I", 4096)
feat_table_at = data_at + len(sample)
header = struct.pack("<QQQ", MAGIC, 104, ATTR_SIZE + 16)
header += struct.pack("<QQQQQQ", attrs_at, ATTR_SIZE + 16, data_at, len(sample), 0, 0)
header += struct.pack("<QQQQ", 1 << 1, 0, 0, 0)
with open(f"{out}/tracing-data-cut.data", "wb") as f:
    f.write(header + tp_attr + bytes(16) + sample +
            struct.pack("<QQ", feat_table_at + 16, len(tracing)) + tracing)

# The same, its header page there, then a header event of 2^62 bytes.
tracing = (b"\x17\x08\x44tracing0.6\x00" + b"\x00\x08" + struct.pack("<I", 4096) +
           b"header_page\x00" + struct.pack("<Q", 1) + b"x" +
           b"header_event\x00" + struct.pack("<Q", 1 << 62))
with open(f"{out}/tracing-header-event-size.data", "wb") as f:
    f.write(header + tp_attr + bytes(16) + sample +
            struct.pack("<QQ", feat_table_at + 16, len(tracing)) + tracing)

# A file whose header says its data goes on 1 MiB past the file's end.
attrs_at = 104
data_at = attrs_at + ATTR_SIZE + 16
sample = record(9, struct.pack("<QIIQ", 0x400000, 1, 1, 1000))
header = struct.pack("<QQQ", MAGIC, 104, ATTR_SIZE + 16)
header += struct.pack("<QQQQQQ", attrs_at, ATTR_SIZE + 16, data_at,
                      len(sample) + (1 << 20), 0, 0)
header += bytes(32)             # no features
with open(f"{out}/data-past-eof.data", "wb") as f:
    f.write(header + attr() + struct.pack("<QQ", 0, 0) + sample)

# The same with deferred callchains, whose records perf indexes first: it
# mapped the data section past the file's end and read there (SIGBUS). The
# file ends on a page boundary (4096 bytes), after FINISHED_ROUND records.
deferred = 0x7 | 0x20 | 1 << 25         # IP | TID | TIME | CALLCHAIN | DEFERRED
sample = record(9, struct.pack("<QIIQQQQ", 0x400000, 1, 1, 1000, 1,
                               0xffffffff81000000, 0))
rounds = record(68, b"") * ((4096 - data_at - len(sample)) // 8)
header = struct.pack("<QQQ", MAGIC, 104, ATTR_SIZE + 16)
header += struct.pack("<QQQQQQ", attrs_at, ATTR_SIZE + 16, data_at,
                      len(sample) + len(rounds) + (1 << 20), 0, 0)
header += bytes(32)
with open(f"{out}/deferred-past-eof.data", "wb") as f:
    deferred_attr = bytearray(attr(sample_type=deferred))
    deferred_attr[40:48] = struct.pack("<Q", 1 << 18)     # sample_id_all
    f.write(header + bytes(deferred_attr) + struct.pack("<QQ", 0, 0) +
            sample + rounds)

# A data section that ends 7 bytes into an event header (perf mapped the
# data again and again to find the rest: a hang), and one that ends 20
# bytes into the next event, its header whole and its body cut (refused).
sample = record(9, struct.pack("<QIIQ", 0x400000, 1, 1, 1000))
for name, tail in (("header", bytes(7)), ("body", sample[:20])):
    header = struct.pack("<QQQ", MAGIC, 104, ATTR_SIZE + 16)
    header += struct.pack("<QQQQQQ", attrs_at, ATTR_SIZE + 16, data_at,
                          len(sample) + len(tail), 0, 0)
    header += bytes(32)
    with open(f"{out}/data-cut-in-{name}.data", "wb") as f:
        f.write(header + attr() + struct.pack("<QQ", 0, 0) + sample + tail)

# Trace data whose sched:sched_switch format (as Linux 6.12 writes it) is
# damaged the ways that crashed libtraceevent (1.7.1 to 1.8.4) when perf
# handed it the text: the fuzzer's own find (a __print_flags() of a field
# the event does not have, one byte of a recording's format changed), a
# field's '[' not closed before a byte that is not text, a type that
# begins with __attribute__, an operator at the end, a constant divided by
# 0, an unknown operator after an array's ']', an index of the last
# operand of "?:" or of an index, and nesting deep enough to exhaust the
# stack. The undamaged format is read too.
sched_switch = (
    "name: sched_switch\nID: 370\nformat:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
    "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
    "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
    "\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
    "\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n"
    "print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> "
    "next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, "
    "REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | "
    "0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? "
    "__print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | "
    "0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), "
    "\"|\", { 0x00000001, \"S\" }, { 0x00000002, \"D\" }, { 0x00000004, \"T\" }, "
    "{ 0x00000008, \"t\" }, { 0x00000010, \"X\" }, { 0x00000020, \"Z\" }, "
    "{ 0x00000040, \"P\" }, { 0x00000080, \"I\" }) : \"R\", REC->prev_state & "
    "(((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | "
    "0x00000020 | 0x00000040) + 1) << 1) ? \"+\" : \"\", REC->next_comm, "
    "REC->next_pid, REC->next_prio\n").encode()
damaged_formats = {
    "sched-switch": sched_switch,
    "flags-of-no-field": sched_switch.replace(b"__print_flags(REC->prev_state",
                                              b"__print_flags(REC->prev_stat`"),
    "field-bracket": sched_switch.replace(b"prev_comm[16]", b"prev_comm[16\xb1"),
    "field-attribute": sched_switch.replace(b"field:int common_pid",
                                            b"field:__attribute__(int common_pid"),
    "trailing-operator": sched_switch[:-1] + b" <<\n",
    "constant-by-zero": sched_switch[:-1] + b", 1 / 0\n",
    "array-unknown-op": sched_switch[:-1] + b", REC->prev_comm[0] $ 1\n",
    "conditional-index": sched_switch[:-1] + b", REC->prev_pid ? \"a\" : \"b\"[0]\n",
    "index-of-index": sched_switch[:-1] + b", REC->prev_comm[0][1]\n",
    "deep-nesting": sched_switch[:-1] + b", " + b"(" * 100000 + b"1" + b")" * 100000 + b"\n",
}
RAW = 0x400
tp_attr = struct.pack("<IIQQQQ", 2, ATTR_SIZE, 370, 1, 0x7 | RAW, 0)
tp_attr += bytes(ATTR_SIZE - len(tp_attr))
raw = (struct.pack("<HBBi", 370, 0, 0, 1) + b"task".ljust(16, b"\0") +
       struct.pack("<iiq", 1, 120, 1) + b"next".ljust(16, b"\0") + struct.pack("<ii", 2, 120))
sample = record(9, struct.pack("<QIIQI", 0x400000, 1, 1, 1000, len(raw) + 4) + raw +
                bytes(4))
attrs_at = 104
data_at = attrs_at + ATTR_SIZE + 16
feat_table_at = data_at + len(sample)
header = struct.pack("<QQQ", MAGIC, 104, ATTR_SIZE + 16)
header += struct.pack("<QQQQQQ", attrs_at, ATTR_SIZE + 16, data_at, len(sample), 0, 0)
header += struct.pack("<QQQQ", 1 << 1, 0, 0, 0)
header_page = (b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
               b"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
               b"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
               b"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n")
for name, text in damaged_formats.items():
    tracing = (b"\x17\x08\x44tracing0.6\x00" + b"\x00\x08" + struct.pack("<I", 4096) +
               b"header_page\x00" + struct.pack("<Q", len(header_page)) + header_page +
               b"header_event\x00" + struct.pack("<Q", 0) +
               struct.pack("<I", 0) +                       # no ftrace formats
               struct.pack("<I", 1) + b"sched\x00" + struct.pack("<I", 1) +
               struct.pack("<Q", len(text)) + text +
               struct.pack("<I", 0) + struct.pack("<I", 0) + struct.pack("<Q", 0))
    with open(f"{out}/format-{name}.data", "wb") as f:
        f.write(header + tp_attr + bytes(16) + sample +
                struct.pack("<QQ", feat_table_at + 16, len(tracing)) + tracing)

# A pipe whose COMM record is 8 bytes, too short for the sample_id its attr
# says every record ends with: perf read the timestamp before the record.
sid_attr = bytearray(attr())
sid_attr[40:48] = struct.pack("<Q", 1 << 18)     # sample_id_all
pipe("short-sample-id.data", record(64, bytes(sid_attr) + struct.pack("<Q", 1)),
     struct.pack("<IHH", 3, 0, 8))

# A file whose HEADER_BUILD_ID entry says it is 65535 bytes: perf read its
# name into a buffer of PATH_MAX bytes on the stack.
attrs_at = 104
data_at = attrs_at + ATTR_SIZE + 16
sample = record(9, struct.pack("<QIIQ", 0x400000, 1, 1, 1000))
feat_table_at = data_at + len(sample)
header = struct.pack("<QQQ", MAGIC, 104, ATTR_SIZE + 16)
header += struct.pack("<QQQQQQ", attrs_at, ATTR_SIZE + 16, data_at, len(sample), 0, 0)
header += struct.pack("<QQQQ", 1 << 2, 0, 0, 0)
entry = struct.pack("<IHHi", 67, 0, 0xffff, -1) + bytes(24) + b"x" * (0xffff - 36)
with open(f"{out}/build-id-size.data", "wb") as f:
    f.write(header + attr() + struct.pack("<QQ", 0, 0) + sample +
            struct.pack("<QQ", feat_table_at + 16, len(entry)) + entry)

# PERF_RECORD_STAT_CONFIG of 2^40 terms in its 16 bytes (perf read them past
# the mapped file), and a PERF_RECORD_STAT_ROUND before the thread and CPU
# maps that give perf script its counts (it processed counts of NULL).
pipe("stat-config-count.data", header_attr, record(75, struct.pack("<Q", 1 << 40)))
pipe("stat-round-no-maps.data", header_attr, record(77, struct.pack("<QQ", 0, 1000)))
EOF

# check FILE EXPECT: perf script and perf report -D on FILE (a pipe stream
# on stdin when its header is 16 bytes); EXPECT "refused" or "read", or
# "either" where the two commands differ (no crash, no silent refusal).
check() {
	local file=$tmpdir/$1 expect=$2 status cmd first

	for cmd in script "report -D"; do
		status=0
		if [ "$(od -An -tu8 -j8 -N8 "$file" | tr -d ' ')" = 16 ] ||
		   [ "$(od -An -tu8 --endian=big -j8 -N8 "$file" | tr -d ' ')" = 16 ]; then
			# shellcheck disable=SC2086
			perf $cmd -i - <"$file" >/dev/null 2>"$tmpdir/err" || status=$?
		else
			# shellcheck disable=SC2086
			perf $cmd -i "$file" >/dev/null 2>"$tmpdir/err" || status=$?
		fi
		# 132 to 139: SIGILL to SIGSEGV; perf's own exit codes are small
		# or a negative errno (234 for -EINVAL).
		if { [ "$status" -ge 132 ] && [ "$status" -le 139 ]; } ||
		   grep -qE 'AddressSanitizer|runtime error' "$tmpdir/err"; then
			echo "FAIL: perf $cmd on $1: exit $status"
			tail -n 20 "$tmpdir/err"
			err=1
		elif [ "$status" != 0 ] && ! grep -q '[^[:space:]]' "$tmpdir/err"; then
			echo "FAIL: perf $cmd refused $1 without a word"
			err=1
		elif [ "$expect" = read ] && [ "$status" != 0 ]; then
			echo "FAIL: perf $cmd could not read $1: exit $status"
			tail -n 5 "$tmpdir/err"
			err=1
		elif [ "$expect" = refused ] && [ "$status" = 0 ]; then
			echo "FAIL: perf $cmd read $1, which it must refuse with an error"
			err=1
		elif [ "$expect" = refused ] &&
		     [ "$(grep -c '[^[:space:]]' "$tmpdir/err")" -gt 4 ]; then
			# the reason, and perf's own framing of a failed event
			echo "FAIL: perf $cmd refused $1 with more than a short message:"
			head -n 8 "$tmpdir/err"
			err=1
		else
			first=$(head -n 1 "$tmpdir/err" | sed 's/^/, /')
			echo "ok: perf $cmd on $1: exit $status$first"
		fi
	done
}

check thread-map-count.data refused
check short-sample-id.data refused
check stat-config-count.data refused
check stat-round-no-maps.data either
check build-id-size.data read
check cpu-map-count.data refused
check attr-size.data refused
check feature-string.data read
check event-desc-count.data read
check swapped-event-desc-size.data read
check swapped-type.data refused
check data-past-eof.data read
check deferred-past-eof.data read
check swapped-odd-size.data refused
check swapped-odd-switch.data refused
check unknown-feature.data read
check tracing-data-cut.data refused
for format in sched-switch flags-of-no-field field-bracket field-attribute \
	      trailing-operator constant-by-zero array-unknown-op conditional-index \
	      index-of-index deep-nesting; do
	case $format in
	field-*) check "format-$format.data" refused ;;
	*) check "format-$format.data" read ;;
	esac
	# a damaged print format is named, a whole one is not
	damaged=0
	perf script -i "$tmpdir/format-$format.data" 2>&1 >/dev/null |
		grep -q "^Damaged trace data (HEADER_TRACING_DATA): the .*sched:sched_switch" ||
		damaged=$?
	if [ "$format" = sched-switch ] && [ "$damaged" = 0 ]; then
		echo "FAIL: the undamaged sched_switch format was called damaged"
		err=1
	elif [ "$format" != sched-switch ] && [ "$damaged" != 0 ]; then
		echo "FAIL: no message naming the damaged format in format-$format.data"
		err=1
	fi
done
if ! perf script -i "$tmpdir/format-sched-switch.data" 2>/dev/null |
	grep -q "prev_comm=task prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=next"; then
	echo "FAIL: the undamaged sched_switch format does not print its sample"
	perf script -i "$tmpdir/format-sched-switch.data"
	err=1
fi
# no_hang FILE CMD...: perf CMD on FILE ends within a minute (both hung).
no_hang() {
	local file=$tmpdir/$1 status=0

	shift
	# shellcheck disable=SC2068 # the command's words
	timeout 60 perf $@ -i "$file" >/dev/null 2>"$tmpdir/err" || status=$?
	if [ "$status" = 124 ]; then
		echo "FAIL: perf $* hangs on ${file##*/}"
		err=1
	fi
}

no_hang tracing-header-event-size.data script
check tracing-header-event-size.data refused
no_hang data-cut-in-header.data report -D
check data-cut-in-header.data read
check data-cut-in-body.data read
# Cut in a header or in a body: the sample before it, and one warning.
for cut in header body; do
	perf script -F ip -i "$tmpdir/data-cut-in-$cut.data" >"$tmpdir/out" 2>"$tmpdir/err" || true
	if [ "$(grep -c . "$tmpdir/out")" != 1 ] ||
	   [ "$(grep -c "the data ends inside an event" "$tmpdir/err")" != 1 ]; then
		echo "FAIL: data cut in an event $cut: not its sample and one warning"
		cat "$tmpdir/out" "$tmpdir/err"
		err=1
	else
		echo "ok: data cut in an event $cut: its sample and one warning"
	fi
done
status=0
perf inject -i "$tmpdir/unknown-feature.data" -o "$tmpdir/injected.data" \
	2>"$tmpdir/err" || status=$?
if [ "$status" != 0 ] || grep -qE 'AddressSanitizer|runtime error' "$tmpdir/err"; then
	echo "FAIL: perf inject on unknown-feature.data: exit $status"
	tail -n 20 "$tmpdir/err"
	err=1
else
	echo "ok: perf inject on unknown-feature.data"
fi
if ! perf script -i "$tmpdir/data-past-eof.data" 2>&1 >/dev/null |
	grep -q "past the end of the file"; then
	echo "FAIL: no warning for a data section past the end of the file"
	err=1
fi

# The half-read trace data is freed and forgotten: perf says it is broken
# (it used to look the event up in the freed data, a read ASAN cannot see
# inside libtraceevent).
if ! perf script -i "$tmpdir/tracing-data-cut.data" 2>&1 >/dev/null |
	grep -q "broken or missing trace data"; then
	echo "FAIL: no message for trace data cut short"
	err=1
fi

exit $err
