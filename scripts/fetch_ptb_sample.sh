#!/usr/bin/env bash
# Prints the folder that holds NLTK's Penn Treebank sample (wsj_sample.trees.gz), downloading it
# when neither $TFM_DATA_DIR/ptb-sample nor ../shared/data/ptb-sample has it. Source: GitHub
# nltk/nltk_data, branch gh-pages, packages/corpora/treebank.zip (commit 5db857e); the 199 files
# combined/wsj_0001.mrg .. wsj_0199.mrg are concatenated in order as PTB .mrg text, which tfm
# reads like the one-tree-a-line file of ../shared/data/ptb-sample (3914 trees, the same order).
set -euo pipefail
cd "$(dirname "$0")/.."
for dir in "${TFM_DATA_DIR:-}/ptb-sample" ../shared/data/ptb-sample runs/data/ptb-sample; do
  if [ -f "$dir/wsj_sample.trees.gz" ]; then
    (cd "$dir" && pwd)
    exit 0
  fi
done
out=runs/data/ptb-sample
url="https://raw.githubusercontent.com/nltk/nltk_data/5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/corpora/treebank.zip"
mkdir -p "$out"
echo "fetch_ptb_sample.sh: downloading the Penn Treebank sample into $out" >&2
curl -fsSL --retry 3 -o "$out/treebank.zip.part" "$url" \
  || { echo "fetch_ptb_sample.sh: cannot download $url" >&2; exit 1; }
python3 - "$out/treebank.zip.part" "$out/wsj_sample.trees.gz.part" <<'PY'
import gzip, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, gzip.open(sys.argv[2], "wb") as out:
    names = sorted(n for n in z.namelist() if n.startswith("treebank/combined/wsj_") and n.endswith(".mrg"))
    if len(names) != 199:
        sys.exit(f"fetch_ptb_sample.sh: expected 199 .mrg files in treebank.zip, found {len(names)}")
    for name in names:
        out.write(z.read(name) + b"\n")
PY
mv "$out/wsj_sample.trees.gz.part" "$out/wsj_sample.trees.gz"
rm -f "$out/treebank.zip.part"
(cd "$out" && pwd)
