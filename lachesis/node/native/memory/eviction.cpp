// eviction.LRUEviction.evict (eviction.hpp).
#include "eviction.hpp"

#include <algorithm>

namespace lachesis {

i64 LRUEviction::evict(Rows& rows, i64 k, int tier, std::vector<i64>& out, std::vector<int>& emptied) {
    MinHeap& h = tier < 0 ? heap : heap_tier[tier];
    const i64 hbm = hbm_blocks;
    i64 n_hbm_all = 0;
    const std::size_t start = out.size();
    while (k > 0) {
        const Entry e = h.top();
        SegmentRow& row = rows[e.row];
        const bool here = row.cached && row.cache_seq == e.seq;
        const i64 n_t = !here ? 0 : tier < 0 ? row.n_blocks : tier == HBM ? row.n_hbm : row.n_blocks - row.n_hbm;
        if (n_t == 0) {
            h.pop();
            continue;
        }
        std::vector<i64>& ids = row.ids;
        const i64 take = std::min(k, n_t);
        i64 n_hbm;
        if (take == row.n_blocks) {  // the whole segment goes (its HBM count is known)
            out.insert(out.end(), ids.rbegin(), ids.rend());
            n_hbm = row.n_hbm;
            ids.clear();
        } else if (tier < 0) {
            const i64 sz = i64(ids.size());
            i64 c = 0;
            for (i64 j = sz - 1; j >= sz - take; --j) {
                out.push_back(ids[std::size_t(j)]);
                c += ids[std::size_t(j)] < hbm;
            }
            const i64 held = row.n_hbm;  // a segment wholly in one tier needs no scan of its tail
            n_hbm = held == row.n_blocks ? take : held ? c : 0;
            ids.resize(std::size_t(sz - take));
        } else {
            // the last `take` blocks of the tier, from the tail; the rest keep their order
            std::vector<char> gone(ids.size(), 0);
            i64 got = 0;
            for (i64 j = i64(ids.size()) - 1; j >= 0 && got < take; --j) {
                if ((ids[std::size_t(j)] >= hbm) == bool(tier)) {
                    out.push_back(ids[std::size_t(j)]);
                    gone[std::size_t(j)] = 1;
                    ++got;
                }
            }
            std::size_t w = 0;
            for (std::size_t j = 0; j < ids.size(); ++j)
                if (!gone[j]) ids[w++] = ids[j];
            ids.resize(w);
            n_hbm = tier == HBM ? take : 0;
        }
        n_hbm_all += n_hbm;
        blocks[HBM] -= n_hbm;
        blocks[HBF] -= take - n_hbm;
        row.n_hbm -= n_hbm;
        row.n_blocks -= take;
        if (row.n_blocks == 0) {
            row.cached = false;
            emptied.push_back(e.row);
        }
        k -= take;
    }
    evicted += i64(out.size() - start);
    return n_hbm_all;
}

}  // namespace lachesis
