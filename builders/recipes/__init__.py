"""Which layers a study quantizes: FP8 recipes as data."""
