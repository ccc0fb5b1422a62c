// lachesis/node/simulator.py, natively: simulator._Run, the closed-loop replay of sessions on a group of ranks (its
// slots, agents, the observers' markers and samplers, in simpy's event order, events.hpp), driving the decode engine
// (decode.hpp), the landing (kv_landing.hpp) and one node memory per rank (memory/node_memory.hpp).  Bit-identical to
// the Python reference on the same inputs (tests/node/test_native_run.py).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "../memory/node_memory.hpp"
#include "decode.hpp"
#include "kv_landing.hpp"

namespace lachesis {

// plan.Plan's requests as the event loop reads them (plan.Plan.request_arrays): per request its costs and CSR rows;
// per agent its requests, per request the agents it spawns, per session its root agents.
struct PlanRequests {
    Span<double> t_user, t_tools, t_obs;
    Span<i64> out;
    Span<i64> w_ptr, r_ptr, ca_ptr, ce_ptr, kid_ptr, agent_ptr, root_ptr;
    Span<std::int32_t> w_seg, r_seg, ca_seg, ce_seg, kid_agent, agent_req, root_agent;
    Span<i64> w_tok, r_tok;
    Span<double> r_tok_f;  // the read tokens as floats (the step's operand)
    Span<double> r_sum;    // per request: float(sum of its read tokens)
    void check() const;    // the CSR rows consistent with the columns (std::invalid_argument naming the field)
};

// simulator.Window
struct RunWindow { double duration_s = 0.0, warmup_s = 0.0; int n_samples = 1; };

// What a run needs beside the plan, the step and the memories (simulator.RunSetup): the node, the load, the random
// draws made by Python, the windows.
struct RunSpec {
    int ranks = 1;
    i64 n_sessions = 1;            // per GPU
    double bytes_per_token = 0.0;  // float(models.ModelSpec.kv_bytes_per_token)
    double first_warmup = 0.0;
    bool stall = false;            // config.Deployment.landing == "stall"
    bool land = true;
    double ttft_ref = 0.0;
    double nominal_tpot = 0.0;     // plan.NOMINAL_TPOT_S (a fast-forwarded decode's pace)
    i64 decode_capacity = 1;       // decode.CAPACITY
    Landing landing;
    std::vector<i64> order;        // the closed loop's cycle of sessions (plan indices)
    std::vector<i64> firsts;       // each slot's first session
    std::vector<double> phases;    // and its phase
    std::vector<RunWindow> windows;
};

// One window's observations (simulator._Observer): samples (t, sessions live, Memory.snapshot...), operating points
// (t, KV read per step, live KV bytes per class), the classes present per point, the blocks evicted at its warm-up end.
struct Observed {
    int n_classes = 0;
    std::vector<std::array<double, 8>> samples;
    std::vector<char> sample_int_time;  // the sample's time is simpy's int 0
    std::vector<double> points;         // rows of 2 + n_classes
    std::vector<int> point_classes;     // bit c set: class c was in the live-token map
    i64 evicted_at_warmup = 0;
};

class NodeRun : private Environment::Host {
public:
    NodeRun(std::shared_ptr<const PlanRequests> plan, StepModel step, RunSpec spec, std::vector<NodeMemory*> mems);
    // Advance to window k's end (simulator._Run.finish_window) and take its last sample; memory running out ends the
    // run (oom()).
    void run_window(int k);
    void set_interrupt_check(std::function<void()> f) { env_.interrupt_check = std::move(f); }

    bool oom() const { return oom_; }
    double now() const { return env_.now(); }
    i64 requests() const { return requests_; }
    i64 sessions() const { return sessions_done_; }
    const Observed& observed(int k) const { return obs_[std::size_t(k)]; }
    const DecodeEngine& engine() const { return engine_; }
    const std::vector<double>& ttft() const { return ttft_; }
    const std::vector<double>& ttft_t() const { return ttft_t_; }
    bool calls_python() const;

private:
    enum ProcKind : unsigned char { P_SLOT, P_AGENT, P_MARKER, P_SAMPLER };
    struct Proc {
        ProcKind kind = P_SLOT;
        int pc = 0;
        int rank = 0;
        i64 inst = 0;
        int a = 0;      // agent index / window index
        i64 pos = 0;    // agent: next request (index into agent_req); slot: first session
        int q = 0;
        double phase = 0.0;
        bool first = true;
        double ctx_h = 0.0, ctx_f = 0.0, hbf_share = 0.0, land = 0.0;  // agent: one request's, across its yields
        i64 tot = 0;
        std::vector<int> kids;
    };

    int step(int pid) override;
    void on_timer() override { engine_.on_timer(); }
    int start(Proc p);
    int slot_step(int pid);
    int agent_step(int pid);
    int marker_step(int pid);
    int sampler_step(int pid);
    int wait(i64 inst, double d);
    double& ff(i64 inst);
    void sample(Observed& o);
    void point(Observed& o);

    std::shared_ptr<const PlanRequests> plan_;
    const PlanRequests& P_;
    StepModel step_;
    RunSpec R_;
    std::vector<NodeMemory*> mems_;
    Environment env_;
    DecodeEngine engine_;
    std::vector<Proc> procs_;
    std::vector<int> stops_;
    bool oom_ = false;
    std::vector<Observed> obs_;
    i64 drawn_ = 0, instances_ = 0, requests_ = 0, sessions_done_ = 0, live_ = 0;  // simulator._Counts
    std::vector<double> ff_;
    std::vector<double> ttft_, ttft_t_;
};

}  // namespace lachesis
