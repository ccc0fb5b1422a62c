// lachesis/memory/protocol.py, natively: what a placement decision is told (protocol.SegmentInfo: the segment's row
// and the blocks this write needs; protocol.MemoryView: the table's read-only view, allocator.TableView) and the
// protocol.Policy every policy implements, with the options the table honours (protocol.Policy's attributes
// frees_at_boundary, reclaims_cached_hbm and rho_window, read off the Python object by lachesis.node.native).
#pragma once

#include "segment_row.hpp"

namespace lachesis {

class TableView;  // allocator.hpp

// protocol.SegmentInfo: the row as it stands before this write (its blocks, tokens, reads, clairvoyant facts) and
// the blocks the write is about to allocate.
struct SegmentInfo {
    const SegmentRow& row;
    int ri;            // the row's slot (what the live index knows it by)
    i64 new_blocks;
};

// protocol.Policy's attributes the table reads.
struct PolicyOptions {
    bool frees_at_boundary = true;
    bool reclaims_cached_hbm = false;  // HBMFirstReclaim
    i64 rho_window = 1;                // placement_stats.PlacementStats' window (the policy's, else RHO_WINDOW)
};

// protocol.Policy: one decision, the tier of a segment's next blocks (the allocator falls back when it is full).
struct Policy {
    PolicyOptions options;
    virtual ~Policy() = default;
    virtual int tier(const SegmentInfo& seg, TableView& view) = 0;
    // whether the rule may read PlacementStats.rho_quantile (else the statistics do not keep the window)
    virtual bool reads_rho_quantile() const { return false; }
    // whether the rule runs Python (a run then keeps the interpreter's lock while it runs)
    virtual bool calls_python() const { return false; }
};

}  // namespace lachesis
