# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are for the scripts that source this file
# The Penn Treebank sample's split by file, as tree ranges of wsj_sample.trees.gz (one tree a line, in
# file order) for `tfm linearise --range`: sourced by scripts/parse_ptb.sh and bench/parse_data_curve.sh.
PTB_SAMPLE_TRAIN=1-3396    # wsj_0001-0159
PTB_SAMPLE_DEV=3397-3669   # wsj_0160-0179
PTB_SAMPLE_TEST=3670-3914  # wsj_0180-0199
PTB_SAMPLE_TRAIN_TREES="${PTB_SAMPLE_TRAIN#1-}"
