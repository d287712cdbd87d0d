#!/usr/bin/python3
"""Writes a gold file and a perturbed test file for checking `tfm evalb` against the real EVALB.

  python3 tools/perturb_trees.py IN.trees[.gz] GOLD TEST [--seed 1] [--max N]

IN holds one bracketed tree a line (the PTB sample's raw or clean form). GOLD gets the trees that
evalb.c can hold (at most 190 words and 190 brackets, lines under 4000 characters, labels under 30
and words under 100 characters, fewer than 20 quote words), unchanged. TEST gets, line for line, a
perturbed copy, made with a fixed seed, so the files are the same on every run:

  - relabel a constituent (any label, ADVP <-> PRT, a function tag kept or dropped),
  - relabel a preterminal: another POS tag, or a punctuation tag (, : `` '' . ? ! POS -NONE-),
    which evalb's DELETE_LABEL and QUOTE_LABEL lists treat differently in COLLINS.prm and nk.prm;
    a quote word (' " /) gets POS, '', ``, NN or : (nk.prm's fix_quote repairs some of these),
  - delete a bracket (its children move up into its parent),
  - add a unary node over a constituent or a word,
  - move a bracket boundary by one child (take in the next sibling, or give up the last child),
  - error sentences: a word missing, an extra word, a changed word,
  - an empty line (evalb skips the sentence).

A sentence gets 1 to 4 of the first five kinds of change (70%), is an error sentence (7%), an empty line (3%),
or is left unchanged (20%). Then `evalb -p COLLINS.prm GOLD TEST` and
`tfm evalb GOLD TEST --params collins` (and nk) should print the same; docs/PARSING.md says how
this was run.
"""

import argparse
import gzip
import random
import sys

LABELS = ["S", "NP", "VP", "PP", "ADJP", "ADVP", "PRT", "SBAR", "QP", "WHNP", "FRAG", "X"]
TAGS = ["NN", "NNS", "NNP", "VB", "VBD", "VBZ", "JJ", "RB", "RP", "IN", "DT", "CD", "PRP"]
PUNCT = [",", ":", "``", "''", ".", "?", "!", "POS", "-NONE-"]
QUOTE_WORDS = ("'", '"', "/")


def parse(line):
    """A tree as nested lists [label, child, ...]; a word is a str."""
    tokens = line.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def node():
        nonlocal pos
        assert tokens[pos] == "("
        pos += 1
        label = ""
        if tokens[pos] not in ("(", ")"):
            label = tokens[pos]
            pos += 1
        out = [label]
        while tokens[pos] != ")":
            if tokens[pos] == "(":
                out.append(node())
            else:
                out.append(tokens[pos])
                pos += 1
        pos += 1
        return out

    tree = node()
    assert pos == len(tokens), line
    return tree


def write(tree):
    if isinstance(tree, str):
        return tree
    return "(" + " ".join([tree[0]] + [write(c) for c in tree[1:]]) + ")"


def is_pre(n):
    return not isinstance(n, str) and len(n) == 2 and isinstance(n[1], str)


def nodes(tree, parent=None, index=0, out=None):
    """(node, parent, index in parent) for every constituent, preterminals included."""
    if out is None:
        out = []
    out.append((tree, parent, index))
    if not is_pre(tree):
        for i, child in enumerate(tree[1:], start=1):
            nodes(child, tree, i, out)
    return out


def sizes(tree):
    all_nodes = [n for n, _, _ in nodes(tree)]
    pres = [n for n in all_nodes if is_pre(n)]
    labels = max(len(n[0]) for n in all_nodes)
    words = max(len(n[1]) for n in pres) if pres else 0
    quotes = sum(1 for n in pres if n[1] in QUOTE_WORDS)
    return len(pres), len(all_nodes) - len(pres), labels, words, quotes


def fits(tree, line):
    words, brackets, label_len, word_len, quotes = sizes(tree)
    return (words <= 190 and brackets <= 190 and len(line) < 4000 and label_len < 30 and
            word_len < 100 and quotes < 20)


def perturb_once(tree, rng):
    everything = nodes(tree)
    inner = [(n, p, i) for n, p, i in everything if p is not None and not is_pre(n)]
    pres = [(n, p, i) for n, p, i in everything if is_pre(n)]
    quotes = [(n, p, i) for n, p, i in pres if n[1] in QUOTE_WORDS]
    kind = rng.choice(["relabel", "relabel", "tag", "punct", "quote", "delete", "delete",
                       "unary", "boundary", "boundary"])
    if kind == "relabel" and inner:
        n, _, _ = rng.choice(inner)
        base, _, tail = n[0].partition("-")
        if base in ("ADVP", "PRT"):
            new = "PRT" if base == "ADVP" else "ADVP"
        else:
            new = rng.choice(LABELS)
        n[0] = new + ("-" + tail if tail and rng.random() < 0.5 else "")
    elif kind == "tag" and pres:
        n, _, _ = rng.choice(pres)
        n[0] = rng.choice(TAGS)
    elif kind == "punct" and pres:
        n, _, _ = rng.choice(pres)
        n[0] = rng.choice(PUNCT)
    elif kind == "quote" and quotes:
        n, _, _ = rng.choice(quotes)
        n[0] = rng.choice(["POS", "''", "``", "NN", ":"])
    elif kind == "delete" and inner:
        n, p, i = rng.choice(inner)
        p[i:i + 1] = n[1:]
    elif kind == "unary":
        candidates = [(n, p, i) for n, p, i in everything if p is not None]
        if candidates:
            n, p, i = rng.choice(candidates)
            p[i] = [rng.choice(LABELS), n]
    elif kind == "boundary" and inner:
        n, p, i = rng.choice(inner)
        if i + 1 < len(p) and rng.random() < 0.5:
            n.append(p.pop(i + 1))  # take in the next sibling
        elif len(n) > 2:
            p.insert(i + 1, n.pop())  # give up the last child


def perturb_error(tree, rng):
    pres = [(n, p, i) for n, p, i in nodes(tree) if is_pre(n)]
    n, p, i = rng.choice(pres)
    kind = rng.choice(["missing", "extra", "word"])
    if kind == "missing" and len(pres) > 1:
        del p[i]
        if len(p) == 1:  # an emptied constituent would have no children: give it a word
            p.append(["NN", "filler"])
    elif kind == "extra":
        p.insert(i, ["NN", "extra"])
    else:
        n[1] = n[1] + "x"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("gold")
    ap.add_argument("test")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max", type=int, default=0, help="at most this many trees (0: all)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    opener = gzip.open if args.input.endswith(".gz") else open
    with opener(args.input, "rt") as f:
        lines = [line.strip() for line in f if line.strip()]
    kept = 0
    with open(args.gold, "w") as gold, open(args.test, "w") as test:
        for line in lines:
            tree = parse(line)
            if not fits(tree, line):
                continue
            roll = rng.random()
            out = parse(line)
            if roll < 0.2:
                pass
            elif roll < 0.23:
                out = None
            elif roll < 0.3:
                perturb_error(out, rng)
            else:
                for _ in range(rng.randint(1, 4)):
                    perturb_once(out, rng)
            test_line = "" if out is None else write(out)
            if out is not None and not fits(out, test_line):
                test_line = line
            gold.write(line + "\n")
            test.write(test_line + "\n")
            kept += 1
            if args.max and kept >= args.max:
                break
    print(f"{kept} of {len(lines)} trees", file=sys.stderr)


if __name__ == "__main__":
    main()
