"""Traces: the per-request trace contract, the spawn tree, the reference clock, the embedded synthetic corpus and the
public agent traces read into the contract (§3.2, Table 3, App. B)."""
