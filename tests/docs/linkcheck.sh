#!/bin/bash
# linkcheck.sh -- the documentation's links and paths resolve (no network).
#
# Checks README.md and doc/*.md of the source tree:
#   - every relative link [text](target) and [name]: target resolves to an
#     existing file or directory (relative to the document's directory);
#   - every #anchor (same document or target.md#anchor) names a heading of
#     that document, as GitHub makes anchors: the heading's text without
#     markup, lower case, every character that is not a letter, digit, '_',
#     '-' or space dropped, spaces turned into '-'; a repeated heading gets
#     -1, -2, ...;
#   - every path written in backquotes that starts with host/, plugins/,
#     tools/, sql/, tests/, nginx/, packaging/, api/, doc/ or examples/
#     exists: a path with a glob (*, ?) must match something; one with a
#     placeholder (<name>, {x}, NNNN, ...) is checked up to the last
#     directory before it; build products (.la, .so, .o, .lo) and a
#     trailing ':' or ',' are ignored; a span with spaces is a command: its
#     first word is checked when it looks like a path.
# Links to other schemes (http:, https:, mailto:) and text inside fenced code
# blocks are not checked.
#
# Prints one line per broken link or path (FILE:LINE: what) and exits 1 if
# there is one, 0 if none.  `./dev test` runs it ("docs links"); as a `make
# check` test it runs only in a git checkout (exit 77, skipped, elsewhere:
# a package build's copy of the tree has no reason to fail on a doc).
#
# Usage: tests/docs/linkcheck.sh [FILE.md ...]   (default: README.md doc/*.md)
# LINKCHECK_ROOT=DIR checks another tree (the script's own tests).
set -u
top=${LINKCHECK_ROOT:-${srcdir:-$(dirname "$0")/../..}}
cd "$top" || exit 2
if [[ -n ${srcdir:-} && -z ${LINKCHECK_ROOT:-} && ! -e .git ]]; then
	exit 77
fi
command -v perl >/dev/null 2>&1 || { echo "linkcheck: perl is needed" >&2; exit 2; }

if (($# > 0)); then
	files=("$@")
else
	files=(README.md doc/*.md)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# scan FILE: one record per line, outside fenced code blocks:
#   H <tab> heading text
#   L <tab> line <tab> link target
#   C <tab> line <tab> code span text
scan() {
	awk '
	BEGIN { fence = "" }
	{
		line = $0
		if (match(line, /^[ \t]*(```+|~~~+)/)) {
			mark = substr(line, RSTART, RLENGTH)
			gsub(/[ \t]/, "", mark)
			if (fence == "") { fence = substr(mark, 1, 3); next }
			if (substr(mark, 1, 3) == fence) { fence = ""; next }
		}
		if (fence != "")
			next
		if (match(line, /^#+[ \t]/)) {
			h = line
			sub(/^#+[ \t]+/, "", h)
			sub(/[ \t]+#+[ \t]*$/, "", h)
			print "H\t" h
		}
		# code spans (single backquotes), then the line without them
		rest = line
		plain = ""
		while (match(rest, /`[^`]+`/)) {
			print "C\t" NR "\t" substr(rest, RSTART + 1, RLENGTH - 2)
			plain = plain substr(rest, 1, RSTART - 1)
			rest = substr(rest, RSTART + RLENGTH)
		}
		plain = plain rest
		rest = plain
		while (match(rest, /\]\([^) \t]+( +"[^"]*")?\)/)) {
			t = substr(rest, RSTART + 2, RLENGTH - 3)
			sub(/ +".*$/, "", t)
			print "L\t" NR "\t" t
			rest = substr(rest, RSTART + RLENGTH)
		}
		if (match(plain, /^ *\[[^]]+\]: +[^ ]+/)) {
			t = plain
			sub(/^ *\[[^]]+\]: +/, "", t)
			sub(/ .*$/, "", t)
			print "L\t" NR "\t" t
		}
	}' "$1"
}

# anchors of heading texts (stdin), one per line, GitHub's way
slugs() {
	perl -CSD -ne '
		chomp;
		s/\[([^\]]*)\]\([^)]*\)/$1/g;     # [text](url) -> text
		s/<[^>]+>//g;                      # inline html
		$_ = lc $_;
		s/[^\p{Word}\- ]//g;
		tr/ /-/;
		my $s = $_;
		if (exists $seen{$s}) { $seen{$s}++; $s = "$s-$seen{$s}"; } else { $seen{$s} = 0; }
		print "$s\n";'
}

key() { printf '%s' "$1" | tr '/' '%'; }

anchors_of() {
	local f=$1 k
	k=$(key "$f")
	if [[ ! -f $tmp/a.$k ]]; then
		scan "$f" | awk -F'\t' '$1 == "H" { print $2 }' | slugs >"$tmp/a.$k"
	fi
	printf '%s\n' "$tmp/a.$k"
}

# normalise a path: drop ./ and resolve ../ textually
norm() {
	local IFS=/ p out=() part
	read -r -a p <<<"$1"
	for part in "${p[@]}"; do
		case $part in
		'' | .) ;;
		..) ((${#out[@]})) && unset 'out[${#out[@]}-1]' ;;
		*) out+=("$part") ;;
		esac
	done
	local s
	s=$(printf '%s/' "${out[@]+"${out[@]}"}")
	printf '%s' "${s%/}"
}

bad=0
report() { echo "$1:$2: $3"; bad=$((bad + 1)); }

check_path() { # FILE LINE SPAN
	local f=$1 n=$2 p=$3 dir part
	p=${p%%[[:space:]]*}
	p=${p%[:,;.]}
	case $p in
	host/* | plugins/* | tools/* | sql/* | tests/* | nginx/* | packaging/* | api/* | doc/* | examples/*) ;;
	*) return 0 ;;
	esac
	case $p in
	*.la | *.so | *.o | *.lo) return 0 ;;
	esac
	# a placeholder: check the directories before it
	local ph='[<{[]|NNNN|XXXX|[.][.][.]' glob='[<{[*?]|NNNN|XXXX|[.][.][.]'
	if [[ $p =~ $ph ]]; then
		dir=
		local IFS=/
		for part in $p; do
			[[ $part =~ $glob ]] && break
			dir=${dir:+$dir/}$part
		done
		unset IFS
		[[ -z $dir || -d $dir || -f $dir ]] || report "$f" "$n" "no such path: $p (checked $dir)"
		return 0
	fi
	if [[ $p == *[\*\?]* ]]; then
		compgen -G "$p" >/dev/null || report "$f" "$n" "nothing matches: $p"
		return 0
	fi
	[[ -e $p ]] || report "$f" "$n" "no such path: $p"
}

check_link() { # FILE LINE TARGET
	local f=$1 n=$2 t=$3 path anchor dest a
	case $t in
	*://* | mailto:* | tel:*) return 0 ;;
	esac
	path=${t%%#*}
	anchor=
	[[ $t == *#* ]] && anchor=${t#*#}
	if [[ -z $path ]]; then
		dest=$f
	else
		dest=$(norm "$(dirname "$f")/$path")
		if [[ ! -e $dest ]]; then
			report "$f" "$n" "broken link: $t (no $dest)"
			return 0
		fi
	fi
	[[ -z $anchor ]] && return 0
	if [[ $dest != *.md || ! -f $dest ]]; then
		return 0
	fi
	a=$(anchors_of "$dest")
	grep -qxF -- "$anchor" "$a" || report "$f" "$n" "no heading for #$anchor in $dest"
}

for f in "${files[@]}"; do
	[[ -f $f ]] || { report "$f" 0 "no such document"; continue; }
	while IFS=$'\t' read -r kind n rest; do
		case $kind in
		L) check_link "$f" "$n" "$rest" ;;
		C) check_path "$f" "$n" "$rest" ;;
		esac
	done < <(scan "$f")
done

if ((bad > 0)); then
	echo "linkcheck: $bad broken link(s) or path(s) in ${files[*]}" >&2
	exit 1
fi
exit 0
