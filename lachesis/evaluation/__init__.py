"""Evaluation: the grid of Figs. 9–12 — its points and knobs, the cached sweep and where it runs, the tables,
gains and figures made from its rows, the sensitivity study, the explorer and the verdict on any trace."""
