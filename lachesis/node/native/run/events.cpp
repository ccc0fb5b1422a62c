// simpy's event loop (events.hpp).
#include "events.hpp"

#include <stdexcept>

namespace lachesis {

int Environment::new_event() {
    int e;
    if (!free_ev_.empty()) {
        e = free_ev_.back();
        free_ev_.pop_back();
        Ev& v = E_[std::size_t(e)];
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

void Environment::schedule(int ev, int prio, double delay, bool zero_delay) {
    queue_.push(Item{now_ + delay, prio, eid_++, ev, zero_delay && now_is_int_});
}

int Environment::process(int pid) {
    const int done = new_event();
    if (std::size_t(pid) >= done_.size()) done_.resize(std::size_t(pid) + 1, -1);
    done_[std::size_t(pid)] = done;
    const int init = new_event();  // Initialize: urgent, resumes the process
    E_[std::size_t(init)].triggered = true;
    E_[std::size_t(init)].cbs.push_back({CB_RESUME, pid});
    schedule(init, URGENT, 0.0, true);
    return done;
}

int Environment::all_of(const std::vector<int>& events) {
    // Condition.__init__ (all_events): a processed event is checked now, a pending one on its processing
    const int c = new_event();
    E_[std::size_t(c)].cond_need = int(events.size());
    for (int e : events) {
        if (E_[std::size_t(e)].processed) check(c, e);
        else E_[std::size_t(e)].cbs.push_back({CB_CHECK, c});
    }
    return c;
}

void Environment::release(int ev) {
    Ev& v = E_[std::size_t(ev)];
    if (--v.holds == 0 && v.processed && v.recyclable) free_ev_.push_back(ev);
}

int Environment::stop_at(double t) {
    const int e = new_event();
    E_[std::size_t(e)].triggered = true;
    E_[std::size_t(e)].recyclable = false;
    schedule(e, URGENT, t - now_);
    return e;
}

void Environment::check(int cond, int ev) {
    Ev& c = E_[std::size_t(cond)];
    if (c.triggered) return;
    c.cond_count += 1;
    Ev& e = E_[std::size_t(ev)];
    if (!e.ok) {
        e.defused = true;
        c.triggered = true;
        c.ok = false;
        c.err = e.err;
        c.recyclable = false;
        schedule(cond, NORMAL, 0.0, true);
    } else if (c.cond_count == c.cond_need) {
        succeed(cond);
    }
}

void Environment::fail_process(int pid, std::exception_ptr err) {
    const int done = done_[std::size_t(pid)];
    Ev& d = E_[std::size_t(done)];
    d.triggered = true;
    d.ok = false;
    d.err = std::move(err);
    d.recyclable = false;
    schedule(done, NORMAL, 0.0, true);
}

void Environment::resume(int pid, int ev) {
    // send the event's value (or throw its failure) until the process yields a pending event
    int cur = ev;
    for (;;) {
        if (!E_[std::size_t(cur)].ok) {  // thrown into a generator that does not catch it: the process fails with it
            E_[std::size_t(cur)].defused = true;
            fail_process(pid, E_[std::size_t(cur)].err);
            return;
        }
        int next;
        try {
            next = host_.step(pid);
        } catch (...) {
            fail_process(pid, std::current_exception());
            return;
        }
        if (next < 0) {
            const int done = done_[std::size_t(pid)];
            E_[std::size_t(done)].triggered = true;
            E_[std::size_t(done)].ok = true;
            schedule(done, NORMAL, 0.0, true);
            return;
        }
        if (!E_[std::size_t(next)].processed) {
            E_[std::size_t(next)].cbs.push_back({CB_RESUME, pid});
            return;
        }
        cur = next;
    }
}

void Environment::set_timer(double delay) {
    const int t = new_event();
    E_[std::size_t(t)].triggered = true;
    E_[std::size_t(t)].cbs.push_back({CB_TIMER, t});
    drop_timer();
    timer_item_ = Item{now_ + delay, NORMAL, eid_++, t, false};
    timer_ = t;
}

void Environment::drop_timer() {
    if (timer_ >= 0) free_ev_.push_back(timer_);  // never processed: nothing else holds it
    timer_ = -1;
}

void Environment::run(int until) {
    E_[std::size_t(until)].cbs.push_back({CB_STOP, until});
    std::vector<Cb> cbs;
    stopped_ = false;
    while (!stopped_) {
        if ((++count_ & (INTERRUPT_EVERY - 1)) == 0 && interrupt_check) interrupt_check();
        Item it;
        if (timer_ >= 0 && (queue_.empty() || Later()(queue_.top(), timer_item_))) {
            it = timer_item_;  // the side timer comes first
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
        cbs.swap(E_[std::size_t(ev)].cbs);
        E_[std::size_t(ev)].processed = true;
        for (const Cb& cb : cbs) {
            switch (cb.kind) {
                case CB_RESUME: resume(cb.target, ev); break;
                case CB_CHECK: check(cb.target, ev); break;
                case CB_TIMER: host_.on_timer(); break;
                case CB_STOP: stopped_ = true; break;
            }
        }
        const Ev& e = E_[std::size_t(ev)];
        if (!e.ok && !e.defused) std::rethrow_exception(e.err);  // Environment.step raises the failure
        if (e.recyclable && e.holds == 0) {
            cbs.clear();
            cbs.swap(E_[std::size_t(ev)].cbs);  // keep the list's storage for reuse
            free_ev_.push_back(ev);
        }
    }
}

}  // namespace lachesis
