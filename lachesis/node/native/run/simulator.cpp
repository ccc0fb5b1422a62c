// simulator._Run (simulator.hpp): each block names the Python it mirrors; the order of every scheduled event, every
// float operation and every memory call is the reference's.
#include "simulator.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace lachesis {

namespace {
inline double py_max(double a, double b) { return b > a ? b : a; }  // Python's max(a, b)
inline double py_min(double a, double b) { return b < a ? b : a; }  // Python's min(a, b)

template <class P, class C> void check_csr(const Span<P>& ptr, const Span<C>& col, std::size_t rows, const char* name) {
    if (ptr.size() != rows + 1 || (rows + 1 && (ptr[0] != 0 || std::size_t(ptr[rows]) != col.size())))
        throw std::invalid_argument(std::string("plan: ") + name + " is not a CSR row pointer over its column");
    for (std::size_t i = 0; i < rows; ++i)
        if (ptr[i + 1] < ptr[i]) throw std::invalid_argument(std::string("plan: ") + name + " decreases");
}
}  // namespace

void PlanRequests::check() const {
    const std::size_t n = t_user.size();
    if (t_tools.size() != n || t_obs.size() != n || out.size() != n || r_sum.size() != n)
        throw std::invalid_argument("plan: the per-request columns differ in length");
    check_csr(w_ptr, w_seg, n, "w_ptr");
    check_csr(r_ptr, r_seg, n, "r_ptr");
    check_csr(ca_ptr, ca_seg, n, "ca_ptr");
    check_csr(ce_ptr, ce_seg, n, "ce_ptr");
    check_csr(kid_ptr, kid_agent, n, "kid_ptr");
    check_csr(agent_ptr, agent_req, agent_ptr.size() ? agent_ptr.size() - 1 : 0, "agent_ptr");
    if (root_ptr.size() < 1) throw std::invalid_argument("plan: root_ptr is empty");
    check_csr(root_ptr, root_agent, root_ptr.size() - 1, "root_ptr");
    if (w_tok.size() != w_seg.size() || r_tok.size() != r_seg.size() || r_tok_f.size() != r_seg.size())
        throw std::invalid_argument("plan: a request's segments and tokens differ in length");
}

NodeRun::NodeRun(std::shared_ptr<const PlanRequests> plan, StepModel step, RunSpec spec, std::vector<NodeMemory*> mems)
    : plan_(std::move(plan)), P_(*plan_), step_(std::move(step)), R_(std::move(spec)), mems_(std::move(mems)),
      env_(*this), engine_(env_, step_, R_.ranks, R_.first_warmup, std::size_t(R_.decode_capacity)) {
    if (int(mems_.size()) != R_.ranks) throw std::invalid_argument("NodeRun: one memory per rank");
    P_.check();
    const int G = R_.ranks;
    const i64 slots = R_.n_sessions * G;
    if (i64(R_.firsts.size()) != slots || i64(R_.phases.size()) != slots)
        throw std::invalid_argument("NodeRun: one first session and phase per slot");
    if (R_.order.empty()) throw std::invalid_argument("NodeRun: an empty cycle of sessions");
    const int n_classes = mems_[0]->classes().n();
    // _Run.start: the windows' markers, the slots, the windows' samplers; then the windows' stops
    obs_.resize(R_.windows.size());
    for (Observed& o : obs_) o.n_classes = n_classes;
    for (std::size_t k = 0; k < R_.windows.size(); ++k) {
        Proc p;
        p.kind = P_MARKER;
        p.a = int(k);
        start(std::move(p));
    }
    for (i64 i = 0; i < slots; ++i) {
        Proc p;
        p.kind = P_SLOT;
        p.pos = R_.firsts[std::size_t(i)];
        p.phase = R_.phases[std::size_t(i)];
        p.rank = int(i % G);
        start(std::move(p));
    }
    for (std::size_t k = 0; k < R_.windows.size(); ++k) {
        Proc p;
        p.kind = P_SAMPLER;
        p.a = int(k);
        start(std::move(p));
    }
    for (const RunWindow& w : R_.windows) stops_.push_back(env_.stop_at(w.duration_s));
}

bool NodeRun::calls_python() const {
    for (const NodeMemory* m : mems_)
        if (m->calls_python()) return true;
    return false;
}

int NodeRun::start(Proc p) {
    const int pid = int(procs_.size());
    procs_.push_back(std::move(p));
    return env_.process(pid);
}

void NodeRun::run_window(int k) {
    // _Run.finish_window: run_until(stop k) (running out of memory ends the run), then the window's last sample
    if (!oom_) {
        try {
            env_.run(stops_[std::size_t(k)]);
        } catch (const OutOfMemory&) {
            oom_ = true;
        }
    }
    sample(obs_[std::size_t(k)]);
}

int NodeRun::step(int pid) {
    switch (procs_[std::size_t(pid)].kind) {
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
    // _Run.wait: a timeout of d s, of which the instance's remaining fast-forward is skipped
    const double left = ff(inst);
    if (left > 0) {
        const double skip = py_min(left, d);
        ff(inst) = left - skip;
        d -= skip;
    }
    return d > 0 ? env_.timeout(d) : -1;
}

// _Run.slot
int NodeRun::slot_step(int pid) {
    if (procs_[std::size_t(pid)].pc == 1) {
        Proc& p = procs_[std::size_t(pid)];
        mems_[std::size_t(p.rank)]->session_end(p.inst, env_.now());
        ff(p.inst) = 0.0;
        sessions_done_ += 1;
        live_ -= 1;
    }
    Proc& p = procs_[std::size_t(pid)];
    int s;
    if (p.first) {
        instances_ += 1;
        p.inst = instances_;
        s = int(p.pos);
        ff(p.inst) = p.phase;
        p.first = false;
        mems_[std::size_t(p.rank)]->session_start(p.inst, s, env_.now() - p.phase);
    } else {
        s = int(R_.order[std::size_t(drawn_ % i64(R_.order.size()))]);
        drawn_ += 1;
        instances_ += 1;
        p.inst = instances_;
        mems_[std::size_t(p.rank)]->session_start(p.inst, s, env_.now());
    }
    live_ += 1;
    const i64 inst = p.inst;
    const int rank = p.rank;
    std::vector<int> agents;
    for (i64 j = P_.root_ptr[std::size_t(s)]; j < P_.root_ptr[std::size_t(s) + 1]; ++j) {
        Proc a;
        a.kind = P_AGENT;
        a.inst = inst;
        a.a = P_.root_agent[std::size_t(j)];
        a.rank = rank;
        a.pos = P_.agent_ptr[std::size_t(a.a)];
        agents.push_back(start(std::move(a)));
    }
    procs_[std::size_t(pid)].pc = 1;
    return env_.all_of(agents);
}

// _Run.agent: one agent's requests in order
int NodeRun::agent_step(int pid) {
    NodeMemory& mem = *mems_[std::size_t(procs_[std::size_t(pid)].rank)];
    for (;;) {
        Proc& p = procs_[std::size_t(pid)];
        const std::size_t q = std::size_t(p.q);
        switch (p.pc) {
            case 0: {  // next request: the user's delay
                if (p.pos >= P_.agent_ptr[std::size_t(p.a) + 1]) return -1;
                p.q = P_.agent_req[std::size_t(p.pos)];
                p.pos += 1;
                p.pc = 1;
                const double t_user = P_.t_user[std::size_t(p.q)];
                if (t_user > 0) {
                    const int w = wait(p.inst, t_user);
                    if (w >= 0) return w;
                }
                break;
            }
            case 1: {  // arrival: closes, writes (through the policy and the allocator), reads, landing
                const i64 inst = p.inst;
                const double now = env_.now();
                for (i64 j = P_.ca_ptr[q]; j < P_.ca_ptr[q + 1]; ++j) mem.close(inst, P_.ca_seg[std::size_t(j)], now);
                i64 h_w = 0, f_w = 0;
                const i64 w0 = P_.w_ptr[q], w1 = P_.w_ptr[q + 1];
                if (w1 > w0) {
                    const auto hf = mem.write_request(inst, P_.w_seg.data() + w0, P_.w_tok.data() + w0,
                                                      std::size_t(w1 - w0), now);
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
                Proc& pp = procs_[std::size_t(pid)];
                const i64 tot = h_w + f_w;
                const double hbf_share = tot > 0 ? double(f_w) / double(tot) : 0.0;
                const i64 pre = std::max<i64>(tot - P_.out[q], 0);
                double land = (R_.land && pre) ? R_.landing(double(pre) * (1 - hbf_share), double(pre) * hbf_share) : 0.0;
                pp.ctx_h = ctx_h;
                pp.ctx_f = ctx_f;
                pp.hbf_share = hbf_share;
                pp.tot = tot;
                pp.pc = 2;
                if (land > 0) {
                    if (R_.stall && ff(inst) <= 0) land = engine_.stall(pp.rank, land);  // the group waits (§5.1)
                    procs_[std::size_t(pid)].land = land;
                    return env_.timeout(land);
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
                if (env_.now() > R_.first_warmup) {
                    double first_step;
                    const double ctx_h = p.ctx_h, ctx_f = p.ctx_f, land = p.land;
                    const int ev = engine_.join_measured(double(out), ctx_h, ctx_f, flush, hbmw, p.rank, &first_step);
                    ttft_.push_back(R_.ttft_ref + land + first_step);
                    ttft_t_.push_back(env_.now());
                    return ev;
                }
                return engine_.join(double(out), p.ctx_h, p.ctx_f, flush, hbmw, p.rank);
            }
            case 3: {  // done: closes at its end, then tools and the sub-agents it spawned
                requests_ += 1;
                const i64 inst = p.inst;
                const double now = env_.now();
                for (i64 j = P_.ce_ptr[q]; j < P_.ce_ptr[q + 1]; ++j) mem.close(inst, P_.ce_seg[std::size_t(j)], now);
                const double t_tools = P_.t_tools[q], t_obs = P_.t_obs[q];
                if (P_.kid_ptr[q + 1] > P_.kid_ptr[q]) {
                    std::vector<int> kids;
                    const int rank = procs_[std::size_t(pid)].rank;
                    for (i64 j = P_.kid_ptr[q]; j < P_.kid_ptr[q + 1]; ++j) {
                        Proc a;
                        a.kind = P_AGENT;
                        a.inst = inst;
                        a.a = P_.kid_agent[std::size_t(j)];
                        a.rank = rank;
                        a.pos = P_.agent_ptr[std::size_t(a.a)];
                        const int d = start(std::move(a));
                        env_.hold(d);
                        kids.push_back(d);
                    }
                    procs_[std::size_t(pid)].kids = std::move(kids);
                    procs_[std::size_t(pid)].pc = 4;
                    if (t_tools > 0) {
                        const int w = wait(inst, t_tools);
                        if (w >= 0) return w;
                    }
                    break;
                }
                procs_[std::size_t(pid)].pc = 0;
                if (t_tools + t_obs > 0) {
                    const int w = wait(inst, t_tools + t_obs);
                    if (w >= 0) return w;
                }
                break;
            }
            case 4: {  // wait for the sub-agents
                std::vector<int> kids = std::move(p.kids);
                p.kids = std::vector<int>();
                p.pc = 5;
                const int c = env_.all_of(kids);
                for (int d : kids) env_.release(d);
                return c;
            }
            case 5: {  // their observation
                p.pc = 0;
                const double t_obs = P_.t_obs[q];
                if (t_obs > 0) {
                    const int w = wait(p.inst, t_obs);
                    if (w >= 0) return w;
                }
                break;
            }
        }
    }
}

// _Observer.marker
int NodeRun::marker_step(int pid) {
    Proc& p = procs_[std::size_t(pid)];
    if (p.pc == 0) {
        p.pc = 1;
        return env_.timeout(R_.windows[std::size_t(p.a)].warmup_s);
    }
    i64 ev = 0;
    for (NodeMemory* m : mems_) m->mark(p.a);
    for (NodeMemory* m : mems_) ev += m->evicted_blocks();
    obs_[std::size_t(p.a)].evicted_at_warmup = ev;
    return -1;
}

// _Observer.sampler
int NodeRun::sampler_step(int pid) {
    const int k = procs_[std::size_t(pid)].a;
    sample(obs_[std::size_t(k)]);
    point(obs_[std::size_t(k)]);
    const RunWindow& w = R_.windows[std::size_t(k)];
    return env_.timeout(w.duration_s / w.n_samples);
}

void NodeRun::sample(Observed& o) {
    // _Run.sample: (time, sessions live) + Memory.snapshot, per GPU (the ranks' mean)
    std::array<double, 8> s{};
    s[0] = env_.now();
    const int G = R_.ranks;
    if (G == 1) {
        s[1] = double(live_);
        const auto m = mems_[0]->snapshot();
        for (int i = 0; i < 6; ++i) s[std::size_t(2 + i)] = m[std::size_t(i)];
    } else {
        s[1] = double(live_) / double(G);
        std::array<double, 6> acc{};
        for (NodeMemory* mem : mems_) {
            const auto m = mem->snapshot();
            for (std::size_t i = 0; i < 6; ++i) acc[i] = acc[i] + m[i];
        }
        for (std::size_t i = 0; i < 6; ++i) s[2 + i] = acc[i] / double(G);
    }
    o.samples.push_back(s);
    o.sample_int_time.push_back(env_.now_is_int() ? 1 : 0);
}

void NodeRun::point(Observed& o) {
    // _Run.sample_operating_point
    const std::size_t base = o.points.size();
    o.points.resize(base + 2 + std::size_t(o.n_classes), 0.0);
    double* p = o.points.data() + base;
    p[0] = env_.now();
    const double G = double(R_.ranks);
    p[1] = engine_.kv_read_bytes() / G;
    int present = 0;
    for (NodeMemory* m : mems_) {
        for (auto& [c, t] : m->live_tokens()) {
            p[2 + c] = p[2 + c] + double(t) * R_.bytes_per_token / G;
            present |= 1 << c;
        }
    }
    o.point_classes.push_back(present);
}

}  // namespace lachesis
