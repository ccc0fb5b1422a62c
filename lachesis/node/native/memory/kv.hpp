// lachesis/kv.py, natively: the tiers, the segment classes as Python numbers them (kv.SEG_CLASSES' order, handed over
// by lachesis.node.native.classes; the core holds no class name of its own) and the allocation error; with the
// read-only array view (Span) through which every native room reads what Python hands it.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace lachesis {

using i64 = std::int64_t;
constexpr double NaN = std::numeric_limits<double>::quiet_NaN();
constexpr double INF = std::numeric_limits<double>::infinity();

// A read-only view of n values (a numpy array's buffer, kept alive by the binding that made it).
template <class T> struct Span {
    const T* p = nullptr;
    std::size_t n = 0;
    const T& operator[](std::size_t i) const { return p[i]; }
    const T* data() const { return p; }
    std::size_t size() const { return n; }
    const T* begin() const { return p; }
    const T* end() const { return p + n; }
};

// kv.Tier
enum Tier : int { HBM = 0, HBF = 1 };

// kv.AllocationError: a placement memory cannot hold.
struct AllocationError : std::runtime_error { using std::runtime_error::runtime_error; };

// The most classes a per-class array holds (kv.SEG_CLASSES has five; Classes refuses more).
constexpr int MAX_CLASSES = 8;
template <class T> using PerClass = std::array<T, MAX_CLASSES>;

// The segment classes by code (index in kv.SEG_CLASSES) and the codes the rules read: kv.SHORT_LIVED_CLASSES (the
// deterministic path), the ranked class ("worker"), the reserving class ("reviewer") and the class of an aged start's
// pseudo-segments (node_memory.AGED_CLASS).
struct Classes {
    std::vector<std::string> names;
    std::vector<char> short_lived;
    int worker = -1, reviewer = -1, aged = -1;
    Classes() = default;
    Classes(std::vector<std::string> names_, std::vector<char> short_lived_, int worker_, int reviewer_, int aged_)
        : names(std::move(names_)), short_lived(std::move(short_lived_)), worker(worker_), reviewer(reviewer_),
          aged(aged_) {
        const int n = int(names.size());
        if (n < 1 || n > MAX_CLASSES) throw std::invalid_argument("Classes: between 1 and 8 segment classes");
        if (int(short_lived.size()) != n) throw std::invalid_argument("Classes: one short_lived flag per class");
        for (int c : {worker, reviewer, aged})
            if (c < 0 || c >= n) throw std::invalid_argument("Classes: worker, reviewer and aged must be class codes");
    }
    int n() const { return int(names.size()); }
    int deterministic_tier(int cls) const { return short_lived[std::size_t(cls)] ? HBM : HBF; }  // policies._DETERMINISTIC
};

}  // namespace lachesis
