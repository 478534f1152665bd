"""Sweeps: a matrix of studies fanned out one job per plan (here, on Ray, or on Slurm), then merged."""
