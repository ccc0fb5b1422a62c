// lachesis/memory/free_lists.py, natively: free_lists.TieredAllocator, one free list of block ids per tier.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "kv.hpp"

namespace lachesis {

// free_lists.TieredAllocator: one stack per tier, popped from the end (lowest ids first at the start).  A stack is
// filled lazily: below its low-water mark (the lowest top so far) it still holds its initial ids, computed when popped
// (initial()), so a run touches only the depth of each list it uses.
struct FreeLists {
    i64 hbm_blocks, hbf_blocks, n_blocks;
    std::unique_ptr<i64[]> stack[2];  // entries below low[t] are not stored yet
    i64 top[2];
    i64 low[2];

    FreeLists(i64 hbm, i64 hbf) : hbm_blocks(hbm), hbf_blocks(hbf), n_blocks(hbm + hbf) {
        if (hbm < 0 || hbf < 0) throw std::invalid_argument("block counts must be >= 0");
        stack[0].reset(new i64[std::size_t(hbm)]);  // uninitialized: pages are touched as the lists are used
        stack[1].reset(new i64[std::size_t(hbf)]);
        top[0] = low[0] = hbm;
        top[1] = low[1] = hbf;
    }
    i64 initial(int t, i64 j) const { return (t == HBM ? hbm_blocks : n_blocks) - 1 - j; }  // an unpopped list's ids
    i64 at(int t, i64 j) const { return j < low[t] ? initial(t, j) : stack[t][std::size_t(j)]; }
    i64 total(int t) const { return t == HBM ? hbm_blocks : hbf_blocks; }  // TieredAllocator.total_blocks
    i64 free(int t) const { return top[t]; }                               // .free_blocks
    i64 used(int t) const { return total(t) - top[t]; }                    // .used_blocks
    i64 free_total() const { return top[0] + top[1]; }

    void pop(int t, i64 k, std::vector<i64>& out) {  // TieredAllocator._pop: the top k, topmost first
        const i64 tp = top[t], lo = tp - k, split = std::max(lo, low[t]);
        const std::size_t o = out.size();
        out.resize(o + std::size_t(k));
        i64* d = out.data() + o;
        const i64* s = stack[t].get();
        for (i64 j = tp - 1; j >= split; --j) *d++ = s[j];                          // stored entries
        for (i64 j = split - 1, id = initial(t, j); j >= lo; --j, ++id) *d++ = id;  // initial ids, never stored
        low[t] = std::min(low[t], lo);  // below the top now: written by a release before any pop reads them
        top[t] = lo;
    }
    // TieredAllocator.take(t, n): appends n ids to out, tier t first, and says how many are HBM and the last one's
    // tier; false (nothing changed) when both lists together hold fewer.
    bool take(int t, i64 n, std::vector<i64>& out, i64& n_hbm, int& last) {
        const i64 tp = top[t];
        if (n <= tp) {
            pop(t, n, out);
            n_hbm = t == HBM ? n : 0;
            last = t;
            return true;
        }
        const int other = 1 - t;
        if (n > tp + top[other]) return false;
        if (tp == 0) {
            pop(other, n, out);
        } else {
            pop(t, tp, out);
            pop(other, n - tp, out);
        }
        n_hbm = t == HBM ? tp : n - tp;
        last = other;
        return true;
    }
    // TieredAllocator.reissue(ids, n_hbm, want): evicted blocks handed to a write, want's tier first, each tier's in
    // release order.
    void reissue(const std::vector<i64>& ids, i64 n_hbm, int want, std::vector<i64>& out, int& last) const {
        const i64 n = i64(ids.size());
        if (n_hbm == n || n_hbm == 0) {
            out.insert(out.end(), ids.begin(), ids.end());
            last = n_hbm ? HBM : HBF;
            return;
        }
        for (int pass = 0; pass < 2; ++pass) {
            const bool want_hbm = (pass == 0) == (want == HBM);
            for (i64 b : ids)
                if ((b < hbm_blocks) == want_hbm) out.push_back(b);
        }
        last = 1 - want;
    }
    // TieredAllocator._release / free_owned: each tier's ids pushed so that the first given is on top.
    void release(const i64* ids, std::size_t n) {
        if (!n) return;
        std::size_t k_hbf = 0;
        for (std::size_t j = 0; j < n; ++j) k_hbf += ids[j] >= hbm_blocks;
        if (k_hbf == 0 || k_hbf == n) {  // one tier: the ids reversed onto its stack
            const int t = k_hbf ? HBF : HBM;
            i64* s = stack[t].get() + top[t];
            for (std::size_t j = 0; j < n; ++j) s[j] = ids[n - 1 - j];
            top[t] += i64(n);
            return;
        }
        i64* s0 = stack[0].get() + top[0];
        i64* s1 = stack[1].get() + top[1];
        std::size_t w0 = 0, w1 = 0;
        for (std::size_t j = n; j-- > 0;) {
            if (ids[j] >= hbm_blocks) s1[w1++] = ids[j];
            else s0[w0++] = ids[j];
        }
        top[0] += i64(w0);
        top[1] += i64(w1);
    }
};

}  // namespace lachesis
