// lachesis/memory/lookup.py, natively: lookup.LiveLookup, the harness's read-only questions about the table's rows.
#pragma once

#include "segment_row.hpp"

namespace lachesis {

struct LiveLookup {
    const Rows& rows;

    const SegmentRow* live(const Instance* rec, int seg) const {  // LiveLookup.is_live (the row, or null)
        const int ri = Rows::state_of(rec, seg);
        return ri < 0 ? nullptr : &rows[ri];
    }
    // LiveLookup.hbm_share: Σ weight over the segments lying wholly in HBM (one not live or holding no block counts
    // 0) into acc; false when a segment's blocks are split across the tiers (then hbm_fraction is needed).
    bool hbm_share(i64 inst, const int* segs, const i64* weights, std::size_t n, i64& acc) const {
        const Instance* rec = rows.find(inst);
        acc = 0;
        for (std::size_t j = 0; j < n; ++j) {
            const SegmentRow* r = live(rec, segs[j]);
            if (r && r->n_hbm) {
                if (r->n_hbm != r->n_blocks) return false;
                acc += weights[j];
            }
        }
        return true;
    }
    // LiveLookup.hbm_fraction of one segment: the fraction of its blocks in HBM (0 when not live or empty).
    double hbm_fraction(const Instance* rec, int seg) const {
        const SegmentRow* r = live(rec, seg);
        return (r && r->n_blocks) ? double(r->n_hbm) / double(r->n_blocks) : 0.0;
    }
};

}  // namespace lachesis
