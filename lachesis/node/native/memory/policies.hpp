// lachesis/memory/policies.py, natively: the built-in policies' rules, each a protocol.Policy, made by the name of the
// native class lachesis.registry names for it (PolicyEntry.native) with the knobs it lists (PolicyEntry.native_knobs).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "protocol.hpp"

namespace lachesis {

constexpr double BUDGET_SLACK = 1e-9;  // policies.BUDGET_SLACK: the budget's tolerance (Lachesis.admitted)

// A policy's knobs by name: numbers (NaN for Python's None) and words.
struct Knobs {
    std::map<std::string, double> numbers;
    std::map<std::string, std::string> words;
};

// The native class ``kind`` with its knobs (std::invalid_argument naming an unknown kind or knob).
std::unique_ptr<Policy> make_policy(const std::string& kind, const Knobs& knobs, const PolicyOptions& options,
                                    const Classes* classes);
// The native classes there are, in the order policies.cpp lists them.
std::vector<std::string> policy_kinds();

}  // namespace lachesis
