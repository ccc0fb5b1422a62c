"""Analysis: context segments recovered from a trace, their T_norm and ρR/W (Eqs. 1, 3), the characterization
statistics of Figs. 4–7 and the spawn-time ranker (§3, §4)."""
