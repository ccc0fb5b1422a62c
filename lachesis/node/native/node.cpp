// The decode node's run, native (node.hpp).  Each block names the Python function it mirrors; the
// order of every scheduled event, every float operation and every memory call is the reference's.
#include "node.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace lachesis {

namespace {
constexpr int N_INPUTS = 6;  // step_cost._INPUTS
constexpr double INF = std::numeric_limits<double>::infinity();

inline double clamp0(double x) { return x < 0.0 ? 0.0 : x; }  // decode: "0.0 if x < 0.0 else x"
inline double py_max(double a, double b) { return b > a ? b : a; }  // Python max(a, b)
inline double py_min(double a, double b) { return b < a ? b : a; }  // Python min(a, b)

void check_step_inputs(double b, double h, double f, double fl, double hw) {
    // step_cost.StepModel.check_tiers, naming the argument
    const char* names[5] = {"batch", "kv_hbm_bytes", "kv_hbf_bytes", "hbf_flush_bytes", "hbm_write_bytes"};
    double v[5] = {b, h, f, fl, hw};
    for (int i = 0; i < 5; ++i)
        if (!(0.0 <= v[i] && v[i] < INF))
            throw std::invalid_argument(std::string("decode step: ") + names[i] + " must be finite and >= 0, got " +
                                        std::to_string(v[i]));
}
}  // namespace

// step_cost.dot_rows, then the lane maximum per operator and step_cost.sum_in_order over operators
double StepRows::eval(const double* x, std::vector<double>& t) const {
    const std::size_t rows = std::size_t(lanes) * std::size_t(n_ops);
    t.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) t[r] = cols[r] * x[0];
    for (int k = 1; k < N_INPUTS; ++k) {
        const double* c = cols.data() + std::size_t(k) * rows;
        for (std::size_t r = 0; r < rows; ++r) t[r] = t[r] + c[r] * x[k];
    }
    double acc = 0.0;
    for (int i = 0; i < n_ops; ++i) {
        double m = t[i];
        for (int k = 1; k < lanes; ++k) {
            double v = t[std::size_t(k) * n_ops + i];
            m = std::isnan(m) ? m : (std::isnan(v) || v > m ? v : m);  // np.maximum
        }
        acc = i == 0 ? m : acc + m;
    }
    return acc;
}

// StepModel._experts for a float batch
double StepSpec::experts(double b) const {
    if (log_miss == -INF) return n_local * (b > 0 ? 1.0 : 0.0);
    return (-n_local) * std::expm1(b * log_miss);
}

NodeRun::NodeRun(PlanArrays plan, StepSpec step, LandingSpec landing, RunSpec spec, std::vector<NodeMemory*> mems)
    : P_(std::move(plan)), S_(std::move(step)), L_(landing), R_(std::move(spec)), mems_(std::move(mems)) {
    if (int(mems_.size()) != R_.ranks) throw std::invalid_argument("NodeRun: one memory per rank");
    const int G = R_.ranks;
    // DecodeEngine.__init__ (capacity 256)
    const int cap = 256;
    capacity_ = cap;
    rows_.assign(cap, {0.0, 0.0, 0.0, 0.0});
    slot_rank_.assign(cap, 0);
    slot_ev_.assign(cap, -1);
    for (int i = cap - 1; i >= 0; --i) free_slots_.push_back(i);
    rank_sums_.assign(G, {0.0, 0.0, 0.0, 0.0});
    rank_n_.assign(G, 0);
    rank_time_.assign(G, 0.0);
    dirty_.assign(G, 0);
    busy_.assign(G, 0.0);
    // _Run.start: the windows' markers, the slots, the windows' samplers; then the windows' stops
    obs_.resize(R_.windows.size());
    for (std::size_t k = 0; k < R_.windows.size(); ++k) {
        Proc p; p.kind = P_MARKER; p.a = int(k);
        process(std::move(p));
    }
    const i64 slots = R_.n_sessions * G;
    for (i64 i = 0; i < slots; ++i) {
        Proc p; p.kind = P_SLOT; p.pos = R_.firsts[i]; p.phase = R_.phases[i]; p.rank = int(i % G);
        process(std::move(p));
    }
    for (std::size_t k = 0; k < R_.windows.size(); ++k) {
        Proc p; p.kind = P_SAMPLER; p.a = int(k);
        process(std::move(p));
    }
    for (const RunWindow& w : R_.windows) {  // simulator._stop_at
        int e = new_event();
        E_[e].triggered = true;
        E_[e].recyclable = false;
        schedule(e, URGENT, w.duration_s - now_);
        stops_.push_back(e);
    }
}

// ------------------------------------------------------------------------------------------------
// The event loop: simpy's Environment.step, Event.succeed, Timeout, Process, AllOf
// ------------------------------------------------------------------------------------------------

int NodeRun::new_event() {
    int e;
    if (!free_ev_.empty()) {
        e = free_ev_.back();
        free_ev_.pop_back();
        Ev& v = E_[e];
        v.cbs.clear();
        v.triggered = v.processed = v.defused = false;
        v.ok = true;
        v.holds = v.cond_need = v.cond_count = 0;
        v.recyclable = true;
        v.err = nullptr;
    } else {
        e = int(E_.size());
        E_.emplace_back();
    }
    return e;
}

void NodeRun::schedule(int ev, int prio, double delay, bool zero_delay) {
    queue_.push(Item{now_ + delay, prio, eid_++, ev, zero_delay && now_is_int_});
}

int NodeRun::process(Proc p) {
    // Process.__init__: its Initialize event, urgent, resumes it
    int done = new_event();
    p.done = done;
    int pid = int(procs_.size());
    procs_.push_back(std::move(p));
    int init = new_event();
    E_[init].triggered = true;
    E_[init].cbs.push_back({CB_RESUME, pid});
    schedule(init, URGENT, 0.0, true);
    return done;
}

int NodeRun::all_of(const std::vector<int>& events) {
    // Condition.__init__ (all_events): a processed event is checked now, a pending one on its processing
    int c = new_event();
    E_[c].cond_need = int(events.size());
    for (int e : events) {
        if (E_[e].processed) check(c, e);
        else E_[e].cbs.push_back({CB_CHECK, c});
    }
    return c;
}

void NodeRun::release(int ev) {
    Ev& v = E_[ev];
    if (--v.holds == 0 && v.processed && v.recyclable) free_ev_.push_back(ev);
}

void NodeRun::check(int cond, int ev) {
    // Condition._check
    if (E_[cond].triggered) return;
    E_[cond].cond_count += 1;
    if (!E_[ev].ok) {
        E_[ev].defused = true;
        E_[cond].triggered = true;
        E_[cond].ok = false;
        E_[cond].err = E_[ev].err;
        E_[cond].recyclable = false;
        schedule(cond, NORMAL, 0.0, true);
    } else if (E_[cond].cond_count == E_[cond].cond_need) {
        succeed(cond);
    }
}

void NodeRun::resume(int pid, int ev) {
    // Process._resume: send the event's value (or throw its failure) until the process yields a pending event
    int cur = ev;
    for (;;) {
        int next;
        if (!E_[cur].ok) {  // thrown into a generator that does not catch it: the process fails with it
            E_[cur].defused = true;
            int done = procs_[pid].done;
            E_[done].triggered = true;
            E_[done].ok = false;
            E_[done].err = E_[cur].err;
            E_[done].recyclable = false;
            schedule(done, NORMAL, 0.0, true);
            return;
        }
        try {
            next = step(pid);
        } catch (...) {
            int done = procs_[pid].done;
            E_[done].triggered = true;
            E_[done].ok = false;
            E_[done].err = std::current_exception();
            E_[done].recyclable = false;
            schedule(done, NORMAL, 0.0, true);
            return;
        }
        if (next < 0) {
            int done = procs_[pid].done;
            E_[done].triggered = true;
            E_[done].ok = true;
            schedule(done, NORMAL, 0.0, true);
            procs_[pid].kids = std::vector<int>();
            return;
        }
        if (!E_[next].processed) {
            E_[next].cbs.push_back({CB_RESUME, pid});
            return;
        }
        cur = next;
    }
}

void NodeRun::run_window(int k) {
    // _Run.run_until(stop k), then the window's last sample (simulate_windows)
    if (!oom_) {
        E_[stops_[k]].cbs.push_back({CB_STOP, k});
        std::vector<Cb> cbs;
        stop_hit_ = -1;
        while (stop_hit_ < 0) {
            Item it;
            if (timer_ >= 0 && (queue_.empty() || Later()(queue_.top(), timer_item_))) {
                it = timer_item_;  // the engine's timer comes first
                timer_ = -1;
            } else {
                if (queue_.empty()) throw std::runtime_error("No scheduled events left but \"until\" event was not triggered");
                it = queue_.top();
                queue_.pop();
            }
            now_ = it.t;
            now_is_int_ = it.int_time;
            const int ev = it.ev;
            cbs.clear();
            cbs.swap(E_[ev].cbs);
            E_[ev].processed = true;
            for (const Cb& cb : cbs) {
                switch (cb.kind) {
                    case CB_RESUME: resume(cb.target, ev); break;
                    case CB_CHECK: check(cb.target, ev); break;
                    case CB_TIMER: on_timer(ev); break;
                    case CB_STOP: stop_hit_ = cb.target; break;
                }
            }
            if (!E_[ev].ok && !E_[ev].defused) {  // Environment.step raises the failure
                try {
                    std::rethrow_exception(E_[ev].err);
                } catch (const OutOfMemory&) {
                    oom_ = true;  // _Run.run_until: running out of memory ends the run
                    break;
                }
            }
            if (E_[ev].recyclable && E_[ev].holds == 0) {
                cbs.clear();
                cbs.swap(E_[ev].cbs);  // keep the list's storage for reuse
                free_ev_.push_back(ev);
            }
        }
    }
    sample(obs_[k]);
}

int NodeRun::step(int pid) {
    switch (procs_[pid].kind) {
        case P_SLOT: return slot_step(pid);
        case P_AGENT: return agent_step(pid);
        case P_MARKER: return marker_step(pid);
        default: return sampler_step(pid);
    }
}

double& NodeRun::ff(i64 inst) {
    if (inst >= i64(ff_.size())) ff_.resize(std::size_t(inst) * 2 + 16, 0.0);
    return ff_[std::size_t(inst)];
}

int NodeRun::wait(i64 inst, double d) {
    // _Run.wait
    double left = ff(inst);
    if (left > 0) {
        double skip = py_min(left, d);
        ff(inst) = left - skip;
        d -= skip;
    }
    return d > 0 ? timeout(d) : -1;
}

// _Run.slot
int NodeRun::slot_step(int pid) {
    if (procs_[pid].pc == 1) {
        Proc& p = procs_[pid];
        mems_[p.rank]->session_end(p.inst, now_);
        ff(p.inst) = 0.0;
        sessions_done_ += 1;
        live_ -= 1;
    }
    Proc& p = procs_[pid];
    int s;
    if (p.first) {
        instances_ += 1;
        p.inst = instances_;
        s = int(p.pos);
        ff(p.inst) = p.phase;
        p.first = false;
        mems_[p.rank]->session_start(p.inst, s, now_ - p.phase);
    } else {
        s = int(R_.order[std::size_t(drawn_ % i64(R_.order.size()))]);
        drawn_ += 1;
        instances_ += 1;
        p.inst = instances_;
        mems_[p.rank]->session_start(p.inst, s, now_);
    }
    live_ += 1;
    const i64 inst = p.inst;
    const int rank = p.rank;
    std::vector<int> agents;
    for (i64 j = P_.root_ptr[s]; j < P_.root_ptr[s + 1]; ++j) {
        Proc a; a.kind = P_AGENT; a.inst = inst; a.a = P_.root_agent[j]; a.rank = rank; a.pos = P_.agent_ptr[a.a];
        agents.push_back(process(std::move(a)));
    }
    procs_[pid].pc = 1;
    return all_of(agents);
}

// _Run.agent: one agent's requests in order
int NodeRun::agent_step(int pid) {
    NodeMemory& mem = *mems_[procs_[pid].rank];
    for (;;) {
        Proc& p = procs_[pid];
        const int q = p.q;
        switch (p.pc) {
            case 0: {  // next request: the user's delay
                if (p.pos >= P_.agent_ptr[p.a + 1]) return -1;
                p.q = P_.agent_req[std::size_t(p.pos)];
                p.pos += 1;
                p.pc = 1;
                const double t_user = P_.t_user[p.q];
                if (t_user > 0) {
                    int w = wait(p.inst, t_user);
                    if (w >= 0) return w;
                }
                break;
            }
            case 1: {  // arrival: closes, writes, reads, landing
                const i64 inst = p.inst;
                for (i64 j = P_.ca_ptr[q]; j < P_.ca_ptr[q + 1]; ++j) mem.close(inst, P_.ca_seg[j], now_);
                i64 h_w = 0, f_w = 0;
                const i64 w0 = P_.w_ptr[q], w1 = P_.w_ptr[q + 1];
                if (w1 > w0) {
                    auto hf = mem.write_request(inst, P_.w_seg.data() + w0, P_.w_tok.data() + w0, std::size_t(w1 - w0), now_);
                    h_w = hf.first;
                    f_w = hf.second;
                }
                double ctx_h = 0.0, ctx_f = 0.0;
                const i64 r0 = P_.r_ptr[q], r1 = P_.r_ptr[q + 1];
                if (r1 > r0) {
                    ctx_h = mem.hbm_tokens(inst, P_.r_seg.data() + r0, P_.r_tok_f.data() + r0, P_.r_tok.data() + r0,
                                           std::size_t(r1 - r0)) * R_.bytes_per_token;
                    ctx_f = P_.r_sum[q] * R_.bytes_per_token - ctx_h;
                }
                Proc& pp = procs_[pid];
                const i64 tot = h_w + f_w;
                const double hbf_share = tot > 0 ? double(f_w) / double(tot) : 0.0;
                const i64 out = P_.out[q];
                const i64 pre = std::max<i64>(tot - out, 0);
                double land = (R_.land && pre) ? landing(double(pre) * (1 - hbf_share), double(pre) * hbf_share) : 0.0;
                pp.ctx_h = ctx_h;
                pp.ctx_f = ctx_f;
                pp.hbf_share = hbf_share;
                pp.tot = tot;
                pp.pc = 2;
                if (land > 0) {
                    if (R_.stall && ff(inst) <= 0) land = stall(pp.rank, land);  // the group waits (§5.1)
                    procs_[pid].land = land;
                    return timeout(land);
                }
                pp.land = land;
                break;
            }
            case 2: {  // decode
                const double bpt = R_.bytes_per_token;
                const double flush = p.hbf_share * bpt;
                const double hbmw = p.tot > 0 ? (1 - p.hbf_share) * bpt : 0.0;
                const i64 out = P_.out[q];
                p.pc = 3;
                double& left = ff(p.inst);
                if (left > 0) {  // fast-forward: this request's decode happened before the start
                    left = py_max(left - double(out) * R_.nominal_tpot, 0.0);
                    break;
                }
                if (now_ > R_.first_warmup) {
                    double first_step;
                    const double ctx_h = p.ctx_h, ctx_f = p.ctx_f, land = p.land;
                    const int rank = p.rank;
                    int ev = join_measured(double(out), ctx_h, ctx_f, flush, hbmw, rank, &first_step);
                    ttft_.push_back(R_.ttft_ref + land + first_step);
                    ttft_t_.push_back(now_);
                    return ev;
                }
                return join(double(out), p.ctx_h, p.ctx_f, flush, hbmw, p.rank);
            }
            case 3: {  // done: closes at its end, then tools and the sub-agents it spawned
                requests_ += 1;
                const i64 inst = p.inst;
                for (i64 j = P_.ce_ptr[q]; j < P_.ce_ptr[q + 1]; ++j) mem.close(inst, P_.ce_seg[j], now_);
                const double t_tools = P_.t_tools[q], t_obs = P_.t_obs[q];
                if (P_.kid_ptr[q + 1] > P_.kid_ptr[q]) {
                    std::vector<int> kids;
                    const int rank = procs_[pid].rank;
                    for (i64 j = P_.kid_ptr[q]; j < P_.kid_ptr[q + 1]; ++j) {
                        Proc a; a.kind = P_AGENT; a.inst = inst; a.a = P_.kid_agent[j]; a.rank = rank;
                        a.pos = P_.agent_ptr[a.a];
                        int d = process(std::move(a));
                        E_[d].holds += 1;
                        kids.push_back(d);
                    }
                    procs_[pid].kids = std::move(kids);
                    procs_[pid].pc = 4;
                    if (t_tools > 0) {
                        int w = wait(inst, t_tools);
                        if (w >= 0) return w;
                    }
                    break;
                }
                procs_[pid].pc = 0;
                if (t_tools + t_obs > 0) {
                    int w = wait(inst, t_tools + t_obs);
                    if (w >= 0) return w;
                }
                break;
            }
            case 4: {  // wait for the sub-agents
                std::vector<int> kids = std::move(p.kids);
                p.kids = std::vector<int>();
                p.pc = 5;
                int c = all_of(kids);
                for (int d : kids) release(d);
                return c;
            }
            case 5: {  // their observation
                p.pc = 0;
                const double t_obs = P_.t_obs[q];
                if (t_obs > 0) {
                    int w = wait(p.inst, t_obs);
                    if (w >= 0) return w;
                }
                break;
            }
        }
    }
}

// _Observer.marker
int NodeRun::marker_step(int pid) {
    Proc& p = procs_[pid];
    if (p.pc == 0) {
        p.pc = 1;
        return timeout(R_.windows[p.a].warmup_s);
    }
    i64 ev = 0;
    for (NodeMemory* m : mems_) m->mark(p.a);
    for (NodeMemory* m : mems_) ev += m->evicted_blocks();
    obs_[p.a].evicted_at_warmup = ev;
    return -1;
}

// _Observer.sampler
int NodeRun::sampler_step(int pid) {
    const int k = procs_[pid].a;
    sample(obs_[k]);
    point(obs_[k]);
    const RunWindow& w = R_.windows[k];
    return timeout(w.duration_s / w.n_samples);
}

void NodeRun::sample(Observed& o) {
    // _Run.sample: (time, sessions live) + Memory.snapshot, per GPU (the ranks' mean)
    std::array<double, 8> s{};
    s[0] = now_;
    const int G = R_.ranks;
    if (G == 1) {
        s[1] = double(live_);
        auto m = mems_[0]->snapshot();
        for (int i = 0; i < 6; ++i) s[2 + i] = m[i];
    } else {
        s[1] = double(live_) / double(G);
        std::array<double, 6> acc{};
        for (NodeMemory* mem : mems_) {
            auto m = mem->snapshot();
            for (int i = 0; i < 6; ++i) acc[i] = acc[i] + m[i];
        }
        for (int i = 0; i < 6; ++i) s[2 + i] = acc[i] / double(G);
    }
    o.samples.push_back(s);
    o.sample_int_time.push_back(now_is_int_ ? 1 : 0);
}

void NodeRun::point(Observed& o) {
    // _Run.sample_operating_point
    std::array<double, 2 + N_CLASSES> p{};
    p[0] = now_;
    const double G = double(R_.ranks);
    p[1] = kv_read_bytes() / G;
    int present = 0;
    for (NodeMemory* m : mems_) {
        for (auto& [c, t] : m->live_tokens()) {
            p[2 + c] = p[2 + c] + double(t) * R_.bytes_per_token / G;
            present |= 1 << c;
        }
    }
    o.points.push_back(p);
    o.point_classes.push_back(present);
}

// kv_landing.landing_fn
double NodeRun::landing(double hbm_tokens, double hbf_tokens) const {
    const double bw_hbm = L_.bw_hbm, bw_hbf = L_.bw_hbf, kb = L_.kv_bytes_per_token;
    if (!(bw_hbm > 0 && bw_hbf > 0 && 0 <= hbm_tokens && hbm_tokens < INF && 0 <= hbf_tokens && hbf_tokens < INF)) {
        auto one = [&](double tokens, double bw, const char* tier) {  // kv_landing.kv_landing_time
            if (!(0 <= tokens && tokens < INF)) throw std::invalid_argument("kv_landing_time: tokens must be finite and >= 0");
            if (bw > 0) return tokens * kb / bw;
            if (tokens > 0) throw std::invalid_argument(std::string(tier) + " landing: bytes routed to a tier with zero bandwidth");
            return 0.0;
        };
        double t1 = hbm_tokens ? one(hbm_tokens, bw_hbm, "hbm") : 0.0;
        double t2 = hbf_tokens ? one(hbf_tokens, bw_hbf, "hbf") : 0.0;
        return py_max(t1, t2);
    }
    double t1 = hbm_tokens ? hbm_tokens * kb / bw_hbm : 0.0;
    double t2 = hbf_tokens ? hbf_tokens * kb / bw_hbf : 0.0;
    return t2 > t1 ? t2 : t1;
}

// ------------------------------------------------------------------------------------------------
// The decode engine: decode.DecodeEngine
// ------------------------------------------------------------------------------------------------

void NodeRun::grow() {
    const std::size_t n = capacity_;
    capacity_ = 2 * n;
    rows_.resize(2 * n, {0.0, 0.0, 0.0, 0.0});
    slot_ev_.resize(2 * n, -1);
    slot_rank_.resize(2 * n, 0);
    std::vector<int> fresh;
    for (std::size_t i = 2 * n; i-- > n;) fresh.push_back(int(i));
    fresh.insert(fresh.end(), free_slots_.begin(), free_slots_.end());
    free_slots_ = std::move(fresh);
}

void NodeRun::advance() {
    const double now = now_, t_last = t_last_;
    const double start = pause_end_ <= t_last ? t_last : py_min(pause_end_, now);
    const double dt = now - start;
    const double tau = tau_;
    if (tau > 0 && n_) {
        if (start > t_last) {
            paused_ += start - t_last;
            if (now > R_.first_warmup) stalled_s_ += start - t_last;
        }
        if (dt > 0) {
            const double steps = dt / tau;
            double* r = drem_.data();
            const std::size_t m = drem_.size();
            for (std::size_t k = 0; k < m; ++k) r[k] -= steps;  // +inf - steps stays +inf: only decoders change
            if (now > R_.first_warmup) {
                if (paused_ != 0.0) {
                    tpot_.push_back(tau + paused_);
                    tpot_w_.push_back(double(n_));
                    tpot_t_.push_back(now);
                }
                tpot_.push_back(tau);
                tpot_w_.push_back(steps * double(n_));
                tpot_t_.push_back(now);
            }
            paused_ = 0.0;
        }
    }
    t_last_ = now;
}

double NodeRun::one_step(double batch, double h, double f, double fl, double hw) {
    // step_cost.StepModel.scalar_fn's step
    check_step_inputs(batch, h, f, fl, hw);
    const double x[N_INPUTS] = {batch > 0 ? 1.0 : 0.0, batch, h, f, hw, S_.experts(batch)};
    return S_.all.eval(x, scratch_) + fl * S_.flush_per_byte;
}

double NodeRun::rank_step(double batch, double h, double f, double fl, double hw) {
    // step_cost.GroupStep.rank
    check_step_inputs(batch, h, f, fl, hw);
    const double x[N_INPUTS] = {batch > 0 ? 1.0 : 0.0, batch, h, f, hw, 0.0};
    return S_.own.eval(x, scratch_) + fl * S_.flush_per_byte;
}

double NodeRun::step_time() {
    const int G = R_.ranks;
    if (G == 1) {
        const auto& s = rank_sums_[0];
        args_ = {clamp0(s[0]), clamp0(s[1]), clamp0(s[2]), clamp0(s[3])};
        return one_step(double(n_), args_[0], args_[1], args_[2], args_[3]);
    }
    for (int r = 0; r < G; ++r) {
        if (!dirty_[r]) continue;
        if (rank_n_[r]) {
            const auto& s = rank_sums_[r];
            rank_time_[r] = rank_step(double(rank_n_[r]), clamp0(s[0]), clamp0(s[1]), clamp0(s[2]), clamp0(s[3]));
        } else {
            rank_sums_[r] = {0.0, 0.0, 0.0, 0.0};  // clear float drift
            rank_time_[r] = 0.0;
        }
        dirty_[r] = 0;
    }
    double m = rank_time_[0];
    for (int r = 1; r < G; ++r) if (rank_time_[r] > m) m = rank_time_[r];
    // GroupStep.experts at the group's mean batch
    double ex = 0.0;
    if (S_.group.n_ops) {
        const double b = double(n_) / double(G);
        const double x[N_INPUTS] = {b > 0 ? 1.0 : 0.0, b, 0.0, 0.0, 0.0, S_.experts(b)};
        ex = S_.group.eval(x, scratch_);
    }
    return m + ex;
}

void NodeRun::reschedule() {
    if (!n_) {
        tau_ = 0.0;
        for (auto& s : rank_sums_) s = {0.0, 0.0, 0.0, 0.0};
        std::fill(rank_time_.begin(), rank_time_.end(), 0.0);
        std::fill(dirty_.begin(), dirty_.end(), 0);
        drop_timer();
        return;
    }
    i64 batch = n_;
    if (R_.ranks > 1) batch = *std::max_element(rank_n_.begin(), rank_n_.end());
    if (batch > max_batch_) max_batch_ = batch;
    const double tau = tau_ = step_time();
    const double first = drem_.back();  // np.minimum.reduce (idle slots are +inf): the last, in descending order
    double delay = clamp0(first) * tau;
    if (pause_end_ > now_) delay += pause_end_ - now_;
    // The engine's timer: one at a time, beside the heap (its eid drawn as simpy draws it).  The reference leaves a
    // superseded timer scheduled, to do nothing when it comes due (on_timer returns at once); here it is dropped.
    int t = new_event();
    E_[t].triggered = true;
    E_[t].cbs.push_back({CB_TIMER, t});
    drop_timer();
    timer_item_ = Item{now_ + delay, NORMAL, eid_++, t, false};
    timer_ = t;
}

void NodeRun::drop_timer() {
    if (timer_ >= 0) free_ev_.push_back(timer_);  // never processed: nothing else holds it
    timer_ = -1;
}

void NodeRun::on_timer(int timer) {
    (void)timer;  // always the current one: a superseded timer is dropped (drop_timer)
    advance();
    done_.clear();
    std::size_t m = drem_.size();  // the finished decoders: those at <= 1e-7 tokens, the tail in descending order
    while (m > 0 && drem_[m - 1] <= 1e-7) done_.push_back(dslot_[--m]);
    drem_.resize(m);
    dslot_.resize(m);
    std::sort(done_.begin(), done_.end());  // ascending, as numpy's nonzero()
    for (int i : done_) {
        const auto row = rows_[i];
        const int r = slot_rank_[i];
        auto& s = rank_sums_[r];
        s[0] -= row[0];
        s[1] -= row[1];
        s[2] -= row[2];
        s[3] -= row[3];
        rank_n_[r] -= 1;
        dirty_[r] = 1;
        n_ -= 1;
        const int ev = slot_ev_[i];
        slot_ev_[i] = -1;
        free_slots_.push_back(i);
        succeed(ev);
    }
    reschedule();
}

double NodeRun::stall(int rank, double seconds) {
    advance();
    const double now = now_;
    const double end = busy_[rank] = py_max(busy_[rank], now) + seconds;
    if (end > pause_end_) {
        pause_end_ = end;
        if (n_) reschedule();
    }
    return end - now;
}

double NodeRun::kv_read_bytes() const {
    double acc = 0.0;
    for (const auto& s : rank_sums_) acc = acc + (py_max(s[0], 0.0) + py_max(s[1], 0.0));
    return acc;
}

int NodeRun::join(double tokens, double h, double f, double fl, double hw, int rank) {
    int ev = new_event();
    if (tokens <= 0) {
        succeed(ev);
        return ev;
    }
    advance();
    if (free_slots_.empty()) grow();
    const int i = free_slots_.back();
    free_slots_.pop_back();
    // after the decoders with at least as many tokens left (descending order; among equals the place is immaterial)
    const auto at = std::upper_bound(drem_.begin(), drem_.end(), tokens, std::greater<double>()) - drem_.begin();
    drem_.insert(drem_.begin() + at, tokens);
    dslot_.insert(dslot_.begin() + at, i);
    rows_[i] = {h, f, fl, hw};
    slot_rank_[i] = rank;
    auto& s = rank_sums_[rank];
    s[0] += h;
    s[1] += f;
    s[2] += fl;
    s[3] += hw;
    rank_n_[rank] += 1;
    dirty_[rank] = 1;
    n_ += 1;
    slot_ev_[i] = ev;
    reschedule();
    return ev;
}

int NodeRun::join_measured(double tokens, double h, double f, double fl, double hw, int rank, double* first_step) {
    if (R_.ranks > 1) {
        int ev = join(tokens, h, f, fl, hw, rank);
        *first_step = tau_;
        return ev;
    }
    const auto& s = rank_sums_[0];
    const std::array<double, 4> first = {clamp0(s[0]) + h, clamp0(s[1]) + f, clamp0(s[2]) + fl, clamp0(s[3]) + hw};
    const i64 n = n_ + 1;
    int ev = join(tokens, h, f, fl, hw, rank);
    if (n_ == n && args_[0] == first[0] && args_[1] == first[1] && args_[2] == first[2] && args_[3] == first[3]) {
        *first_step = tau_;
        return ev;
    }
    *first_step = one_step(double(n), first[0], first[1], first[2], first[3]);
    return ev;
}

}  // namespace lachesis
