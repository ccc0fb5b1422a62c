// The decode node's run, native: lachesis/node/simulator.py's closed-loop replay (its simpy event order),
// lachesis/node/decode.py's decode engine and lachesis/node/step_cost.py's step and kv_landing.py's landing, driving one
// NodeMemory per rank (memory.hpp).  Bit-identical to the Python reference on the same inputs; the
// Python modules are the readable reference and the differential oracle (tests/node/test_native_run.py).
#pragma once

#include <array>
#include <exception>
#include <queue>
#include <vector>

#include "memory.hpp"

namespace lachesis {

// step_cost.StepModel's coefficient rows for one set of operators, input-major (step_cost.dot_rows' operand):
// rows are lane-major (every operator's lane 0, then lane 1, ...); an operator costs the max over its
// lanes, the rows' sum over operators is taken left to right (step_cost.sum_in_order).
struct StepRows {
    int n_ops = 0;
    int lanes = 1;
    std::vector<double> cols;  // N_INPUTS x (lanes * n_ops)
    double eval(const double* x, std::vector<double>& t) const;
};

// What the step model needs (step_cost.StepModel / GroupStep): G = 1 prices every operator at the rank's
// batch; a group prices its own operators per rank and the group operators at the mean batch.
struct StepSpec {
    StepRows all, own, group;
    double flush_per_byte = 0.0;
    double n_local = 0.0;   // StepModel._n_local
    double log_miss = 0.0;  // StepModel._log_miss (-inf: every expert read)
    double experts(double b) const;
};

struct LandingSpec { double bw_hbm = 0.0, bw_hbf = 0.0, kv_bytes_per_token = 0.0; };

// plan.Plan as the event loop reads it: per request, its costs and CSR rows; per agent, its requests
// and, per request, the agents it spawns; per session, its root agents.
struct PlanArrays {
    std::vector<double> t_user, t_tools, t_obs;
    std::vector<i64> out;
    std::vector<i64> w_ptr, r_ptr, ca_ptr, ce_ptr, kid_ptr, agent_ptr, root_ptr;
    std::vector<int> w_seg, r_seg, ca_seg, ce_seg, kid_agent, agent_req, root_agent;
    std::vector<i64> w_tok, r_tok;
    std::vector<double> r_tok_f;
    std::vector<double> r_sum;  // per request: float(sum of its read tokens)
};

struct RunWindow { double duration_s, warmup_s; int n_samples; };

struct RunSpec {
    int ranks = 1;
    i64 n_sessions = 1;           // per GPU
    double bytes_per_token = 0.0; // float(cfg.model.kv_bytes_per_token)
    double first_warmup = 0.0;
    bool stall = false;           // deployment.landing == "stall"
    bool land = true;
    double ttft_ref = 0.0;
    double nominal_tpot = 0.05;   // plan.NOMINAL_TPOT_S (a fast-forwarded decode's pace)
    std::vector<i64> order;       // the closed loop's cycle of sessions (plan indices)
    std::vector<i64> firsts;      // each slot's first session
    std::vector<double> phases;   // and its phase
    std::vector<RunWindow> windows;
};

// One window's observations (simulator._Observer): samples (t, sessions live, Memory.snapshot...),
// operating points (t, KV read per step, live KV bytes per class, classes present), the evicted
// blocks at its warm-up end.
struct Observed {
    std::vector<std::array<double, 8>> samples;
    std::vector<char> sample_int_time;  // the sample's time is simpy's int 0
    std::vector<std::array<double, 2 + N_CLASSES>> points;
    std::vector<int> point_classes;  // bit c set: class c was in the live-token map
    i64 evicted_at_warmup = 0;
};

class NodeRun {
public:
    NodeRun(PlanArrays plan, StepSpec step, LandingSpec landing, RunSpec spec, std::vector<NodeMemory*> mems);
    // Advance to window k's end (simulator._Run.run_until) and take its last sample; false once memory ran out.
    void run_window(int k);

    bool oom() const { return oom_; }
    double now() const { return now_; }
    i64 requests() const { return requests_; }
    i64 sessions() const { return sessions_done_; }
    const Observed& observed(int k) const { return obs_[k]; }
    // decode engine records
    const std::vector<double>& tpot() const { return tpot_; }
    const std::vector<double>& tpot_w() const { return tpot_w_; }
    const std::vector<double>& tpot_t() const { return tpot_t_; }
    const std::vector<double>& ttft() const { return ttft_; }
    const std::vector<double>& ttft_t() const { return ttft_t_; }
    i64 max_batch() const { return max_batch_; }
    double stalled_s() const { return stalled_s_; }

private:
    enum CbKind : unsigned char { CB_RESUME, CB_CHECK, CB_TIMER, CB_STOP };
    struct Cb { CbKind kind; int target; };
    struct Ev {
        std::vector<Cb> cbs;
        bool triggered = false, processed = false, ok = true, defused = false;
        int holds = 0;             // references that keep a processed event (a kid list before its AllOf)
        int cond_need = 0, cond_count = 0;  // an AllOf
        bool recyclable = true;
        std::exception_ptr err;
    };
    struct Item { double t; int prio; unsigned long long eid; int ev; bool int_time; };
    struct Later { bool operator()(const Item& a, const Item& b) const {
        if (a.t != b.t) return a.t > b.t;
        if (a.prio != b.prio) return a.prio > b.prio;
        return a.eid > b.eid; } };
    enum ProcKind : unsigned char { P_SLOT, P_AGENT, P_MARKER, P_SAMPLER };
    struct Proc {
        ProcKind kind = P_SLOT;
        int pc = 0;
        int done = -1;     // the process's own event (set when the process is started)
        int rank = 0;
        i64 inst = 0;
        int a = 0;         // agent index / window index
        i64 pos = 0;       // agent: next request (index into agent_req); slot: first session
        int q = 0;
        double phase = 0.0;
        bool first = true;
        double ctx_h = 0.0, ctx_f = 0.0, hbf_share = 0.0, land = 0.0;  // agent: one request's, across its yields
        i64 tot = 0;
        std::vector<int> kids;
    };
    static constexpr int URGENT = 0, NORMAL = 1;

    // the event loop (simpy's semantics)
    int new_event();
    // simpy's clock starts at the int 0 and stays an int until an event scheduled with a float delay
    // (a timeout) comes due; ``zero_delay`` events keep the clock's type (tracked for the series' types)
    void schedule(int ev, int prio, double delay, bool zero_delay = false);
    void succeed(int ev) { E_[ev].triggered = true; E_[ev].ok = true; schedule(ev, NORMAL, 0.0, true); }
    int timeout(double delay) { int e = new_event(); E_[e].triggered = true; schedule(e, NORMAL, delay); return e; }
    int process(Proc p);
    int all_of(const std::vector<int>& events);
    void release(int ev);
    void resume(int pid, int ev);
    void check(int cond, int ev);
    int step(int pid);  // run a process until it yields (an event id) or returns (-1)
    int slot_step(int pid);
    int agent_step(int pid);
    int marker_step(int pid);
    int sampler_step(int pid);
    int wait(i64 inst, double d);
    double& ff(i64 inst);

    // the decode engine (decode.DecodeEngine)
    void advance();
    double step_time();
    double rank_step(double batch, double h, double f, double fl, double hw);
    double one_step(double batch, double h, double f, double fl, double hw);
    void reschedule();
    void on_timer(int timer);
    void drop_timer();
    double stall(int rank, double seconds);
    int join(double tokens, double h, double f, double fl, double hw, int rank);
    int join_measured(double tokens, double h, double f, double fl, double hw, int rank, double* first_step);
    double kv_read_bytes() const;
    void grow();

    void sample(Observed& o);
    void point(Observed& o);
    double landing(double hbm_tokens, double hbf_tokens) const;

    PlanArrays P_;
    StepSpec S_;
    LandingSpec L_;
    RunSpec R_;
    std::vector<NodeMemory*> mems_;

    std::vector<Ev> E_;
    std::vector<int> free_ev_;
    std::priority_queue<Item, std::vector<Item>, Later> queue_;
    unsigned long long eid_ = 0;
    double now_ = 0.0;
    bool now_is_int_ = true;
    std::vector<Proc> procs_;
    std::vector<int> stops_;
    int stop_hit_ = -1;
    bool oom_ = false;
    std::vector<Observed> obs_;

    // counts
    i64 drawn_ = 0, instances_ = 0, requests_ = 0, sessions_done_ = 0, live_ = 0;
    std::vector<double> ff_;
    std::vector<double> ttft_, ttft_t_;

    // engine state
    std::size_t capacity_ = 0;
    std::vector<std::array<double, 4>> rows_;
    std::vector<int> slot_rank_, slot_ev_, free_slots_;
    // The decoders, packed in descending order of remaining tokens, and the slot of each (an idle slot's remaining
    // tokens are +inf in the reference; nothing reads them).  Every decoder advances by the same steps and rounding
    // is monotone, so the order holds as they advance: the fewest tokens left is the last, the finished ones (at
    // most 1e-7 left) are the tail, and a join is placed by binary search.
    std::vector<double> drem_;
    std::vector<int> dslot_;
    std::vector<int> done_;
    std::vector<std::array<double, 4>> rank_sums_;
    std::vector<i64> rank_n_;
    std::vector<double> rank_time_;
    std::vector<char> dirty_;
    i64 n_ = 0;
    double t_last_ = 0.0, tau_ = 0.0;
    int timer_ = -1;   // the engine's pending timer event (-1: none), scheduled at timer_item_ outside the heap
    Item timer_item_{};
    std::vector<double> tpot_, tpot_w_, tpot_t_;
    i64 max_batch_ = 0;
    std::array<double, 4> args_{};  // G = 1: the step inputs behind tau
    std::vector<double> busy_;
    double pause_end_ = 0.0, paused_ = 0.0, stalled_s_ = 0.0;
    std::vector<double> scratch_;
    std::vector<int> segbuf_;
    std::vector<i64> tokbuf_;
};

}  // namespace lachesis
