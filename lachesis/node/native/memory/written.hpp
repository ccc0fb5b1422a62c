// lachesis/memory/written.py, natively: written.WrittenKV, the running written-KV counters [HBM, HBF] told of each
// write by the table: tokens, tokens per class (a class enters when a segment of it opens), blocks.
#pragma once

#include <array>
#include <utility>
#include <vector>

#include "kv.hpp"

namespace lachesis {

using ByClass = std::vector<std::pair<int, std::array<i64, 2>>>;  // (class, [HBM, HBF]) in first-open order

struct WrittenKV {
    i64 tokens[2] = {0, 0}, blocks[2] = {0, 0};
    PerClass<std::array<i64, 2>> by_class{};
    std::vector<int> order;  // classes in first-open order
    PerClass<bool> seen{};

    void opened(int cls) {  // WrittenKV.opened
        if (!seen[std::size_t(cls)]) {
            seen[std::size_t(cls)] = true;
            order.push_back(cls);
        }
    }
    void wrote(int cls, i64 hbm_tokens, i64 hbf_tokens, i64 hbm_blocks, i64 hbf_blocks) {  // WrittenKV.wrote
        tokens[HBM] += hbm_tokens;
        tokens[HBF] += hbf_tokens;
        auto& c = by_class[std::size_t(cls)];
        c[HBM] += hbm_tokens;
        c[HBF] += hbf_tokens;
        blocks[HBM] += hbm_blocks;
        blocks[HBF] += hbf_blocks;
    }
    ByClass tokens_by_class() const {  // WrittenKV.tokens_by_class
        ByClass out;
        for (int c : order) out.emplace_back(c, by_class[std::size_t(c)]);
        return out;
    }
};

// written.WriteTotals: a snapshot of the counters with the blocks evicted so far.
struct WriteTotals {
    std::array<i64, 2> tokens{};
    ByClass tokens_by_class;
    std::array<i64, 2> blocks{};
    i64 evicted_blocks = 0;
    i64 bytes_per_token = 1;
};

}  // namespace lachesis
