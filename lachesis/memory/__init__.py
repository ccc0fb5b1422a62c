"""Memory: one GPU's two-tier KV memory — the segment table over per-tier free lists, the placement policies it
asks, the prefix-cache pool and the written-KV counters (§4, Fig. 8, §5.2)."""
