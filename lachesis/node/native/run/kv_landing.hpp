// lachesis/node/kv_landing.py, natively: kv_landing.landing_fn, the seconds a prefilled request's KV takes to land in
// HBM and HBF at each tier's write bandwidth, both tiers in parallel.
#pragma once

#include <stdexcept>
#include <string>

#include "../memory/kv.hpp"

namespace lachesis {

struct Landing {
    double bw_hbm = 0.0, bw_hbf = 0.0, kv_bytes_per_token = 0.0;

    double operator()(double hbm_tokens, double hbf_tokens) const {
        const double kb = kv_bytes_per_token;
        if (!(bw_hbm > 0 && bw_hbf > 0 && 0 <= hbm_tokens && hbm_tokens < INF && 0 <= hbf_tokens && hbf_tokens < INF)) {
            auto one = [&](double tokens, double bw, const char* tier) {  // kv_landing.kv_landing_time
                if (!(0 <= tokens && tokens < INF))
                    throw std::invalid_argument("kv_landing_time: tokens must be finite and >= 0");
                if (bw > 0) return tokens * kb / bw;
                if (tokens > 0)
                    throw std::invalid_argument(std::string(tier) + " landing: bytes routed to a tier with zero bandwidth");
                return 0.0;
            };
            const double t1 = hbm_tokens ? one(hbm_tokens, bw_hbm, "hbm") : 0.0;
            const double t2 = hbf_tokens ? one(hbf_tokens, bw_hbf, "hbf") : 0.0;
            return t2 > t1 ? t2 : t1;  // Python's max(t1, t2)
        }
        const double t1 = hbm_tokens ? hbm_tokens * kb / bw_hbm : 0.0;
        const double t2 = hbf_tokens ? hbf_tokens * kb / bw_hbf : 0.0;
        return t2 > t1 ? t2 : t1;
    }
};

}  // namespace lachesis
