"""What is derived from session documents: baselines, the noise rule, per-variant figures, verdicts and their
caveats, groups, diff, merge, layer matching and the lowering diagnosis."""
