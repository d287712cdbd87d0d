#!/usr/bin/env bash
# Downloads the WMT14 training corpora of the paper's English-German or English-French setup, and
# newstest2013 (dev) and newstest2014 (test), and writes them as aligned plain text into DIR:
#   train.en, train.XX           the training corpora concatenated in the order below (raw text)
#   newstest2013.en, .XX         dev/newstest2013.{en,XX} of wmt14/dev.tgz, whitespace-normalised
#   newstest2014.en, .XX         the full 3003-segment newstest2014 (wmt14/test-full.tgz), SGM to text
#   manifest.tsv                 lines of each corpus and where they came from
#   archives/                    the downloaded archives (one present is not downloaded again)
# The corpora are those of fairseq's examples/translation/prepare-wmt14en2{de,fr}.sh (en-de with
# --icml17, i.e. News Commentary v9) and tensor2tensor's translate_en{de,fr}.py, in fairseq's order:
#   en-de: Europarl v7, Common Crawl, News Commentary v9                     (4,520,620 pairs)
#   en-fr: Europarl v7, Common Crawl, UN, News Commentary v9, 10^9 French-English (40,842,333 pairs)
# Test sets are converted as sacreBLEU converts WMT SGM files: keep the lines that start with
# "<seg ", take the text between the tags, strip it and turn every run of Unicode whitespace into
# one space (entities such as &amp; are left as they are). newstest2013's plain text gets the same
# whitespace normalisation. docs/DATA.md ("WMT14") has sizes and details.
#
# Usage: scripts/fetch_wmt14.sh en-de|en-fr DIR
# WMT14_BASE_URL: where wmt10/, wmt13/ and wmt14/ are (default https://www.statmt.org; a test points
# it at a folder of small archives with file://).
# Prints DIR's absolute path on stdout; progress, warnings and errors go to stderr. Every error is
# one line naming the file or URL, exit 1 (usage: exit 2). The outputs are written under temporary
# names and renamed at the end, so a failed run leaves no partial train.* or newstest* behind.
# Needs curl, tar, gzip, sed and coreutils only.
set -euo pipefail
export LC_ALL=C # byte semantics for sed, English tool messages

me=fetch_wmt14.sh
usage() {
  echo "usage: scripts/fetch_wmt14.sh en-de|en-fr DIR" >&2
  exit 2
}
die() {
  echo "$me: error: $*" >&2
  exit 1
}
warn() { echo "$me: warning: $*" >&2; }
# The first non-blank line a failed tool wrote to $err (gzip starts its complaint with an empty one).
first_error() { sed -n '/[^[:space:]]/{p;q;}' "$err"; }
say() { echo "$me: $*" >&2; }

[ "$#" -eq 2 ] || usage
pair=$1
dir=$2
case "$pair" in
  en-de) xx=de ;;
  en-fr) xx=fr ;;
  *) usage ;;
esac
[ -n "$dir" ] || usage
base=${WMT14_BASE_URL:-https://www.statmt.org}
base=${base%/}

# The corpora, in the order of train.*: name|archive (under the base)|English member|XX member|
# lines of the real release (from tensor2tensor/Lingvo's counts; a differing count is only a warning).
if [ "$xx" = de ]; then
  corpora=(
    "europarl-v7|wmt13/training-parallel-europarl-v7.tgz|training/europarl-v7.de-en.en|training/europarl-v7.de-en.de|1920209"
    "commoncrawl|wmt13/training-parallel-commoncrawl.tgz|commoncrawl.de-en.en|commoncrawl.de-en.de|2399123"
    "news-commentary-v9|wmt14/training-parallel-nc-v9.tgz|training/news-commentary-v9.de-en.en|training/news-commentary-v9.de-en.de|201288"
  )
  test_sgm=(test-full/newstest2014-deen-src.en.sgm test-full/newstest2014-deen-ref.de.sgm)
else
  corpora=(
    "europarl-v7|wmt13/training-parallel-europarl-v7.tgz|training/europarl-v7.fr-en.en|training/europarl-v7.fr-en.fr|2007723"
    "commoncrawl|wmt13/training-parallel-commoncrawl.tgz|commoncrawl.fr-en.en|commoncrawl.fr-en.fr|3244152"
    "un|wmt13/training-parallel-un.tgz|un/undoc.2000.fr-en.en|un/undoc.2000.fr-en.fr|12886831"
    "news-commentary-v9|wmt14/training-parallel-nc-v9.tgz|training/news-commentary-v9.fr-en.en|training/news-commentary-v9.fr-en.fr|183251"
    "giga-fren|wmt10/training-giga-fren.tar|giga-fren.release2.fixed.en.gz|giga-fren.release2.fixed.fr.gz|22520376"
  )
  test_sgm=(test-full/newstest2014-fren-src.en.sgm test-full/newstest2014-fren-ref.fr.sgm)
fi
tests=(
  "newstest2013|wmt14/dev.tgz|dev/newstest2013.en|dev/newstest2013.$xx|3000"
  "newstest2014|wmt14/test-full.tgz|${test_sgm[0]}|${test_sgm[1]}|3003"
)
outputs=(train.en "train.$xx" newstest2013.en "newstest2013.$xx" newstest2014.en "newstest2014.$xx")

mkdir -p "$dir/archives" || die "cannot create $dir/archives"
dir=$(cd "$dir" && pwd)

# Already done: a manifest (written last) and every output.
if [ -f "$dir/manifest.tsv" ]; then
  have=$(sed -n '1s/^# fetch_wmt14\.sh \([a-z-]*\).*/\1/p' "$dir/manifest.tsv")
  [ "$have" = "$pair" ] || die "$dir/manifest.tsv is of WMT14 ${have:-(unknown)}, not $pair: use another DIR"
  complete=1
  for f in "${outputs[@]}"; do [ -f "$dir/$f" ] || complete=0; done
  if [ "$complete" = 1 ]; then
    pairs=$(sed -n 's/^train\t\([0-9]*\)\t.*/\1/p' "$dir/manifest.tsv")
    say "$dir already holds WMT14 $pair (${pairs:-?} training pairs, manifest.tsv): nothing to do"
    echo "$dir"
    exit 0
  fi
fi

err=$(mktemp)
done_ok=0
part=""
cleanup() {
  rm -f "$err"
  [ -z "$part" ] || rm -f "$part"
  if [ "$done_ok" = 0 ]; then
    for f in "${outputs[@]}" manifest.tsv; do rm -f "$dir/$f.part"; done
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. Download every archive the pair needs (all first, so that a missing one fails early).
archives=()
for entry in "${corpora[@]}" "${tests[@]}"; do
  IFS='|' read -r _ archive _ _ _ <<<"$entry"
  case " ${archives[*]} " in *" $archive "*) ;; *) archives+=("$archive") ;; esac
done
for archive in "${archives[@]}"; do
  url="$base/$archive"
  file="$dir/archives/${archive##*/}"
  if [ -f "$file" ]; then
    say "have $file"
    continue
  fi
  say "downloading $url"
  part="$file.part"
  status=0
  if [ -t 2 ]; then
    curl -fL --retry 3 --progress-bar -o "$part" "$url" || status=$?
    : >"$err"
  else
    curl -fL --retry 3 -sS -o "$part" "$url" 2>"$err" || status=$?
  fi
  if [ "$status" != 0 ]; then
    why=$(first_error)
    die "cannot download $url (curl exit $status${why:+: $why})"
  fi
  mv "$part" "$file"
  part=""
done

# 2. Extract. unpack ARCHIVE MEMBER: the member's text on stdout (a .gz member is decompressed).
unpack() {
  local z=()
  [[ "$1" == *.tgz ]] && z=(-z)
  if [[ "$2" == *.gz ]]; then
    tar "${z[@]}" -xOf "$1" "$2" | gzip -dc
  else
    tar "${z[@]}" -xOf "$1" "$2"
  fi
}
# Unicode whitespace as Python's str.isspace() has it (sacreBLEU's \s), as UTF-8 byte patterns: the
# ASCII ones (\n never occurs inside a line), U+001C..U+001F, U+0085, U+00A0, U+1680,
# U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
ws=$'[\t\v\f\r\x1c-\x1f ]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80'
normalise() { sed -E -e "s/(${ws})+/ /g" -e 's/^ //' -e 's/ $//'; }
sgm_to_text() { sed -E -e '/^<seg /!d' -e 's/^<seg[^>]*>(.*)<\/seg>/\1/' | normalise; }
raw() { cat; }

# extract ARCHIVE MEMBER FILTER OUT: appends the member, through FILTER, to OUT; sets $lines. A last
# line without a newline gets one, so that the next corpus starts on a line of its own.
extract() {
  local file="$dir/archives/${1##*/}"
  if ! lines=$(unpack "$file" "$2" 2>"$err" | "$3" | tee -a "$4" | wc -l); then
    die "cannot extract $2 from $file ($base/$1): $(first_error) (if the download is damaged, remove it to fetch it again)"
  fi
  if [ -n "$(tail -c 1 "$4")" ]; then
    echo >>"$4"
    lines=$((lines + 1))
  fi
}

manifest="$dir/manifest.tsv.part"
{
  echo "# fetch_wmt14.sh $pair from $base"
  printf 'corpus\tpairs\tarchive\ten\t%s\n' "$xx"
} >"$manifest"
# process ENTRY FILTER OUT_EN OUT_XX: one corpus or test set, its two sides checked for equal length.
process() {
  local name archive member_en member_xx expected n_en
  IFS='|' read -r name archive member_en member_xx expected <<<"$1"
  say "extracting $name from ${archive##*/}"
  extract "$archive" "$member_en" "$2" "$3"
  n_en=$lines
  extract "$archive" "$member_xx" "$2" "$4"
  if [ "$n_en" != "$lines" ]; then
    die "$name: $member_en has $n_en lines but $member_xx has $lines (${archive##*/})"
  fi
  [ "$lines" = "$expected" ] || warn "$name has $lines pairs; the WMT14 release has $expected"
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$lines" "$archive" "$member_en" "$member_xx" >>"$manifest"
}

: >"$dir/train.en.part"
: >"$dir/train.$xx.part"
total=0
for entry in "${corpora[@]}"; do
  process "$entry" raw "$dir/train.en.part" "$dir/train.$xx.part"
  total=$((total + lines))
done
printf 'train\t%s\t-\ttrain.en\ttrain.%s\n' "$total" "$xx" >>"$manifest"
expected_total=4520620
[ "$xx" = de ] || expected_total=40842333
[ "$total" = "$expected_total" ] || warn "train has $total pairs; the WMT14 $pair release has $expected_total"
: >"$dir/newstest2013.en.part"
: >"$dir/newstest2013.$xx.part"
process "${tests[0]}" normalise "$dir/newstest2013.en.part" "$dir/newstest2013.$xx.part"
: >"$dir/newstest2014.en.part"
: >"$dir/newstest2014.$xx.part"
process "${tests[1]}" sgm_to_text "$dir/newstest2014.en.part" "$dir/newstest2014.$xx.part"

# 3. Rename into place, the manifest last: its presence means a complete set.
for f in "${outputs[@]}" manifest.tsv; do mv "$dir/$f.part" "$dir/$f"; done
done_ok=1
say "wrote WMT14 $pair to $dir: train.{en,$xx} ($total pairs), newstest2013.{en,$xx}, newstest2014.{en,$xx}, manifest.tsv"
echo "$dir"
